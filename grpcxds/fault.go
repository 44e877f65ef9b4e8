package grpcxds

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// Fault injection (gRFC A33) decides in dataplane/route (route.Faults):
// whether an RPC is delayed, and aborted with what. Here an abort becomes
// the RPC's gRPC status.

// errFaultAbortOK is what inject returns for an abort whose status is OK.
// gRPC ends such an RPC at once as if the server had closed it with status
// OK and no response (gRFC A33): a streaming RPC sees OK and no messages, a
// unary one an error, since it got no response. The caller must not send
// the RPC.
var errFaultAbortOK = errors.New("goxds: fault injected: RPC ended with status OK")

// faultFilter runs the fault injection filter for gRPC RPCs.
type faultFilter struct{ *route.Faults }

// newFaultFilter returns a fault filter that draws its chances with intn,
// which returns a uniform number in [0, n); nil means math/rand/v2's
// Uint32N.
func newFaultFilter(intn func(n uint32) uint32) *faultFilter {
	return &faultFilter{route.NewFaults(intn)}
}

// inject applies cfg to one RPC before anything of it is sent, h being its
// headers (route.Faults.Inject). A nil error means: go on with the RPC.
// Otherwise the RPC fails with the error, a status error: the abort's
// status, or DEADLINE_EXCEEDED or CANCELLED if ctx ended during the delay;
// or it is errFaultAbortOK.
func (f *faultFilter) injectHeaders(ctx context.Context, cfg *resources.FaultConfig, h route.Headers) error {
	abort, aborted, err := f.Inject(ctx, cfg, h)
	if err != nil {
		return status.FromContextError(err).Err()
	}
	if !aborted {
		return nil
	}
	code := abortCode(abort)
	if code == codes.OK {
		return errFaultAbortOK
	}
	return status.Errorf(code, "goxds: fault injected: RPC aborted with status %v", code)
}

// inject is injectHeaders for an RPC whose outgoing metadata is md. A33's
// active faults end by the time it returns; release, never nil, is there
// so that a fault lasting the whole RPC (A33's deferred response rate
// limit) needs no change in callers.
func (f *faultFilter) inject(ctx context.Context, cfg *resources.FaultConfig, md metadata.MD) (release func(), err error) {
	return func() {}, f.injectHeaders(ctx, cfg, mdHeaders(md))
}

// abortCode is the status gRPC ends an aborted RPC with: the configured
// code, else the HTTP status header's by gRPC's HTTP mapping, else the
// gRPC status header's (Unknown for a code gRPC does not define).
func abortCode(a route.Abort) codes.Code {
	switch {
	case a.Config != nil:
		return a.Config.Code
	case a.HTTPStatus != 0:
		c, _ := resources.HTTPStatusToCode(a.HTTPStatus)
		return c
	case a.GRPCStatus < 0 || a.GRPCStatus > int(codes.Unauthenticated):
		return codes.Unknown // not a code gRPC defines
	}
	return resources.GRPCStatusToCode(uint32(a.GRPCStatus))
}
