package grpcxds

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/internal/extauthzgrpc"
)

// errFaultAbortOK is what an RPC that a fault aborted with status OK
// fails with in the interceptors. gRPC ends such an RPC at once as if the
// server had closed it with status OK and no response (gRFC A33): a
// streaming RPC sees OK and no messages, a unary one an error, since it
// got no response. The RPC is not sent.
var errFaultAbortOK = errors.New("goxds: fault injected: RPC ended with status OK")

// denialError is the error an RPC that a filter denied fails with: the
// denial's status (gRPC's for a context that ended during a fault's
// delay), with its headers as trailers (authzDenied), or errFaultAbortOK.
func denialError(d *httpfilter.Denial) error {
	switch {
	case d.Err != nil:
		return status.FromContextError(d.Err).Err()
	case d.Code == uint32(codes.OK):
		return errFaultAbortOK
	}
	msg := d.Message
	if !d.MessageAsIs {
		msg = "goxds: " + msg
	}
	st := status.New(codes.Code(d.Code), msg)
	if len(d.Headers) == 0 {
		return st.Err()
	}
	return &authzDenied{st: st, trailer: extauthzgrpc.Mutations(nil, d.Headers)}
}
