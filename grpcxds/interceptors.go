package grpcxds

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// maxReplayBytes bounds what a stream keeps of its sent messages to replay
// on a retry, as grpc-go's default retry buffer does: past it the stream
// is committed to its attempt.
const maxReplayBytes = 256 << 10

// start prepares one RPC: the configuration in force, the route and
// cluster (selectRPC), the deadline, and the HTTP filters run. It returns
// the RPC's context and config, and finish, to call once the RPC is over.
// A nil config means the RPC goes to gRPC as it is, to fail there (a
// closed channel).
func (cs *channelState) start(ctx context.Context, method string, cc *grpc.ClientConn, opts []grpc.CallOption) (context.Context, *rpcConfig, func(), error) {
	cfg, err := cs.current(ctx, cc, waitForReady(opts))
	if err != nil || cfg == nil {
		return ctx, nil, noFinish, err
	}
	if cfg.snap == nil {
		return ctx, nil, nil, cfg.err
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	rc, err := cfg.selectRPC(method, md, cs.channelID)
	if err != nil {
		return ctx, nil, nil, err
	}
	ctx = context.WithValue(ctx, selectionKey{}, rc.sel)
	// The usual RPC has no deadline of its route and starts nothing in
	// its filters: it has nothing to end, and allocates no end.
	var end *rpcEnd
	if rc.timeout > 0 {
		// context.WithTimeout keeps an earlier deadline of the
		// application's: the RPC ends at the earlier of the two.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rc.timeout)
		end = &rpcEnd{cancel: cancel}
	}
	release, err := runFilters(ctx, rc.filters, md)
	if err != nil {
		if end != nil {
			end.finish()
		}
		return ctx, nil, nil, err
	}
	if release != nil {
		if end == nil {
			end = new(rpcEnd)
		}
		end.release = release
	}
	if end == nil {
		return ctx, rc, noFinish, nil
	}
	return ctx, rc, end.finish, nil
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

// noFinish is the finish of an RPC that started nothing to end.
func noFinish() {}

// rpcEnd is what start began for one RPC, ended once by finish (a stream
// may reach its end by more than one path): what the filters started, and
// the deadline's timer. One allocation, where sync.OnceFunc made several on
// every RPC.
type rpcEnd struct {
	done    atomic.Bool
	release func()             // nil: none
	cancel  context.CancelFunc // nil: none
}

func (e *rpcEnd) finish() {
	if e.done.Swap(true) {
		return
	}
	if e.release != nil {
		e.release()
	}
	if e.cancel != nil {
		e.cancel()
	}
}

// runFilters runs the filters of an RPC in order. The first to fail the
// RPC ends the run; what the filters started is released by the returned
// func when the RPC ends, or at once on failure. It returns nil when no
// filter started anything (a fault that did not fire), as for most RPCs:
// they allocate nothing here.
func runFilters(ctx context.Context, calls []filterCall, md metadata.MD) (func(), error) {
	var releases []func()
	for _, c := range calls {
		release, err := c.runtime.start(ctx, c.config, md)
		if err != nil {
			releaseInReverse(releases)
			return nil, err
		}
		if release != nil {
			releases = append(releases, release)
		}
	}
	switch len(releases) {
	case 0:
		return nil, nil
	case 1:
		return releases[0], nil
	}
	return func() { releaseInReverse(releases) }, nil
}

// releaseInReverse releases what filters started, the last first.
func releaseInReverse(releases []func()) {
	for i := len(releases) - 1; i >= 0; i-- {
		releases[i]()
	}
}

// replayable reports whether a unary request can be sent again: gRPC keeps
// at most maxReplayBytes to replay, and commits an RPC with a larger
// request to its first attempt.
func replayable(req any) bool {
	m, ok := req.(proto.Message)
	return ok && proto.Size(m) <= maxReplayBytes
}

// unary is the channel's unary interceptor.
func (cs *channelState) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, rc, finish, err := cs.start(ctx, method, cc, opts)
	if errors.Is(err, errFaultAbortOK) {
		// What a unary RPC of grpc-go sees of a stream that ended with OK
		// before any response: io.EOF.
		return io.EOF
	}
	if err != nil {
		return err
	}
	defer finish()
	if rc == nil || rc.retry == nil || !replayable(req) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var rs retryState
	for {
		var header, trailer metadata.MD
		rs.attempts++
		err := invoker(ctx, method, req, reply, cc, append(opts[:len(opts):len(opts)], grpc.Header(&header), grpc.Trailer(&trailer))...)
		if err == nil {
			return nil
		}
		// gRPC hands back no header for a response that was trailers only,
		// or for an attempt that never reached a server.
		d, retry := rc.retry.next(&rs, err, header != nil, trailer, rc.sel)
		if !retry {
			return err
		}
		if werr := cs.wait(ctx, d); werr != nil {
			return status.FromContextError(werr).Err()
		}
	}
}

// stream is the channel's stream interceptor.
func (cs *channelState) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, rc, finish, err := cs.start(ctx, method, cc, opts)
	if errors.Is(err, errFaultAbortOK) {
		return endedStream{ctx}, nil
	}
	if err != nil {
		return nil, err
	}
	first, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		finish()
		return nil, err
	}
	s := &retryStream{cs: cs, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts, finish: finish, attempt: first}
	s.rs.attempts = 1
	if rc != nil {
		s.policy, s.sel = rc.retry, rc.sel
	}
	s.committed = s.policy == nil
	return s, nil
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
	policy   *retryPolicy // nil: no retries
	sel      *selection
	finish   func() // ends what start began; once

	mu        sync.Mutex
	attempt   grpc.ClientStream // the current attempt; guarded by mu
	committed bool              // guarded by mu
	sent      []any             // what to replay, until committed; guarded by mu
	sentBytes int               // guarded by mu
	closed    bool              // CloseSend was called; guarded by mu
	rs        retryState        // only the receiving goroutine
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
				s.finish()
			}
			return nil
		}
		if err = s.retry(a, err); err != nil {
			s.commit()
			s.finish()
			return err
		}
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
	d, ok := s.policy.next(&s.rs, err, header != nil, a.Trailer(), s.sel)
	if !ok {
		return err
	}
	if werr := s.cs.wait(s.ctx, d); werr != nil {
		return status.FromContextError(werr).Err()
	}
	s.rs.attempts++
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
