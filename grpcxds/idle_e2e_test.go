package grpcxds_test

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/goxds/xds/grpcxds"
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
