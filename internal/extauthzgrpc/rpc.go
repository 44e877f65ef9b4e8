package extauthzgrpc

import (
	"context"
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

// The external authorization filter (gRFC A92) on grpc-go's RPCs: on a
// channel (grpcxds; the check itself is dataplane/httpfilter's run, and
// what is here hands the RPC the headers and trailers it decided), and on
// a server (xdsserver: the check from the RPC's peer, its decision as
// grpc-go's server API carries it). The call-option helpers serve the
// external processing filter's client side too (internal/extprocgrpc).

// SetHeaderOption puts a copy of md in the RPC's grpc.Header call
// options, where gRPC puts the server's headers.
func SetHeaderOption(opts []grpc.CallOption, md metadata.MD) {
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok && h.HeaderAddr != nil {
			*h.HeaderAddr = md.Copy()
		}
	}
}

// SetTrailerOption puts a copy of md in the RPC's grpc.Trailer call
// options, where gRPC puts the server's trailers.
func SetTrailerOption(opts []grpc.CallOption, md metadata.MD) {
	for _, o := range opts {
		if t, ok := o.(grpc.TrailerCallOption); ok && t.TrailerAddr != nil {
			*t.TrailerAddr = md.Copy()
		}
	}
}

// AddResponseHeaders applies ms, an allowed RPC's response headers to
// add, to the response headers gRPC put in the RPC's grpc.Header call
// options. An RPC that got no response headers (a trailers-only
// response, or no server reached) gets none added: there is no header
// block to add to.
func AddResponseHeaders(opts []grpc.CallOption, ms []extauthz.Mutation) {
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok && h.HeaderAddr != nil && *h.HeaderAddr != nil {
			*h.HeaderAddr = Mutations(*h.HeaderAddr, ms)
		}
	}
}

// WithResponseHeaders is s, a stream whose RPC the authorization service
// allowed with response headers to add (ms), as the application sees it:
// Header gives the server's with them, and so do the grpc.Header call
// options of opts (the stream's) once the stream ends.
func WithResponseHeaders(s grpc.ClientStream, desc *grpc.StreamDesc, opts []grpc.CallOption, ms []extauthz.Mutation) grpc.ClientStream {
	return &headerStream{ClientStream: s, desc: desc, opts: opts, ms: ms}
}

// headerStream is WithResponseHeaders's stream.
type headerStream struct {
	grpc.ClientStream
	desc *grpc.StreamDesc
	opts []grpc.CallOption
	ms   []extauthz.Mutation
	done bool // the call options were changed; only the receiving goroutine
}

// Header implements grpc.ClientStream.
func (s *headerStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if md == nil {
		return md, err
	}
	return Mutations(md, s.ms), err
}

// RecvMsg implements grpc.ClientStream. gRPC fills the call options when
// the stream ends: at the error that ends it, or at the one response of a
// stream the server does not stream.
func (s *headerStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if !s.done && (err != nil || !s.desc.ServerStreams) {
		s.done = true
		AddResponseHeaders(s.opts, s.ms)
	}
	return err
}

// CheckServerRPC checks a grpc-go server's RPC to method, with incoming
// metadata md, between local and remote, from peer p, under c: the
// client's certificates are the TLS handshake's (the verified chain when
// the peer's own are not kept). The service is reached on a channel of
// channels; when none can be made the check fails with that error, which
// the failure mode decides.
func CheckServerRPC(ctx context.Context, channels *Channels, c *resources.ExtAuthzConfig, method string, md metadata.MD,
	local, remote netip.AddrPort, p *grpcpeer.Peer) extauthz.Decision {
	req := &extauthz.Request{Path: method, Headers: md, Time: time.Now(), Server: true, Local: local, Remote: remote}
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
