package grpcxds

import (
	"context"
	"fmt"
	"time"

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
// interceptors hand gRPC, so the change is made there. A denied RPC fails
// with the service's status. What gRPC's client API cannot carry from
// here is left out: the trailers of a denial and the response headers of
// an allowed RPC (the server side applies both).
func (r extAuthzRuntime) start(ctx context.Context, config resources.HTTPFilterConfig, h route.Headers) (func(), error) {
	c, err := resources.ExtAuthzOf(config, r.top)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "goxds: ext_authz filter: %v", err)
	}
	sel, ok := h.(*selection)
	if !ok {
		return nil, status.Errorf(codes.Internal, "goxds: ext_authz filter: RPC without a selection (%T)", h)
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
		return nil, status.Error(codes.Code(d.Code), "goxds: "+d.Message)
	}
	if len(d.RequestHeaders) > 0 {
		md = extauthzgrpc.Mutations(md, d.RequestHeaders)
		sel.Context = metadata.NewOutgoingContext(sel.Context, md)
		sel.md, sel.mdRead = md, true
	}
	return nil, nil
}

// failedClient fails every check with err: the failure mode decides.
type failedClient struct{ err error }

func (f failedClient) Check(context.Context, *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	return nil, f.err
}
