package xdsserver

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/internal/extprocgrpc"
	"github.com/goxds/xds/resources"
)

// procRPC is one external processing filter on one RPC, after the
// client's headers: the ServerTransportStream the handler (and the
// filters after this one) set headers and trailers on, held here until
// the processor has seen them, and the goroutines that carry messages
// between the processor and the RPC when a body mode sends them.
//
// Messages are serialized protocol buffers (gRFC A93's GRPC body mode):
// gRPC's public server API hands a filter decoded messages, so a message
// is marshalled to go to the processor and the processor's are
// unmarshalled into the handler's type, only when the body mode sends
// them.
type procRPC struct {
	// Read-only after extProc.
	rpcCtx context.Context // the RPC's, before this filter's cancel
	ctx    context.Context // rpcCtx, cancelled when the filter fails the RPC
	call   *extproc.Call
	modes  resources.ExtProcModes
	real   grpc.ServerTransportStream // toward the transport
	cancel context.CancelFunc
	stops  []func() bool // context.AfterFunc registrations to undo

	// sendMu serializes what goes toward the transport: the headers and
	// the server's messages, which come from the handler and the sender.
	sendMu sync.Mutex

	// mu guards the fields below.
	mu      sync.Mutex
	header  metadata.MD // set by the handler, not yet sent
	trailer metadata.MD // set by the handler, not yet sent
	// headerTaken: the headers went to the processor (or on), and
	// hdrReady is closed once they are on their way to the client.
	headerTaken bool
	hdrReady    chan struct{}
	senderDone  chan struct{} // closed when the sender ends; nil until it starts
	sendErr     error         // why the sender failed the RPC
	// failTrailerSet: the trailers of the filter's failure were set.
	failTrailerSet bool
	recvCancel     context.CancelCauseFunc
}

func newProcRPC(rpcCtx, ctx context.Context, call *extproc.Call, modes resources.ExtProcModes, real grpc.ServerTransportStream) *procRPC {
	return &procRPC{rpcCtx: rpcCtx, ctx: ctx, call: call, modes: modes, real: real, hdrReady: make(chan struct{})}
}

// Method implements grpc.ServerTransportStream.
func (p *procRPC) Method() string { return p.real.Method() }

// SetHeader implements grpc.ServerTransportStream: the headers are held
// for the processor.
func (p *procRPC) SetHeader(md metadata.MD) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.headerTaken {
		return status.Error(codes.Internal, "xdsserver: SetHeader after the headers were sent")
	}
	p.header = metadata.Join(p.header, md)
	return nil
}

// SendHeader implements grpc.ServerTransportStream: the headers go to the
// processor, then as it says to the client.
func (p *procRPC) SendHeader(md metadata.MD) error {
	if err := p.SetHeader(md); err != nil {
		return err
	}
	return p.flushHeader(false, true)
}

// SetTrailer implements grpc.ServerTransportStream: the trailers are held
// for the processor.
func (p *procRPC) SetTrailer(md metadata.MD) error {
	p.mu.Lock()
	p.trailer = metadata.Join(p.trailer, md)
	p.mu.Unlock()
	return nil
}

// flushHeader sends the held headers to the processor (when
// response_header_mode says so), once, and hands on what it answers:
// sent at once (send), or set to go with the response or its
// Trailers-Only end (trailersOnly, which the processor is told).
func (p *procRPC) flushHeader(trailersOnly, send bool) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	p.mu.Lock()
	if p.headerTaken {
		p.mu.Unlock()
		return nil
	}
	p.headerTaken = true
	h := p.header
	p.mu.Unlock()
	defer close(p.hdrReady)
	out := map[string][]string(h)
	if p.modes.ResponseHeaders {
		var err error
		if out, err = p.call.ServerHeaders(h, trailersOnly); err != nil {
			return extprocgrpc.Status(err)
		}
	}
	if send {
		return p.real.SendHeader(out)
	}
	return p.real.SetHeader(out)
}

// startSender starts, once, the goroutine that hands the processor's
// response messages on: each parsed as newMsg gives (nil: the handler
// sent none, and any is an error) and given to sink.
func (p *procRPC) startSender(newMsg func() proto.Message, sink func(proto.Message) error) {
	p.mu.Lock()
	if p.senderDone != nil {
		p.mu.Unlock()
		return
	}
	done := make(chan struct{})
	p.senderDone = done
	p.mu.Unlock()
	go func() {
		defer close(done)
		for {
			b, ok, err := p.call.NextServerMessage(p.rpcCtx)
			if err != nil || !ok {
				return // the trailers, or the call's end, which finish reads
			}
			if p.sendError() != nil {
				continue // failed: read on, so the processor is not held up
			}
			select {
			case <-p.hdrReady:
			case <-p.call.Context().Done():
				return
			}
			if newMsg == nil {
				p.failSend(status.Error(codes.Internal, "xdsserver: ext_proc: the processor sent a response message, but the handler sent none whose type it could take"))
				continue
			}
			m := newMsg()
			if err := extprocgrpc.Unmarshal(procPrefix, "response", b, m); err != nil {
				p.failSend(err)
				continue
			}
			p.sendMu.Lock()
			err = sink(m)
			p.sendMu.Unlock()
			if err != nil {
				p.failSend(err)
			}
		}
	}()
}

// failSend records the sender's failure, which fails the RPC.
func (p *procRPC) failSend(err error) {
	p.mu.Lock()
	if p.sendErr == nil {
		p.sendErr = err
	}
	p.mu.Unlock()
	p.cancel()
}

func (p *procRPC) sendError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sendErr
}

// waitSender waits for the sender, if one started, to end.
func (p *procRPC) waitSender() {
	p.mu.Lock()
	done := p.senderDone
	p.mu.Unlock()
	if done != nil {
		<-done
	}
}

// finish ends the filter's part of the RPC, whose handler (or a filter
// after this one) returned err: the response's end goes to the processor
// (the headers, for a Trailers-Only response; else the trailers, with
// grpc-status and grpc-message), and the status the RPC ends with is
// returned, with the trailers the processor's answer gives.
func (p *procRPC) finish(err error) (ended error) {
	defer p.end()
	defer func() {
		if ended != nil && p.rpcCtx.Err() != nil {
			ended = rpcStatus(p.rpcCtx, ended)
		}
	}()
	if f := p.failure(); f != nil {
		return f
	}
	p.mu.Lock()
	taken := p.headerTaken
	p.mu.Unlock()
	if !taken {
		// Nothing was sent: a Trailers-Only response, told to the
		// processor as headers ending the stream, with no trailers event
		// (gRFC A93).
		if herr := p.flushHeader(true, false); herr != nil {
			return p.failureOr(herr)
		}
		p.forwardTrailer(p.heldTrailer())
		return err
	}
	if p.modes.ResponseBody {
		p.startSender(nil, nil) // reads on to the end, whatever comes
	}
	st := status.Convert(err)
	t := metadata.Join(p.heldTrailer(), metadata.Pairs("grpc-status", strconv.Itoa(int(st.Code()))))
	if st.Message() != "" {
		t.Set("grpc-message", st.Message())
	}
	out, terr := p.call.ServerTrailers(t)
	p.waitSender()
	if terr != nil {
		return p.failureOr(extprocgrpc.Status(terr))
	}
	if serr := p.sendError(); serr != nil {
		return serr
	}
	p.forwardTrailer(out)
	return err
}

// failure is the status the filter failed the RPC with, and has its
// trailers (an immediate response to the trailers) set; nil when it did
// not.
func (p *procRPC) failure() error {
	err := p.call.Err()
	if err == nil {
		return nil
	}
	var st *extproc.Status
	if errors.As(err, &st) && st.Trailers != nil {
		p.mu.Lock()
		first := !p.failTrailerSet
		p.failTrailerSet = true
		p.mu.Unlock()
		if first {
			p.forwardTrailer(st.Trailers)
		}
	}
	return extprocgrpc.Status(err)
}

// failureOr is failure, or err when the filter did not fail the RPC.
func (p *procRPC) failureOr(err error) error {
	if f := p.failure(); f != nil {
		return f
	}
	return err
}

func (p *procRPC) heldTrailer() metadata.MD {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trailer.Copy()
}

// forwardTrailer sets t as the RPC's trailers, less the status, which
// grpc-go writes from the RPC's error.
func (p *procRPC) forwardTrailer(t map[string][]string) {
	md := metadata.MD(t).Copy()
	delete(md, "grpc-status")
	delete(md, "grpc-message")
	if len(md) > 0 {
		_ = p.real.SetTrailer(md)
	}
}

// end releases the filter's part of the RPC; the processing stream
// closes (in observability mode, after deferred_close_timeout).
func (p *procRPC) end() {
	p.call.Done()
	p.waitSender()
	for _, stop := range p.stops {
		stop()
	}
	p.cancel()
	p.mu.Lock()
	rc := p.recvCancel
	p.mu.Unlock()
	if rc != nil {
		rc(nil)
	}
}

// unary runs a unary RPC's handler (next) inside the filter: the request
// message through the processor (which must give back exactly one), then
// the response's headers, message and end. skipBody: a filter after this
// one failed the RPC, and its message goes nowhere.
func (p *procRPC) unary(ctx context.Context, req any, skipBody bool, next grpc.UnaryHandler) (any, error) {
	if p.modes.RequestBody && !skipBody {
		r, err := extprocgrpc.UnaryRequest(p.rpcCtx, p.call, procPrefix, req)
		if err != nil {
			return nil, p.finish(err)
		}
		req = r
	}
	resp, err := next(ctx, req)
	if err != nil {
		return nil, p.finish(err)
	}
	if herr := p.flushHeader(false, false); herr != nil {
		return nil, p.finish(herr)
	}
	if !p.modes.ResponseBody {
		return resp, p.finish(nil)
	}
	m, b, err := extprocgrpc.Marshal(procPrefix, "the response", resp)
	if err != nil {
		return nil, p.finish(err)
	}
	var got []proto.Message
	p.startSender(extprocgrpc.NewLike(m), func(x proto.Message) error { got = append(got, x); return nil })
	if err := p.call.ServerMessage(b); err != nil {
		return nil, p.finish(extprocgrpc.Status(err))
	}
	if err := p.finish(nil); err != nil {
		return nil, err
	}
	// finish waited for the sender, which wrote got.
	if len(got) != 1 {
		return nil, status.Errorf(codes.Internal, "xdsserver: ext_proc: the processor gave %d response messages for a unary RPC, want 1", len(got))
	}
	return got[0], nil
}

// procStream is the ServerStream of a streaming RPC inside one external
// processing filter; next is the one toward the transport.
type procStream struct {
	p        *procRPC
	next     grpc.ServerStream
	recvOnce sync.Once
	recvCtx  context.Context // ends with the RPC, or with the pump's failure (its cause)
}

func (s *procStream) Context() context.Context        { return s.p.ctx }
func (s *procStream) SetHeader(md metadata.MD) error  { return s.p.SetHeader(md) }
func (s *procStream) SendHeader(md metadata.MD) error { return s.p.SendHeader(md) }
func (s *procStream) SetTrailer(md metadata.MD)       { _ = s.p.SetTrailer(md) }

// SendMsg sends the headers first (through the processor), then m: on
// to the client, or in GRPC body mode to the processor, whose messages
// the sender hands on.
func (s *procStream) SendMsg(m any) error {
	p := s.p
	if f := p.failure(); f != nil {
		return f
	}
	if err := p.flushHeader(false, true); err != nil {
		return err
	}
	if !p.modes.ResponseBody {
		p.sendMu.Lock()
		defer p.sendMu.Unlock()
		return s.next.SendMsg(m)
	}
	pm, b, err := extprocgrpc.Marshal(procPrefix, "a response", m)
	if err != nil {
		return err
	}
	p.startSender(extprocgrpc.NewLike(pm), func(x proto.Message) error { return s.next.SendMsg(x) })
	if err := p.call.ServerMessage(b); err != nil {
		return extprocgrpc.Status(err)
	}
	return p.sendError()
}

// RecvMsg gives the handler the next client message: from the client, or
// in GRPC body mode the processor's next one, while a pump (started at the
// first call, which gives the messages' type) sends the client's to the
// processor.
func (s *procStream) RecvMsg(m any) error {
	p := s.p
	if f := p.failure(); f != nil {
		return f
	}
	if !p.modes.RequestBody {
		return s.next.RecvMsg(m)
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return extprocgrpc.NotProto(procPrefix, m)
	}
	s.recvOnce.Do(func() { s.startPump(extprocgrpc.NewLike(pm)) })
	b, ok, err := p.call.NextClientMessage(s.recvCtx)
	if err != nil {
		if cause := context.Cause(s.recvCtx); s.recvCtx.Err() != nil && cause != nil {
			return extprocgrpc.Status(cause)
		}
		return extprocgrpc.Status(err)
	}
	if !ok {
		return io.EOF
	}
	if err := extprocgrpc.Unmarshal(procPrefix, "request", b, pm); err != nil {
		return err
	}
	return nil
}

// startPump reads the client's messages (as newMsg makes them) and its
// half-close and gives them to the call. It ends at the half-close, the
// RPC's end or the call's; a read blocked when the handler returns ends
// as grpc-go closes the stream, just after.
func (s *procStream) startPump(newMsg func() proto.Message) {
	p := s.p
	ctx, cancel := context.WithCancelCause(p.rpcCtx)
	s.recvCtx = ctx
	p.mu.Lock()
	p.recvCancel = cancel
	p.mu.Unlock()
	go func() {
		for {
			m := newMsg()
			err := s.next.RecvMsg(m)
			if errors.Is(err, io.EOF) {
				_ = p.call.ClientHalfClose()
				return
			}
			if err != nil {
				cancel(err)
				return
			}
			b, err := proto.Marshal(m)
			if err != nil {
				cancel(status.Errorf(codes.Internal, "xdsserver: ext_proc: marshal a request: %v", err))
				return
			}
			if p.call.ClientMessage(b) != nil {
				return // the call failed, which RecvMsg reports
			}
		}
	}()
}
