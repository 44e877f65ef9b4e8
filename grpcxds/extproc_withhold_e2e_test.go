package grpcxds_test

import (
	"testing"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/testutils"
)

// A unary RPC that an immediate response ends at the server's message
// fails without that message: the application's reply stays empty, as
// it would had the RPC been cancelled (gRFC A93), and as grpc-go's filter
// leaves it.
func TestExtProcClientImmediateResponseWithholdsTheReply(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetResponseBody() != nil {
			return []*procv3.ProcessingResponse{testutils.ProcImmediate(codes.ResourceExhausted, "stopped at the response")}, nil
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	got, err := echo(e.ctx, e.dial(), "hi")
	if status.Code(err) != codes.ResourceExhausted || got != "" {
		t.Fatalf("RPC stopped at its response: reply %q, %v; want no reply, RESOURCE_EXHAUSTED", got, err)
	}
}
