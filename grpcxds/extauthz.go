package grpcxds

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
)

// The selection is the RPC as the HTTP filters see it
// (httpfilter.Request): its outgoing metadata are its headers. The rest
// of the external authorization filter's binding to grpc-go (the
// response headers a check adds, on a unary RPC's call options or a
// stream's headers) is internal/extauthzgrpc's; the interceptors call it.

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
	extauthzgrpc.SetTrailerOption(opts, d.trailer)
	return d.st.Err()
}
