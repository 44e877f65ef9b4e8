package extauthzgrpc

import (
	"context"
	"crypto/x509"
	"net/netip"
	"sync"
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
// changed as the service asked. An allowed RPC with response headers to
// add also gets a ServerHeaders, installed in the context returned as the
// RPC's ServerTransportStream, which the caller must run the rest of the
// RPC through (Unary, Stream, or Drop when a later filter fails it).
func ServerDecision(ctx context.Context, d extauthz.Decision, md metadata.MD, prefix string) (context.Context, *ServerHeaders, error) {
	if !d.Allow {
		if len(d.Trailers) > 0 {
			_ = grpc.SetTrailer(ctx, Mutations(nil, d.Trailers))
		}
		return ctx, nil, status.Error(codes.Code(d.Code), prefix+d.Message)
	}
	if len(d.RequestHeaders) > 0 {
		ctx = metadata.NewIncomingContext(ctx, Mutations(md, d.RequestHeaders))
	}
	var h *ServerHeaders
	if real := grpc.ServerTransportStreamFromContext(ctx); len(d.ResponseHeaders) > 0 && real != nil {
		h = &ServerHeaders{real: real, ms: d.ResponseHeaders}
		ctx = grpc.NewContextWithServerTransportStream(ctx, h)
	}
	return ctx, h, nil
}

// ServerHeaders is an allowed RPC's response headers to add, held until
// the response has headers to add them to. gRFC A92 (draft of
// 2026-05-26, "Header Mutations") ignores them when the RPC ends
// Trailers-Only, so they cannot be set on grpc-go's stream at the
// decision, as grpc-go would then send a header frame before any
// status; the client side (AddResponseHeaders) likewise adds them only
// to response headers the server sent. They are applied, as Envoy
// applies them and the client does, to the response headers the handler
// (and the filters after this one) set, when these go on: at the first
// SendHeader or message, or at the RPC's end if it has headers. As the
// RPC's ServerTransportStream it hides grpc-go's own from the handler
// (grpc.SetSendCompressor then fails), as external processing's does.
type ServerHeaders struct {
	real grpc.ServerTransportStream // toward the transport (or a filter before this one)
	ms   []extauthz.Mutation

	mu   sync.Mutex
	held metadata.MD // the response headers set, while not sent
	sent bool        // the headers went on, or were dropped: calls pass through
}

// Unwrap is the ServerTransportStream the headers go to.
func (h *ServerHeaders) Unwrap() grpc.ServerTransportStream { return h.real }

// Method implements grpc.ServerTransportStream.
func (h *ServerHeaders) Method() string { return h.real.Method() }

// SetHeader implements grpc.ServerTransportStream: held until the
// headers go on.
func (h *ServerHeaders) SetHeader(md metadata.MD) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sent {
		return h.real.SetHeader(md)
	}
	h.held = metadata.Join(h.held, md)
	return nil
}

// SendHeader implements grpc.ServerTransportStream: the headers held and
// md, with the service's, go on.
func (h *ServerHeaders) SendHeader(md metadata.MD) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sent {
		return h.real.SendHeader(md)
	}
	h.sent = true
	out := Mutations(metadata.Join(h.held, md), h.ms)
	h.held = nil
	return h.real.SendHeader(out)
}

// SetTrailer implements grpc.ServerTransportStream.
func (h *ServerHeaders) SetTrailer(md metadata.MD) error { return h.real.SetTrailer(md) }

// release hands the headers on, when the response has a message (message)
// or headers of its own; otherwise it is Trailers-Only (or its headers
// went already) and the service's are dropped. Later calls pass through.
func (h *ServerHeaders) release(message bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sent {
		return
	}
	h.sent = true
	if message || len(h.held) > 0 {
		// An error here is the stream's end, which the RPC reports.
		_ = h.real.SetHeader(Mutations(h.held, h.ms))
	}
	h.held = nil
}

// Drop passes every later call through and drops the service's headers:
// a filter after this one failed the RPC, which ends Trailers-Only unless
// one of them sets headers, which then go on as they are.
func (h *ServerHeaders) Drop() {
	h.mu.Lock()
	h.sent = true
	h.held = nil
	h.mu.Unlock()
}

// Unary runs a unary RPC's handler (next) under h: a response message
// takes the headers with it; an error takes them only if it has headers.
func (h *ServerHeaders) Unary(ctx context.Context, req any, next grpc.UnaryHandler) (any, error) {
	resp, err := next(ctx, req)
	h.release(err == nil)
	return resp, err
}

// Stream runs a streaming RPC's handler (next) under h, with ctx as the
// stream's context: the first message sent takes the headers with it; a
// stream that ends without one takes them only if it has headers.
func (h *ServerHeaders) Stream(ctx context.Context, srv any, ss grpc.ServerStream, next grpc.StreamHandler) error {
	err := next(srv, &headerServerStream{ServerStream: ss, ctx: ctx, h: h})
	h.release(false)
	return err
}

// headerServerStream is a stream under ServerHeaders: its headers are
// held by it, and its first message releases them.
type headerServerStream struct {
	grpc.ServerStream
	ctx context.Context
	h   *ServerHeaders
}

func (s *headerServerStream) Context() context.Context        { return s.ctx }
func (s *headerServerStream) SetHeader(md metadata.MD) error  { return s.h.SetHeader(md) }
func (s *headerServerStream) SendHeader(md metadata.MD) error { return s.h.SendHeader(md) }
func (s *headerServerStream) SetTrailer(md metadata.MD)       { _ = s.h.SetTrailer(md) }

func (s *headerServerStream) SendMsg(m any) error {
	s.h.release(true)
	return s.ServerStream.SendMsg(m)
}
