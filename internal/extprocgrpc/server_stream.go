package extprocgrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/resources"
)

// ServerRPC is one external processing filter on one server's RPC, after
// the client's headers: the ServerTransportStream the handler (and the
// filters after this one) set headers and trailers on, which the
// filter's session (dataplane/extproc) holds until the processor has
// seen them and runs the RPC's messages and end through. What is here
// converts gRPC's types and statuses.
type ServerRPC struct {
	// Read-only after StartServerRPC.
	rpcCtx   context.Context // the RPC's, before this filter's cancel
	ctx      context.Context // rpcCtx, cancelled when the filter fails the RPC
	call     *extproc.Call
	modes    resources.ExtProcModes
	real     grpc.ServerTransportStream // toward the transport
	link     *serverLink
	sess     *extproc.Session
	cancel   context.CancelFunc
	stopDone func() bool // the RPC's end ending the call, undone
}

func newServerRPC(rpcCtx context.Context, call *extproc.Call, modes resources.ExtProcModes, real grpc.ServerTransportStream, stopDone func() bool) *ServerRPC {
	ctx, cancel := context.WithCancel(rpcCtx)
	p := &ServerRPC{rpcCtx: rpcCtx, ctx: ctx, call: call, modes: modes, real: real, link: &serverLink{real: real},
		cancel: cancel, stopDone: stopDone}
	p.sess = call.Session(extproc.SessionOptions{Server: p.link, Ctx: rpcCtx, Fail: cancel, Code: Code, Prefix: ServerPrefix})
	return p
}

// Unwrap is the ServerTransportStream the filter's headers go to.
func (p *ServerRPC) Unwrap() grpc.ServerTransportStream { return p.real }

// Method implements grpc.ServerTransportStream.
func (p *ServerRPC) Method() string { return p.real.Method() }

// SetHeader implements grpc.ServerTransportStream: the headers are held
// for the processor.
func (p *ServerRPC) SetHeader(md metadata.MD) error { return Status(p.sess.SetHeader(md)) }

// SendHeader implements grpc.ServerTransportStream: the headers go to the
// processor, then as it says to the client.
func (p *ServerRPC) SendHeader(md metadata.MD) error { return Status(p.sess.SendHeader(md)) }

// SetTrailer implements grpc.ServerTransportStream: the trailers are held
// for the processor.
func (p *ServerRPC) SetTrailer(md metadata.MD) error {
	p.sess.SetTrailer(md)
	return nil
}

// finish ends the filter's part of the RPC, whose handler (or a filter
// after this one) returned err: the session tells the processor the
// response's end and sets the trailers it leaves, and the status the RPC
// ends with is returned.
func (p *ServerRPC) finish(err error) error {
	ended := Status(p.sess.End(err))
	if ended != nil && p.rpcCtx.Err() != nil {
		ended = rpcStatus(p.rpcCtx, ended)
	}
	p.sess.Close()
	p.stopDone()
	p.cancel()
	return ended
}

// unary runs a unary RPC's handler (next) inside the filter: the request
// message through the processor (which must give back exactly one), then
// the response's headers, message and end. skipBody: a filter after this
// one failed the RPC, and its message goes nowhere.
func (p *ServerRPC) unary(ctx context.Context, req any, skipBody bool, next grpc.UnaryHandler) (any, error) {
	if p.modes.RequestBody && !skipBody {
		r, err := UnaryRequest(p.rpcCtx, p.call, ServerPrefix, req)
		if err != nil {
			return nil, p.finish(err)
		}
		req = r
	}
	resp, err := next(ctx, req)
	if err != nil {
		return nil, p.finish(err)
	}
	if herr := p.sess.TakeHeader(); herr != nil {
		return nil, p.finish(Status(herr))
	}
	if !p.modes.ResponseBody {
		return resp, p.finish(nil)
	}
	// The session's writer hands the processor's messages to got, and
	// finish waits for it.
	var got []any
	p.link.send = func(m any) error { got = append(got, m); return nil }
	if err := p.sess.SendMsg(resp); err != nil {
		return nil, p.finish(Status(err))
	}
	if err := p.finish(nil); err != nil {
		return nil, err
	}
	if len(got) != 1 {
		return nil, notOneMessage(ServerPrefix, "response", len(got))
	}
	return got[0], nil
}

// serverLink is a session's peer: the transport's stream (or the filter
// before this one) for headers and trailers, and for messages the
// ServerStream toward the client (next, streaming RPCs) or a unary
// response's collector (send).
type serverLink struct {
	real grpc.ServerTransportStream
	next grpc.ServerStream
	send func(m any) error
}

func (l *serverLink) SendMsg(m any) error {
	if l.send != nil {
		return l.send(m)
	}
	return l.next.SendMsg(m)
}

func (l *serverLink) RecvMsg(m any) error                    { return l.next.RecvMsg(m) }
func (l *serverLink) SetHeader(h map[string][]string) error  { return l.real.SetHeader(h) }
func (l *serverLink) SendHeader(h map[string][]string) error { return l.real.SendHeader(h) }
func (l *serverLink) SetTrailer(t map[string][]string)       { _ = l.real.SetTrailer(t) }

// serverProcStream is the ServerStream of a streaming RPC inside one
// external processing filter; its messages go through the filter's
// session.
type serverProcStream struct{ p *ServerRPC }

func (s *serverProcStream) Context() context.Context        { return s.p.ctx }
func (s *serverProcStream) SetHeader(md metadata.MD) error  { return s.p.SetHeader(md) }
func (s *serverProcStream) SendHeader(md metadata.MD) error { return s.p.SendHeader(md) }
func (s *serverProcStream) SetTrailer(md metadata.MD)       { _ = s.p.SetTrailer(md) }
func (s *serverProcStream) SendMsg(m any) error             { return Status(s.p.sess.SendMsg(m)) }
func (s *serverProcStream) RecvMsg(m any) error             { return Status(s.p.sess.RecvMsg(m)) }
