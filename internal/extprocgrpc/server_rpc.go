package extprocgrpc

import (
	"context"
	"net/netip"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// The external processing filter (gRFC A93) on a server's RPCs, the
// server side of the binding (xdsserver's interceptors call it): the
// RPC's events go to the processor as dataplane/extproc's Call decides;
// the client's headers are processed while the chain's filters run
// (StartServerRPC, so that the filters after it see the processor's
// changes), the messages and the server's headers and trailers through
// a wrapped ServerStream and ServerTransportStream (ServerRPC) around
// the handler (ServeUnary, ServeStream).

// ServerPrefix starts the server side's ext_proc error texts.
const ServerPrefix = "xdsserver: ext_proc"

// ClientOrFailing is NewClient's client of gs's processing service, or,
// when no channel can be made, extproc.FailingClient with that error: as
// a stream that fails to open, which failure_mode_allow may let through.
func ClientOrFailing(channels *extauthzgrpc.Channels, gs *resources.GrpcService) extproc.Client {
	client, err := NewClient(channels, gs)
	if err != nil {
		return extproc.FailingClient(err)
	}
	return client
}

// StartServerRPC starts the external processing filter of c, whose
// processor is proc, on a server's RPC to method with incoming metadata
// md, between the addresses local and remote. It sends the client's
// headers (with :path and :method, which the metadata lacks) and returns
// the filter's state for the rest of the RPC, and the context the RPC
// goes on with: the processor's changes in its incoming metadata, the
// filter's ServerTransportStream, and cancelled when the filter fails
// the RPC. An error is the status the RPC fails with; the filter is then
// over (nil ServerRPC).
func StartServerRPC(ctx context.Context, c *resources.ExtProcConfig, proc *extproc.Processor,
	method string, md metadata.MD, local, remote netip.AddrPort) (*ServerRPC, context.Context, error) {
	real := grpc.ServerTransportStreamFromContext(ctx)
	if real == nil {
		return nil, ctx, status.Error(codes.Internal, ServerPrefix+": RPC without a ServerTransportStream")
	}
	if c.Modes.ResponseBody && !c.ObservabilityMode {
		// gRFC A93: the processor's messages are not compressed, since
		// whether the handler's could be (a sensitive payload) does not
		// carry over to them. grpc-go's per-RPC setting, on the transport's
		// own stream (an earlier processing filter, or an authorization
		// filter's held response headers, wraps it).
		base := real
		for u, ok := base.(unwrapper); ok; u, ok = base.(unwrapper) {
			base = u.Unwrap()
		}
		_ = grpc.SetSendCompressor(grpc.NewContextWithServerTransportStream(ctx, base), "identity")
	}
	var attrs map[string]any
	if len(c.RequestAttributes) > 0 || len(c.ResponseAttributes) > 0 {
		attrs = serverAttributes(method, md, local, remote)
	}
	call := proc.NewCall(ctx, attrs)
	// The RPC's end (its deadline, the client's cancel) ends the filter's
	// waits for the processor, this first one included.
	stopDone := context.AfterFunc(ctx, call.Done)
	out, err := call.ClientMetadata(method, md)
	if err != nil {
		stopDone()
		call.Done()
		return nil, ctx, rpcStatus(ctx, err)
	}
	ctx = metadata.NewIncomingContext(ctx, metadata.MD(out))
	p := newServerRPC(ctx, call, c.Modes, real, stopDone)
	return p, grpc.NewContextWithServerTransportStream(p.ctx, p), nil
}

// unwrapper is a ServerTransportStream around another.
type unwrapper interface {
	Unwrap() grpc.ServerTransportStream
}

// serverAttributes are the attributes of an RPC the filter can send
// (gRFC A93's request_attributes, the names of gRFC A106's CEL
// attributes that a gRPC server knows before its handler runs); the
// configuration picks among them.
func serverAttributes(method string, md metadata.MD, local, remote netip.AddrPort) map[string]any {
	a := extproc.RequestAttributes(method, md)
	a["source.address"] = remote.Addr().String()
	a["source.port"] = strconv.Itoa(int(remote.Port()))
	a["destination.address"] = local.Addr().String()
	a["destination.port"] = strconv.Itoa(int(local.Port()))
	return a
}

// rpcStatus is Status(err), or the RPC's own end when ctx, the RPC's
// context, is done: the RPC's end ended the processing stream, and its
// error (a cancel) must not reach the client in place of the deadline the
// client set, which the server's context may see first.
func rpcStatus(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && err != nil {
		return status.FromContextError(cerr).Err()
	}
	return Status(err)
}

// ServeUnary runs the handler of a unary RPC inside the external
// processing filters procs (StartServerRPC's, in chain order: the last is
// nearest the handler), or, when denied is set (a filter after them
// failed the RPC), only their response side with that status.
func ServeUnary(ctx context.Context, procs []*ServerRPC, req any, handler grpc.UnaryHandler, denied error) (any, error) {
	if len(procs) == 0 {
		if denied != nil {
			return nil, denied
		}
		return handler(ctx, req)
	}
	return procs[0].unary(ctx, req, denied != nil, func(ctx context.Context, req any) (any, error) {
		return ServeUnary(ctx, procs[1:], req, handler, denied)
	})
}

// ServeStream runs the handler of a streaming RPC inside the external
// processing filters procs, as ServeUnary does; ctx is the RPC's context
// after every filter.
func ServeStream(ctx context.Context, srv any, ss grpc.ServerStream, procs []*ServerRPC, handler grpc.StreamHandler, denied error) error {
	for _, p := range procs {
		p.link.next = ss
		ss = &serverProcStream{p: p}
	}
	err := denied
	if err == nil {
		err = handler(srv, ctxStream{ss, ctx})
	}
	for i := len(procs) - 1; i >= 0; i-- {
		err = procs[i].finish(err)
	}
	return err
}

// ctxStream is a stream whose context the filters changed.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }
