package grpcxds_test

import (
	"context"
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// The calls to the authorization service (gRFC A92) and the processing
// stream (gRFC A93) go on side channels made with
// Options.SideChannelDialOptions, in the data-plane RPC's context: a
// tracing stats handler there sees the RPC's trace, and makes the side
// call its child span.
func TestSideChannelsCarryTheRPCContext(t *testing.T) {
	a, err := testutils.StartAuthzServer(func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	p, _ := testutils.StartProcCounting(t, marking)
	side := new(testutils.TraceTagger)
	// A trusted server's GrpcServices are dialled with the credentials
	// they name (gRFC A102).
	e := newEnvWithFeatures(t, grpcxds.Options{SideChannelDialOptions: []grpc.DialOption{grpc.WithStatsHandler(side)}},
		bootstrap.FeatureTrustedXDSServer)
	b := startEcho(t)
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", b))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, testutils.ExtAuthzFilter(a.Target(), nil), testutils.ExtProcFilter(p.Target(), nil))}
	e.update(res)
	conn := e.dial()
	for _, trace := range []string{"rpc-1", "rpc-2"} {
		if got, err := echo(testutils.WithTrace(e.ctx, trace), conn, "hi"); err != nil || got != "echo:hi/in" {
			t.Fatalf("Echo = %q, %v; want echo:hi/in (checked, and processed)", got, err)
		}
	}
	// Each side call starts before its RPC is sent: all have started.
	want := []testutils.TraceSeen{
		{Method: testutils.AuthzCheckMethod, Trace: "rpc-1"}, {Method: testutils.ProcProcessMethod, Trace: "rpc-1"},
		{Method: testutils.AuthzCheckMethod, Trace: "rpc-2"}, {Method: testutils.ProcProcessMethod, Trace: "rpc-2"},
	}
	if got := side.Seen(); !slices.Equal(got, want) {
		t.Errorf("the side channels' stats handler saw %v, want %v", got, want)
	}
}
