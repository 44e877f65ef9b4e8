package extprocgrpc

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/internal/extauthzgrpc"
)

// The external processing filter (gRFC A93) on a channel's RPCs, the
// client side of the binding (grpcxds's interceptors call it). The
// chain's run (dataplane/httpfilter) sends the RPC's headers to the
// processor and applies its answer to the outgoing metadata, like any
// filter's change; what is here hands the processor the rest of the RPC
// and the RPC what the processor answers: the request messages and
// half-close, the response headers, messages and trailers, before the
// application sees them. Messages are serialized protocol buffers (gRFC
// A93's GRPC body mode): grpc-go's interceptors see decoded messages, so
// a message is marshalled for the processor and the processor's
// unmarshalled into the RPC's type, only when a body mode sends them.
//
// The filter runs once per RPC, outside its retry attempts, as every HTTP
// filter of the channel does (gRFC A39 places them above the retry code,
// as grpc-go's interceptors and C-core's dynamic filters run): the
// processor sees the RPC the application made, and what it answers is
// what every attempt sends. The ext_proc stream is one per RPC (gRFC A93),
// so a retry cannot send the processor a second set of headers.

// ClientPrefix starts the client side's ext_proc error texts.
const ClientPrefix = "goxds: ext_proc"

// ClientRPC is a channel's RPC through its external processing filters,
// in the chain's order, each with its session (dataplane/extproc), and
// the RPC's cancel, which a filter failing the RPC (an immediate
// response, a failed stream, a message it cannot take) calls: the RPC
// ends at once, as an out-of-band cancellation (gRFC A93).
type ClientRPC struct {
	procs  []*httpfilter.Proc
	sess   []*extproc.Session
	links  []*clientLink   // each session's peer, set when the RPC's stream is had
	appCtx context.Context // the application's
	ctx    context.Context // appCtx, cancelled by cancel: the sessions' waits
	cancel context.CancelFunc
}

// NewClientRPC starts the sessions of procs, the filters a chain's run
// left on an RPC, and returns the context the RPC goes on with (ctx,
// the interceptor's), cancelled when a filter fails it. The sessions'
// waits end with appCtx, the application's: the interceptor's ends when
// the RPC's route is released (a route timeout's context), which a
// retrying stream does when the server's end comes, before the filters
// have handed it to their processors. single: the RPC has one response
// message.
func NewClientRPC(appCtx, ctx context.Context, procs []*httpfilter.Proc, single bool) (context.Context, *ClientRPC) {
	ctx, cancel := context.WithCancel(ctx)
	wctx, wcancel := context.WithCancel(appCtx)
	r := &ClientRPC{procs: procs, appCtx: appCtx, ctx: wctx, cancel: func() { cancel(); wcancel() },
		sess: make([]*extproc.Session, len(procs)), links: make([]*clientLink, len(procs))}
	for i, p := range procs {
		p.WatchUntil(appCtx)
		r.links[i] = &clientLink{}
		r.sess[i] = p.Call.Session(extproc.SessionOptions{Client: r.links[i], Ctx: wctx, Fail: cancel,
			Single: single, Code: Code, Prefix: ClientPrefix})
	}
	return ctx, r
}

// CallOptions are opts with, when a filter's processor gives the RPC's
// request messages, the identity compressor last (the last one given
// wins): gRFC A93 has the processor's messages sent uncompressed, since
// whether the application's could be (a sensitive payload) does not
// carry over to them.
func (r *ClientRPC) CallOptions(opts []grpc.CallOption) []grpc.CallOption {
	for _, p := range r.procs {
		if p.Config.Modes.RequestBody && !p.Config.ObservabilityMode {
			return append(opts[:len(opts):len(opts)], grpc.UseCompressor(encoding.Identity))
		}
	}
	return opts
}

// failure is the status the first filter that failed the RPC gave, with
// the trailers it gives (nil: none failed it). The application's cancel
// (or deadline) comes first: it ends the processing streams too, which
// the filters would otherwise report as failed.
func (r *ClientRPC) failure() (error, metadata.MD) {
	if err := r.appCtx.Err(); err != nil {
		return status.FromContextError(err).Err(), nil
	}
	for _, s := range r.sess {
		if err, t := s.Failure(); err != nil {
			return Status(err), t
		}
	}
	return nil, nil
}

// Finish ends the filters' work on the RPC, which ended with err, and
// returns the status it ends with: a filter's failure comes first. A nil
// r (no filters) returns err.
func (r *ClientRPC) Finish(err error) error {
	if r == nil {
		return err
	}
	if f, _ := r.failure(); f != nil {
		err = f
	}
	// The RPC's end first: a session's writer may be sending on it.
	r.cancel()
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.sess[i].Close()
		r.procs[i].Release()
	}
	return err
}

// setCallOptions puts the response headers and trailers the filters
// left in the RPC's grpc.Header and grpc.Trailer call options, which
// gRPC filled with the server's.
func setCallOptions(opts []grpc.CallOption, header, trailer metadata.MD) {
	extauthzgrpc.SetHeaderOption(opts, header)
	extauthzgrpc.SetTrailerOption(opts, trailer)
}

// InvokeUnary runs a unary RPC through the external processing filters
// procs, as NewClientRPC starts them: its request through each (in the
// chain's order), the RPC's attempts (invoke), then its response through
// each, the filter nearest the server first, each session reading the
// one before's result as its peer (unaryPeer).
func InvokeUnary(appCtx, ctx context.Context, procs []*httpfilter.Proc, req, reply any, opts []grpc.CallOption,
	invoke func(ctx context.Context, req any, opts []grpc.CallOption) error) error {
	ctx, r := NewClientRPC(appCtx, ctx, procs, true)
	opts = r.CallOptions(opts)
	for _, p := range procs {
		if p.Config.Modes.RequestBody {
			m, err := UnaryRequest(r.ctx, p.Call, ClientPrefix, req)
			if err != nil {
				return r.Finish(err)
			}
			req = m
		}
	}
	var header, trailer metadata.MD
	callOpts := append(opts[:len(opts):len(opts)], grpc.Header(&header), grpc.Trailer(&trailer))
	err := invoke(ctx, req, callOpts)
	if f, t := r.failure(); f != nil {
		setCallOptions(opts, nil, t)
		return withholdReply(procs, reply, r.Finish(f))
	}
	for i := len(procs) - 1; i >= 0; i-- {
		r.links[i].ClientStream = &unaryPeer{header: header, trailer: trailer, reply: reply, err: err}
		s := r.sess[i]
		if procs[i].Config.Modes.ResponseBody && err == nil && header != nil {
			err = Status(s.RecvMsg(reply))
		} else {
			err = Status(s.End(err))
		}
		h, _ := s.Header()
		header, trailer = h, s.Trailer()
	}
	if f, t := r.failure(); f != nil && t != nil {
		trailer = t
	}
	setCallOptions(opts, header, trailer)
	return withholdReply(procs, reply, r.Finish(err))
}

// withholdReply empties reply when a unary RPC fails (err) through procs
// not all in observability mode: gRPC wrote the server's message there,
// which a processor did not pass on (an immediate response, a failed
// stream, headers it did not let through), and the RPC fails as if
// cancelled (gRFC A93), without it. It returns err.
func withholdReply(procs []*httpfilter.Proc, reply any, err error) error {
	if err == nil {
		return nil
	}
	for _, p := range procs {
		if !p.Config.ObservabilityMode {
			if pm, ok := reply.(proto.Message); ok {
				proto.Reset(pm)
			}
			break
		}
	}
	return err
}

// unaryPeer is a unary RPC's response as a session reads it: headers
// (nil: Trailers-Only), the one message, trailers, and the status.
type unaryPeer struct {
	grpc.ClientStream // not called: a unary RPC has no stream
	header, trailer   metadata.MD
	reply             any
	err               error
	read              bool
}

func (u *unaryPeer) Header() (metadata.MD, error) { return u.header, u.err }
func (u *unaryPeer) Trailer() metadata.MD         { return u.trailer }

func (u *unaryPeer) RecvMsg(m any) error {
	if u.err != nil {
		return u.err
	}
	if u.read {
		return io.EOF
	}
	u.read = true
	proto.Merge(m.(proto.Message), u.reply.(proto.Message))
	return nil
}
