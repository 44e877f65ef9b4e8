package xdsserver

import (
	"context"
	"crypto/x509"
	"net/netip"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/extprocgrpc"
	"github.com/goxds/xds/resources"
)

// extAuthz runs an external authorization filter (gRFC A92) for an RPC to
// method, f being the chain's filter and cfg its effective configuration.
// It returns the context the RPC goes on with (its incoming metadata
// changed as the service asked) and, when the service has response
// headers to add, what holds them for the rest of the RPC (serveUnary,
// serveStream); or the status it fails with (with the service's trailers
// set). The decision is dataplane/extauthz's, the
// check's binding to grpc-go (the request from the RPC's peer, the
// decision as the server's API carries it) internal/extauthzgrpc's; the
// channel to the service is the server's (s.authzChannels), made at the
// first RPC that needs it and kept while a Listener version in force
// names it (closed once its calls end after one that does not, and at
// Stop), and so are the metrics.
// served is the certificate the server sent on the RPC's connection (nil
// without TLS).
func (s *GRPCServer) extAuthz(ctx context.Context, f *resources.HTTPFilter, cfg resources.HTTPFilterConfig,
	method string, md metadata.MD, local, remote netip.AddrPort, p *peer.Peer, served *x509.Certificate) (context.Context, *extauthzgrpc.ServerHeaders, error) {
	c, err := resources.ExtAuthzOf(cfg, f.Parsed)
	if err != nil {
		return ctx, nil, s.rpcError(codes.Internal, "HTTP filter %q: %v", f.Name, err)
	}
	d := extauthzgrpc.CheckServerRPC(ctx, &s.authzChannels, c, method, md, local, remote, p, served)
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

// layer is one filter of an RPC's chain that takes part in its response:
// an external processing filter, or the response headers an external
// authorization filter holds.
type layer struct {
	proc *extprocgrpc.ServerRPC
	hdrs *extauthzgrpc.ServerHeaders
}

// split is layers up to the first that holds response headers, as
// external processing filters, and the index of that one (-1: none).
func split(layers []layer) ([]*extprocgrpc.ServerRPC, int) {
	var procs []*extprocgrpc.ServerRPC
	for i, l := range layers {
		if l.hdrs != nil {
			return procs, i
		}
		procs = append(procs, l.proc)
	}
	return procs, -1
}

// denyLayers is the external processing filters of layers, for an RPC
// that a later filter failed: it ends without a handler, and the response
// headers held are dropped (gRFC A92: it is Trailers-Only).
func denyLayers(layers []layer) []*extprocgrpc.ServerRPC {
	var procs []*extprocgrpc.ServerRPC
	for _, l := range layers {
		if l.hdrs != nil {
			l.hdrs.Drop()
		} else {
			procs = append(procs, l.proc)
		}
	}
	return procs
}

// serveUnary runs a unary RPC's handler inside layers, in chain order
// (the last nearest the handler), or when denied is set (a filter after
// them failed the RPC) only their response side with that status.
func serveUnary(ctx context.Context, layers []layer, req any, handler grpc.UnaryHandler, denied error) (any, error) {
	if denied != nil {
		return extprocgrpc.ServeUnary(ctx, denyLayers(layers), req, handler, denied)
	}
	procs, i := split(layers)
	if i < 0 {
		return extprocgrpc.ServeUnary(ctx, procs, req, handler, nil)
	}
	return extprocgrpc.ServeUnary(ctx, procs, req, func(ctx context.Context, req any) (any, error) {
		return layers[i].hdrs.Unary(ctx, req, func(ctx context.Context, req any) (any, error) {
			return serveUnary(ctx, layers[i+1:], req, handler, nil)
		})
	}, nil)
}

// serveStream runs a streaming RPC's handler inside layers, as serveUnary
// does; ctx is the RPC's context after every filter.
func serveStream(ctx context.Context, srv any, ss grpc.ServerStream, layers []layer, handler grpc.StreamHandler, denied error) error {
	if denied != nil {
		return extprocgrpc.ServeStream(ctx, srv, ss, denyLayers(layers), handler, denied)
	}
	procs, i := split(layers)
	if i < 0 {
		return extprocgrpc.ServeStream(ctx, srv, ss, procs, handler, nil)
	}
	return extprocgrpc.ServeStream(ctx, srv, ss, procs, func(srv any, ss grpc.ServerStream) error {
		return layers[i].hdrs.Stream(ctx, srv, ss, func(srv any, ss grpc.ServerStream) error {
			return serveStream(ctx, srv, ss, layers[i+1:], handler, nil)
		})
	}, nil)
}
