package xdsserver

import (
	"context"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// extAuthz runs an external authorization filter (gRFC A92) for an RPC to
// method, f being the chain's filter and cfg its effective configuration.
// It returns the context the RPC goes on with (its incoming metadata
// changed as the service asked), or the status it fails with (with the
// service's trailers set). The decision is dataplane/extauthz's; the
// channel to the service is the server's (s.authzChannels), made at the
// first RPC that needs it and kept until Stop.
func (s *GRPCServer) extAuthz(ctx context.Context, f *resources.HTTPFilter, cfg resources.HTTPFilterConfig,
	method string, md metadata.MD, local, remote netip.AddrPort, p *peer.Peer) (context.Context, error) {
	c, err := resources.ExtAuthzOf(cfg, f.Parsed)
	if err != nil {
		return ctx, s.rpcError(codes.Internal, "HTTP filter %q: %v", f.Name, err)
	}
	req := &extauthz.Request{Path: method, Headers: md, Time: time.Now(), Server: true, Local: local, Remote: remote}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		req.PeerCertificates = ti.State.PeerCertificates
		if len(req.PeerCertificates) == 0 && len(ti.State.VerifiedChains) > 0 {
			req.PeerCertificates = ti.State.VerifiedChains[0]
		}
	}
	var d extauthz.Decision
	if client, err := s.authzChannels.Client(c.GrpcService); err != nil {
		// No channel can be made: as a failed call.
		d = (&extauthz.Checker{Config: c, Client: failingClient{err}}).Check(ctx, req)
	} else {
		d = (&extauthz.Checker{Config: c, Client: client}).Check(ctx, req)
	}
	if m := s.opts.authzMetrics; m != nil {
		m.ServerExtAuthz(d.Outcome.String())
	}
	if !d.Allow {
		if len(d.Trailers) > 0 {
			_ = grpc.SetTrailer(ctx, extauthzgrpc.Mutations(nil, d.Trailers))
		}
		return ctx, status.Error(codes.Code(d.Code), "xdsserver: "+d.Message)
	}
	if len(d.ResponseHeaders) > 0 {
		// The handler has sent nothing yet: the service's response headers
		// are the first, and the handler's own add to them.
		_ = grpc.SetHeader(ctx, extauthzgrpc.Mutations(nil, d.ResponseHeaders))
	}
	if len(d.RequestHeaders) > 0 {
		ctx = metadata.NewIncomingContext(ctx, extauthzgrpc.Mutations(md, d.RequestHeaders))
	}
	return ctx, nil
}

// failingClient fails every check with err.
type failingClient struct{ err error }

func (f failingClient) Check(context.Context, *extauthz.CheckRequest) (*extauthz.CheckResponse, error) {
	return nil, f.err
}

// serverStream is a stream whose context a filter changed.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s serverStream) Context() context.Context { return s.ctx }
