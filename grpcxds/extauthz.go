package grpcxds

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
)

// The selection is the RPC as the HTTP filters see it
// (httpfilter.Request): its outgoing metadata are its headers.

// AuthzRequest implements httpfilter.Request: the RPC's method and
// outgoing metadata.
func (s *selection) AuthzRequest() extauthz.Request {
	return extauthz.Request{Path: s.method, Headers: s.metadata()}
}

// MutateHeaders implements httpfilter.Request: the RPC goes on with the
// outgoing metadata changed. The selection is the context the
// interceptors hand gRPC, so the change is made there.
func (s *selection) MutateHeaders(ms []extauthz.Mutation) {
	md := extauthzgrpc.Mutations(metadata.MD(s.metadata()), ms)
	s.Context = metadata.NewOutgoingContext(s.Context, md)
	s.md, s.mdRead = md, true
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
// with (denialError). A denial's headers go to the RPC's grpc.Trailer call options,
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
