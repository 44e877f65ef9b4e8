package grpcxds

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/extprocgrpc"
)

// maxReplayBytes bounds what a stream keeps of its sent messages to replay
// on a retry, as grpc-go's default retry buffer does: past it the stream
// is committed to its attempt.
const maxReplayBytes = 256 << 10

// start prepares one RPC: the configuration in force, the route and
// cluster (selectInto), the deadline, and the HTTP filters run. It returns
// the RPC's context and selection, whose finish the caller calls once the
// RPC is over, the changes the filters make to the response headers
// (nil for most RPCs), and the external processing filters that run on
// the rest of the RPC (nil for most: internal/extprocgrpc). A nil
// selection means the RPC goes to gRPC as it is, to fail there (a closed
// channel).
func (cs *channelState) start(ctx context.Context, method string, cc *grpc.ClientConn, opts []grpc.CallOption) (context.Context, *selection, []extauthz.Mutation, []*httpfilter.Proc, error) {
	cfg, err := cs.current(ctx, cc, waitForReady(opts))
	if err != nil || cfg == nil {
		return ctx, nil, nil, nil, err
	}
	if cfg.snap == nil {
		return ctx, nil, nil, nil, cfg.err
	}
	sel := &selection{Context: ctx, cc: cc, opts: opts}
	if err := cfg.selectInto(sel, method, cs.channelID, &cs.lastRoutes); err != nil {
		return ctx, nil, nil, nil, err
	}
	ctx = sel
	var cancel context.CancelFunc
	if sel.timeout > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > sel.timeout {
			// Else the application's deadline comes first, and is the
			// RPC's.
			if ctx.Done() == nil {
				// Nothing cancels the application's context: the
				// selection carries the deadline (deadline.go).
				sel.startDeadline(sel.timeout)
			} else {
				ctx, cancel = context.WithTimeout(ctx, sel.timeout)
			}
		}
	}
	res := cfg.chain.run(ctx, sel)
	switch {
	case res.Release == nil:
		sel.release = cancel
	case cancel == nil:
		sel.release = res.Release
	default:
		release := res.Release
		sel.release = func() { release(); cancel() }
	}
	if res.Denial != nil {
		sel.finish()
		return ctx, nil, nil, nil, denialError(res.Denial)
	}
	return ctx, sel, res.ResponseHeaders, res.Procs, nil
}

// waitForReady reports whether an RPC's call options (the channel's
// defaults among them: gRPC hands interceptors both) make it wait for
// ready rather than fail fast.
func waitForReady(opts []grpc.CallOption) bool {
	wfr := false
	for _, o := range opts {
		if f, ok := o.(grpc.FailFastCallOption); ok {
			wfr = !f.FailFast // the last one given wins, as in gRPC
		}
	}
	return wfr
}

// replayable reports whether a unary request can be sent again: gRPC keeps
// at most maxReplayBytes to replay, and commits an RPC with a larger
// request to its first attempt.
func replayable(req any) bool {
	m, ok := req.(proto.Message)
	return ok && proto.Size(m) <= maxReplayBytes
}

// unary is the channel's unary interceptor.
func (cs *channelState) unary(appCtx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, sel, respHeaders, procs, err := cs.start(appCtx, method, cc, opts)
	if errors.Is(err, errFaultAbortOK) {
		// What a unary RPC of grpc-go sees of a stream that ended with OK
		// before any response: io.EOF.
		return io.EOF
	}
	if err != nil {
		return deliverDenial(err, opts)
	}
	defer sel.finish()
	if respHeaders != nil {
		// Deferred after finish, so run before it: once gRPC has filled
		// the call options, whichever way the RPC ended.
		defer extauthzgrpc.AddResponseHeaders(opts, respHeaders)
	}
	if procs != nil {
		// Once per RPC, outside its attempts (internal/extprocgrpc).
		return extprocgrpc.InvokeUnary(appCtx, ctx, procs, req, reply, opts, func(ctx context.Context, req any, opts []grpc.CallOption) error {
			return cs.invokeAttempts(ctx, sel, method, req, reply, cc, invoker, opts)
		})
	}
	return cs.invokeAttempts(ctx, sel, method, req, reply, cc, invoker, opts)
}

// invokeAttempts makes a unary RPC's attempts, as many as its retry
// policy allows.
func (cs *channelState) invokeAttempts(ctx context.Context, sel *selection, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	if sel == nil || sel.retry == nil || !replayable(req) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	// Each attempt's header and trailer, in sel: gRPC hands back no header
	// for a response that was trailers only, or for an attempt that never
	// reached a server. The trailer comes with the pick's Done (pickFor).
	sel.attemptOpts = [1]grpc.CallOption{grpc.Header(&sel.header)}
	sel.wantTrailer = true
	attemptOpts := sel.attemptOpts[:]
	if len(opts) > 0 {
		attemptOpts = append(opts[:len(opts):len(opts)], sel.attemptOpts[:]...)
	}
	var rs route.RetryState
	var delay time.Duration // waited between attempts
	for {
		sel.header, sel.trailer = nil, nil
		rs.Attempts++
		err := invoker(ctx, method, req, reply, cc, attemptOpts...)
		if err == nil {
			cs.recordRetries(cc, method, rs.Attempts, delay)
			return nil
		}
		d, retry := retryNext(sel.retry, &rs, err, sel.header != nil, sel.trailer, sel)
		if !retry {
			cs.recordRetries(cc, method, rs.Attempts, delay)
			return err
		}
		if werr := cs.wait(ctx, d); werr != nil {
			cs.recordRetries(cc, method, rs.Attempts, delay)
			return status.FromContextError(werr).Err()
		}
		delay += d
	}
}

// stream is the channel's stream interceptor.
func (cs *channelState) stream(appCtx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, sel, respHeaders, procs, err := cs.start(appCtx, method, cc, opts)
	if errors.Is(err, errFaultAbortOK) {
		return endedStream{ctx}, nil
	}
	if err != nil {
		return nil, deliverDenial(err, opts)
	}
	var ps *extprocgrpc.ClientRPC
	if procs != nil {
		// Once per RPC, outside its attempts (internal/extprocgrpc).
		ctx, ps = extprocgrpc.NewClientRPC(appCtx, ctx, procs, !desc.ServerStreams)
		opts = ps.CallOptions(opts)
	}
	first, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		sel.finish()
		return nil, ps.Finish(err)
	}
	s := &retryStream{cs: cs, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts, attempt: first}
	s.rs.Attempts = 1
	if sel != nil {
		s.policy, s.sel = sel.retry, sel
	}
	s.committed = s.policy == nil
	var out grpc.ClientStream = s
	if respHeaders != nil {
		out = extauthzgrpc.WithResponseHeaders(s, desc, opts, respHeaders)
	}
	if ps != nil {
		return ps.Wrap(out, desc, opts), nil
	}
	return out, nil
}

// retryStream is a client stream that gRPC's retry rules apply to: until
// it is committed (a response header or message received, or more sent
// than can be kept to replay), an attempt that fails with a status the
// policy retries is replaced by a new one, to which the messages sent so
// far are sent again.
//
// gRPC allows one goroutine sending (SendMsg, CloseSend) beside one
// receiving (RecvMsg, Header); a new attempt is made by the receiving one.
type retryStream struct {
	// Read-only after stream.
	cs       *channelState
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	policy   *route.RetryPolicy // nil: no retries
	sel      *selection         // nil: gRPC's own failure; its finish ends what start began

	mu        sync.Mutex
	attempt   grpc.ClientStream // the current attempt; guarded by mu
	committed bool              // guarded by mu
	closed    bool              // CloseSend was called; guarded by mu
	// ended: the RPC's end was reported; only the receiving goroutine.
	// (The three bools side by side keep the struct, allocated per
	// stream, at 200 bytes with delay added.)
	ended     bool
	sent      []any // what to replay, until committed; guarded by mu
	sentBytes int   // guarded by mu
	// Only the receiving goroutine: the retry state and the time waited
	// between attempts.
	rs    route.RetryState
	delay time.Duration
}

func (s *retryStream) current() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempt
}

// Header implements grpc.ClientStream. An attempt that ended without
// headers gives none (gRPC's streams say nil, nil then); RecvMsg learns
// how it ended, and retries it. grpc-go's own retries would already have
// made the next attempt here.
func (s *retryStream) Header() (metadata.MD, error) {
	md, err := s.current().Header()
	if md != nil {
		s.commit()
	}
	return md, err
}

// Trailer implements grpc.ClientStream.
func (s *retryStream) Trailer() metadata.MD { return s.current().Trailer() }

// Context implements grpc.ClientStream.
func (s *retryStream) Context() context.Context { return s.current().Context() }

// CloseSend implements grpc.ClientStream.
func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	a := s.attempt
	s.mu.Unlock()
	return a.CloseSend()
}

func (s *retryStream) commit() {
	s.mu.Lock()
	s.committed, s.sent = true, nil
	s.mu.Unlock()
}

// SendMsg implements grpc.ClientStream.
func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	a, kept := s.attempt, !s.committed
	if kept {
		pm, ok := m.(proto.Message)
		if ok {
			s.sentBytes += proto.Size(pm)
		}
		if !ok || s.sentBytes > maxReplayBytes {
			s.committed, s.sent, kept = true, nil, false
		} else {
			s.sent = append(s.sent, m)
		}
	}
	s.mu.Unlock()
	err := a.SendMsg(m)
	if errors.Is(err, io.EOF) && kept {
		// The attempt is over; RecvMsg learns how, and a new attempt, if
		// there is one, gets m again.
		return nil
	}
	return err
}

// RecvMsg implements grpc.ClientStream.
func (s *retryStream) RecvMsg(m any) error {
	for {
		a := s.current()
		err := a.RecvMsg(m)
		if err == nil {
			s.commit()
			if !s.desc.ServerStreams {
				s.end()
			}
			return nil
		}
		if err = s.retry(a, err); err != nil {
			s.commit()
			s.end()
			return err
		}
	}
}

// end ends the RPC: what start began, and the report of its retries.
func (s *retryStream) end() {
	s.sel.finish()
	if !s.ended {
		s.ended = true
		s.cs.recordRetries(s.cc, s.method, s.rs.Attempts, s.delay)
	}
}

// retry replaces the attempt a, which failed with err, with a new one if
// the policy allows it: it returns nil if it did, or the error the RPC
// ends with.
func (s *retryStream) retry(a grpc.ClientStream, err error) error {
	s.mu.Lock()
	committed := s.committed
	s.mu.Unlock()
	if s.policy == nil || committed {
		return err
	}
	header, _ := a.Header()
	d, ok := retryNext(s.policy, &s.rs, err, header != nil, a.Trailer(), s.sel)
	if !ok {
		return err
	}
	if werr := s.cs.wait(s.ctx, d); werr != nil {
		return status.FromContextError(werr).Err()
	}
	s.delay += d
	s.rs.Attempts++
	next, nerr := s.streamer(s.ctx, s.desc, s.cc, s.method, s.opts...)
	if nerr != nil {
		return nerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.sent {
		if next.SendMsg(m) != nil {
			break // the attempt failed: its RecvMsg says how
		}
	}
	if s.closed {
		_ = next.CloseSend()
	}
	s.attempt = next
	return nil
}
