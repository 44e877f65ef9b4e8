package extauthzgrpc

import (
	"context"
	"crypto/x509"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// The external authorization filter (gRFC A92) on a grpc-go server's
// RPCs (xdsserver): the check from the RPC's peer, its decision as
// grpc-go's server API carries it. The client side is client_rpc.go.

// CheckServerRPC checks a grpc-go server's RPC to method, with incoming
// metadata md, between local and remote, from peer p, under c: the
// client's certificates are the TLS handshake's (the verified chain when
// the peer's own are not kept); served is the certificate the server sent
// on the connection (nil without TLS), the destination's principal. The
// service is reached on a channel of
// channels; when none can be made the check fails with that error, which
// the failure mode decides.
func CheckServerRPC(ctx context.Context, channels *Channels, c *resources.ExtAuthzConfig, method string, md metadata.MD,
	local, remote netip.AddrPort, p *grpcpeer.Peer, served *x509.Certificate) extauthz.Decision {
	req := &extauthz.Request{Path: method, Headers: md, Time: time.Now(), Server: true, Local: local, Remote: remote,
		LocalCertificate: served}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		req.PeerCertificates = ti.State.PeerCertificates
		if len(req.PeerCertificates) == 0 && len(ti.State.VerifiedChains) > 0 {
			req.PeerCertificates = ti.State.VerifiedChains[0]
		}
	}
	client, err := channels.Client(c.GrpcService)
	if err != nil {
		client = extauthz.FailingClient(err)
	}
	return (&extauthz.Checker{Config: c, Client: client}).Check(ctx, req)
}

// ServerDecision applies d, CheckServerRPC's decision on an RPC whose
// incoming metadata are md, to the RPC: a denial is the status it fails
// with (its message after prefix), with the service's trailers set; an
// allowed RPC goes on with the context returned, its incoming metadata
// changed as the service asked, the service's response headers set
// before the handler's.
func ServerDecision(ctx context.Context, d extauthz.Decision, md metadata.MD, prefix string) (context.Context, error) {
	if !d.Allow {
		if len(d.Trailers) > 0 {
			_ = grpc.SetTrailer(ctx, Mutations(nil, d.Trailers))
		}
		return ctx, status.Error(codes.Code(d.Code), prefix+d.Message)
	}
	if len(d.ResponseHeaders) > 0 {
		// The handler has sent nothing yet: the service's response headers
		// are the first, and the handler's own add to them.
		_ = grpc.SetHeader(ctx, Mutations(nil, d.ResponseHeaders))
	}
	if len(d.RequestHeaders) > 0 {
		ctx = metadata.NewIncomingContext(ctx, Mutations(md, d.RequestHeaders))
	}
	return ctx, nil
}
