package grpcxds

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// extAuthzConfigName is the external authorization filter's top-level
// configuration message (gRFC A92).
const extAuthzConfigName = "envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"

// extAuthzRuntime runs the external authorization filter on a channel's
// RPCs: dataplane/extauthz decides, over a channel to the service that the
// channel's resolver keeps (internal/extauthzgrpc, gRFC A102's
// credentials) until it closes.
type extAuthzRuntime struct {
	// top is the filter's top-level configuration, which an
	// ExtAuthzPerRoute override keeps.
	top      resources.HTTPFilterConfig
	channels *extauthzgrpc.Channels
}

// start checks the RPC. An allowed RPC goes on with the outgoing metadata
// the service changed: h is the RPC's selection, which is the context the
// interceptors hand gRPC, so the change is made there; the service's
// response headers to add are returned, for the interceptors to apply to
// the response headers the application sees. A denied RPC fails with the
// service's status, as an authzDenied carrying the denial's headers, which
// the interceptors give the application as the RPC's trailers.
func (r extAuthzRuntime) start(ctx context.Context, config resources.HTTPFilterConfig, h route.Headers) (func(), []extauthz.Mutation, error) {
	c, err := resources.ExtAuthzOf(config, r.top)
	if err != nil {
		return nil, nil, status.Errorf(codes.Internal, "goxds: ext_authz filter: %v", err)
	}
	sel, ok := h.(*selection)
	if !ok {
		return nil, nil, status.Errorf(codes.Internal, "goxds: ext_authz filter: RPC without a selection (%T)", h)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	req := &extauthz.Request{Path: sel.method, Headers: md, Time: time.Now()}
	var client extauthz.Client
	if r.channels == nil {
		client = failedClient{fmt.Errorf("no channel to the authorization service %q can be made here", c.GrpcService.TargetURI)}
	} else if cl, err := r.channels.Client(c.GrpcService); err != nil {
		client = failedClient{err}
	} else {
		client = cl
	}
	d := (&extauthz.Checker{Config: c, Client: client}).Check(ctx, req)
	if !d.Allow {
		st := status.New(codes.Code(d.Code), "goxds: "+d.Message)
		if len(d.Trailers) == 0 {
			return nil, nil, st.Err()
		}
		return nil, nil, &authzDenied{st: st, trailer: extauthzgrpc.Mutations(nil, d.Trailers)}
	}
	if len(d.RequestHeaders) > 0 {
		md = extauthzgrpc.Mutations(md, d.RequestHeaders)
		sel.Context = metadata.NewOutgoingContext(sel.Context, md)
		sel.md, sel.mdRead = md, true
	}
	return nil, d.ResponseHeaders, nil
}

// authzDenied is an RPC's denial by the authorization service that came
// with headers: the interceptors hand the application its status, and its
// headers as the RPC's trailers (through the grpc.Trailer call options),
// as a server's trailers-only failure would come.
type authzDenied struct {
	st      *status.Status
	trailer metadata.MD
}

func (e *authzDenied) Error() string { return e.st.Err().Error() }

// GRPCStatus keeps the denial's code wherever the error goes.
func (e *authzDenied) GRPCStatus() *status.Status { return e.st }

// deliverDenial returns the error an RPC that start failed with err ends
// with. A denial's headers go to the RPC's grpc.Trailer call options,
// which gRPC would fill from a server's trailers: the application reads
// them where it reads any failure's trailers.
func deliverDenial(err error, opts []grpc.CallOption) error {
	d, ok := err.(*authzDenied)
	if !ok {
		return err
	}
	for _, o := range opts {
		if t, ok := o.(grpc.TrailerCallOption); ok && t.TrailerAddr != nil {
			*t.TrailerAddr = d.trailer.Copy()
		}
	}
	return d.st.Err()
}

// addResponseHeaders applies ms, an allowed RPC's response headers to add,
// to the response headers gRPC put in the RPC's grpc.Header call options.
// An RPC that got no response headers (a trailers-only response, or no
// server reached) gets none added: there is no header block to add to.
func addResponseHeaders(opts []grpc.CallOption, ms []extauthz.Mutation) {
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok && h.HeaderAddr != nil && *h.HeaderAddr != nil {
			*h.HeaderAddr = extauthzgrpc.Mutations(*h.HeaderAddr, ms)
		}
	}
}

// authzHeaderStream is a stream whose RPC the authorization service
// allowed with response headers to add: Header gives the server's with
// them, and so do the grpc.Header call options once the stream ends.
type authzHeaderStream struct {
	*retryStream
	ms   []extauthz.Mutation
	done bool // the call options were changed; only the receiving goroutine
}

// Header implements grpc.ClientStream.
func (s *authzHeaderStream) Header() (metadata.MD, error) {
	md, err := s.retryStream.Header()
	if md == nil {
		return md, err
	}
	return extauthzgrpc.Mutations(md, s.ms), err
}

// RecvMsg implements grpc.ClientStream. gRPC fills the call options when
// the stream ends: at the error that ends it, or at the one response of a
// stream the server does not stream.
func (s *authzHeaderStream) RecvMsg(m any) error {
	err := s.retryStream.RecvMsg(m)
	if !s.done && (err != nil || !s.desc.ServerStreams) {
		s.done = true
		addResponseHeaders(s.opts, s.ms)
	}
	return err
}

// failedClient fails every check with err: the failure mode decides.
type failedClient struct{ err error }

func (f failedClient) Check(context.Context, *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	return nil, f.err
}
