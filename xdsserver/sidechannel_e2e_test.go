package xdsserver_test

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// The server's calls to the authorization service (gRFC A92) and its
// processing streams (gRFC A93) go on side channels made with
// SideChannelDialOptions, in the data-plane RPC's context as the
// server's interceptors have it: a tracing stats handler there sees the
// trace the server's own stats handler gave the RPC, and makes the side
// call its child span.
func TestSideChannelsCarryTheRPCContext(t *testing.T) {
	a := startAuthz(t)
	p, _ := testutils.StartProcCounting(t, marking)
	served, side := &testutils.TraceTagger{Tag: "served "}, new(testutils.TraceTagger)
	e := newEnvOpts(t, envOptions{
		edit: func(c *bootstrap.Config) {
			// A trusted server's GrpcServices are dialled with the
			// credentials they name (gRFC A102).
			c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
		},
		server: func(e *env, cfg *bootstrap.Config) []grpc.ServerOption {
			return append(e.defaultOptions(cfg), grpc.StatsHandler(served),
				xdsserver.SideChannelDialOptions(grpc.WithStatsHandler(side)))
		},
	})
	e.srv.RegisterService(&echoDesc, struct{}{})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, procRoutes(nil),
		testutils.ExtAuthzFilter(a.Target(), nil), testutils.ExtProcFilter(p.Target(), nil))}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	for _, m := range []string{sayHello, echoMethod} {
		if err := call(e.ctx, conn, m); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	// Each side call starts before its RPC's handler runs: all have.
	want := []testutils.TraceSeen{
		{Method: testutils.AuthzCheckMethod, Trace: "served " + sayHello}, {Method: testutils.ProcProcessMethod, Trace: "served " + sayHello},
		{Method: testutils.AuthzCheckMethod, Trace: "served " + echoMethod}, {Method: testutils.ProcProcessMethod, Trace: "served " + echoMethod},
	}
	if got := side.Seen(); !slices.Equal(got, want) {
		t.Errorf("the side channels' stats handler saw %v, want %v", got, want)
	}
}
