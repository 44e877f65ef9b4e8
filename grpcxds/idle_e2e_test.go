package grpcxds_test

import (
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// With ConnectOnFirstRPC, against go-control-plane: RPCs to cluster A
// connect A's backend only; B's backend sees its first connection when the
// first RPC routed to B comes, and serves it.
func TestConnectOnFirstRPC(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, grpcxds.Options{ConnectOnFirstRPC: true})
	a, b := startBackend(t, "a"), startBackend(t, "b")
	toB := &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
		Headers: []*routev3.HeaderMatcher{{
			Name:                 "x-target",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "b"},
		}},
	}
	e.update(tree(routes(toCluster(toB, "B"), toCluster(prefix("/"), "A")), clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial()
	e.waitServed(conn, 20, func(backend string) bool { return backend == "a" })
	if n := b.conns.Load(); n != 0 {
		t.Fatalf("B's backend had %d connections before any RPC was routed to B, want none", n)
	}
	if s := conn.GetState(); s != connectivity.Ready {
		t.Errorf("channel state %v with A in use, want READY", s)
	}
	got, err := callWithHeader(e.ctx, conn, "x-target", "b")
	if err != nil || got != "b" {
		t.Fatalf("first RPC routed to B: served by %q, %v; want b", got, err)
	}
	if n := b.conns.Load(); n != 1 {
		t.Errorf("B's backend had %d connections after its first RPC, want 1", n)
	}
	if n := a.conns.Load(); n != 1 {
		t.Errorf("A's backend had %d connections, want 1", n)
	}
}

// With ClusterIdleTimeout, the only cluster in use goes idle when RPCs
// stop (the channel with it), its connection is closed, and the next RPC
// connects it again.
func TestClusterIdleTimeout(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, grpcxds.Options{ConnectOnFirstRPC: true, ClusterIdleTimeout: 100 * time.Millisecond})
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	conn := e.dial()
	e.waitServed(conn, 5, func(backend string) bool { return backend == "a" })
	for s := conn.GetState(); s != connectivity.Idle; s = conn.GetState() {
		if !conn.WaitForStateChange(e.ctx, s) {
			t.Fatalf("the channel did not go idle with no RPC for the idle timeout: still %v", s)
		}
	}
	// Asleep, with its connection closed: the next RPC makes a new one.
	before := a.conns.Load()
	if got, err := call(e.ctx, conn); err != nil || got != "a" {
		t.Fatalf("RPC after the cluster slept: served by %q, %v; want a", got, err)
	}
	if n := a.conns.Load(); n != before+1 {
		t.Errorf("A's backend had %d connections after the cluster woke again, want %d", n, before+1)
	}
}

// ClusterIdleTimeout without ConnectOnFirstRPC, or negative, is refused.
func TestIdleOptionsChecked(t *testing.T) {
	t.Parallel()
	for _, opts := range []grpcxds.Options{
		{ClusterIdleTimeout: time.Minute},
		{ConnectOnFirstRPC: true, ClusterIdleTimeout: -time.Second},
	} {
		cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: nodeID}))
		if err != nil {
			t.Fatal(err)
		}
		opts.Bootstrap = cfg
		if _, err := grpcxds.NewBuilder(opts); err == nil || !strings.Contains(err.Error(), "ClusterIdleTimeout") {
			t.Errorf("NewBuilder(ConnectOnFirstRPC %v, ClusterIdleTimeout %v): %v, want an error naming ClusterIdleTimeout",
				opts.ConnectOnFirstRPC, opts.ClusterIdleTimeout, err)
		}
	}
}
