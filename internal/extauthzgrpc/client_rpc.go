package extauthzgrpc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extauthz"
)

// The external authorization filter (gRFC A92) on a channel's RPCs
// (grpcxds): the check itself is dataplane/httpfilter's run; what is here
// hands the RPC the response headers it decided. The call-option setters
// serve grpcxds's denials and the external processing filter's client
// side too (internal/extprocgrpc). The server side is server_rpc.go.

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
