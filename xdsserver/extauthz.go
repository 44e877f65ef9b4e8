package xdsserver

import (
	"context"
	"net/netip"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// extAuthz runs an external authorization filter (gRFC A92) for an RPC to
// method, f being the chain's filter and cfg its effective configuration.
// It returns the context the RPC goes on with (its incoming metadata
// changed as the service asked), or the status it fails with (with the
// service's trailers set). The decision is dataplane/extauthz's, the
// check's binding to grpc-go (the request from the RPC's peer, the
// decision as the server's API carries it) internal/extauthzgrpc's; the
// channel to the service is the server's (s.authzChannels), made at the
// first RPC that needs it and kept while a Listener version in force
// names it (closed once its calls end after one that does not, and at
// Stop), and so are the metrics.
func (s *GRPCServer) extAuthz(ctx context.Context, f *resources.HTTPFilter, cfg resources.HTTPFilterConfig,
	method string, md metadata.MD, local, remote netip.AddrPort, p *peer.Peer) (context.Context, error) {
	c, err := resources.ExtAuthzOf(cfg, f.Parsed)
	if err != nil {
		return ctx, s.rpcError(codes.Internal, "HTTP filter %q: %v", f.Name, err)
	}
	d := extauthzgrpc.CheckServerRPC(ctx, &s.authzChannels, c, method, md, local, remote, p)
	if m := s.opts.authzMetrics; m != nil {
		m.ServerExtAuthz(d.Outcome.String())
	}
	return extauthzgrpc.ServerDecision(ctx, d, md, "xdsserver: ")
}

// serverStream is a stream whose context a filter changed.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s serverStream) Context() context.Context { return s.ctx }
