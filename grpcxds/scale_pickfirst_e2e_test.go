package grpcxds_test

import (
	"context"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/resources"
)

// gRFC A105 under pick_first: the endpoint pick_first chose scales as any
// endpoint does, stays chosen while any of its connections is ready, and
// is failed over from when they all fail.

// pickFirstScaled is cluster c under pick_first with per-host
// max_connections n.
func pickFirstScaled(t *testing.T, n uint32) *clusterv3.Cluster {
	c := perHostCluster("c", n, true)
	c.LoadBalancingPolicy = policyList(t, &pickfirstv3.PickFirst{})
	return c
}

// closeConn closes the server side of sb's i-th connection accepted.
func (sb *streamsBackend) closeConn(i int) {
	sb.mu.Lock()
	c := sb.open[i]
	sb.mu.Unlock()
	c.Close()
}

// wantUnavailable waits for one RPC of errs to fail UNAVAILABLE: the one
// on a connection the test closed.
func wantUnavailable(t *testing.T, ctx context.Context, errs <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errs:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: RPC %v, want UNAVAILABLE", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s: the RPC on the closed connection did not end", what)
	}
}

// pick_first's endpoint a, on a server of MAX_CONCURRENT_STREAMS 1 and
// allowed 2 connections, gets a second one for a second RPC, b none; a
// losing one connection stays chosen on the other (b still untouched);
// a down, its RPCs fail over to b.
func TestConnectionScalingPickFirst(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	a := startStreamsBackend(t, "a", 1)
	b := startStreamsBackend(t, "b", 1)
	b.handler.Store(nil) // b serves at once
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{pickFirstScaled(t, 2)}, eds("c", a.backend, b.backend)))
	conn := e.dial()
	errs := startRPCs(e.ctx, conn, 2)
	a.waitArrived(t, e.ctx, 2, "two RPCs on a, the endpoint pick_first chose")
	if na, nb := a.conns.Load(), b.conns.Load(); na != 2 || nb != 0 {
		t.Fatalf("two RPCs at once: a %d connections, b %d; want 2, 0", na, nb)
	}

	a.closeConn(0) // a's own connection lost; its extra one is ready
	wantUnavailable(t, e.ctx, errs, "a's first connection closed")
	a.waitGone(t, e.ctx, "a's first connection closed")
	finish(t, e.ctx, a, errs, 1)
	more := startRPCs(e.ctx, conn, 1)
	a.waitArrived(t, e.ctx, 1, "an RPC with one of a's connections left")
	finish(t, e.ctx, a, more, 1)
	if nb := b.conns.Load(); nb != 0 {
		t.Errorf("a ready on its second connection: b has %d connections, want none (pick_first stays on a)", nb)
	}

	a.stop()
	e.waitServed(conn, 1, func(name string) bool { return name == "b" })
}

// a, chosen by pick_first, going from READY to CONNECTING (its own
// connection lost, then connecting again for a queued RPC, while its
// extra one is lost) starts a new pass at once (gRFC A105's PickFirst
// Changes): with a still connecting after its Happy Eyeballs turn, b is
// connected, with no RPC asking. (Before A105's change pick_first went
// idle, and connected nothing until an RPC came.)
func TestConnectionScalingPickFirstReadyToConnecting(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	a := startStreamsBackend(t, "a", 1)
	b := startStreamsBackend(t, "b", 1)
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{pickFirstScaled(t, 2)}, eds("c", a.backend, b.backend)))
	// a's held attempt must not time out during the test.
	conn := e.dial(grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: testTimeout}))
	errs := startRPCs(e.ctx, conn, 2)
	a.waitArrived(t, e.ctx, 2, "two RPCs on a")
	a.closeConn(0)
	wantUnavailable(t, e.ctx, errs, "a's first connection closed")

	// An RPC finds a's ready connection full: a's own connection, idle,
	// connects again, and is held there (CONNECTING).
	hold := make(chan struct{})
	a.hold.Store(&hold)
	defer close(hold)
	holdB := make(chan struct{})
	b.hold.Store(&holdB)
	defer close(holdB)
	ctx, cancel := context.WithCancel(e.ctx)
	queued := startRPCs(ctx, conn, 1)
	select {
	case <-a.holding:
	case <-e.ctx.Done():
		t.Fatal("a's own connection was not connected again")
	}
	cancel() // no RPC waits any more
	if err := <-queued; status.Code(err) != codes.Canceled {
		t.Fatalf("the queued RPC, cancelled: %v", err)
	}
	a.closeConn(1) // a's last ready connection: a is CONNECTING
	wantUnavailable(t, e.ctx, errs, "a's second connection closed")
	select {
	case <-b.holding:
	case <-e.ctx.Done():
		t.Fatal("a went from READY to CONNECTING: b was not connected (pick_first did not start a new pass)")
	}
}

// An extra connection failing leaves the endpoint READY on its own (gRFC
// A105: "If there is at least one connection established, report
// READY"), and backs off only the extra one: a's second connection
// refused, pick_first stays on a (the RPC that asked for it waits for a's
// stream, b is never connected); a's own connection lost then, it is
// made again at once, unslowed by the extra one's backoff, and serves.
func TestConnectionScalingExtraFailureKeepsEndpoint(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	a := startStreamsBackend(t, "a", 1)
	b := startStreamsBackend(t, "b", 1)
	b.handler.Store(nil)
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{pickFirstScaled(t, 2)}, eds("c", a.backend, b.backend)))
	// The failed connection's backoff outlasts the test: the endpoint has
	// a connection in TRANSIENT_FAILURE throughout.
	long := backoff.Config{BaseDelay: testTimeout, Multiplier: 1, MaxDelay: testTimeout}
	conn := e.dial(grpc.WithConnectParams(grpc.ConnectParams{Backoff: long, MinConnectTimeout: testTimeout}))
	first := startRPCs(e.ctx, conn, 1)
	a.waitArrived(t, e.ctx, 1, "the first RPC")
	a.refuse.Store(true)
	second := startRPCs(e.ctx, conn, 1)
	select {
	case <-a.refused: // the second RPC's connection failed
	case <-e.ctx.Done():
		t.Fatal("no second connection was attempted")
	}
	a.refuse.Store(false)
	a.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatalf("first RPC: %v", err)
	}
	a.waitArrived(t, e.ctx, 1, "the second RPC, on a's own connection (a still READY)")
	finish(t, e.ctx, a, second, 1)
	if n := b.conns.Load(); n != 0 {
		t.Errorf("a's extra connection failed: b has %d connections, want none (a stayed READY)", n)
	}

	a.handler.Store(nil)
	a.closeConn(0)
	e.waitServed(conn, 1, func(name string) bool { return name == "a" })
}
