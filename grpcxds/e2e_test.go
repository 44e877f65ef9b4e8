package grpcxds_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// An 80/20 weighted route splits 2,000 RPCs within 5% of 80/20.
func TestWeightedSplit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	e.update(tree(routes(weighted(prefix("/"), testutils.ClusterWeight{Name: "A", Weight: 80}, testutils.ClusterWeight{Name: "B", Weight: 20})),
		clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	const n = 2000
	got := count(t, e.ctx, conn, n, grpc.WaitForReady(true))
	share := float64(got["a"]) / n
	t.Logf("weighted 80/20 over %d RPCs: a %d (%.1f%%), b %d (%.1f%%)", n, got["a"], 100*share, got["b"], 100*(1-share))
	if share < 0.75 || share > 0.85 || got["a"]+got["b"] != n {
		t.Errorf("split %v, want a within 5%% of 80%%", got)
	}
}

// The legacy ROUND_ROBIN is wrr_locality over round_robin, as gRPC reads
// it: localities 3:1 share the traffic by weight, and within the second
// round_robin ignores the endpoint weights 1:3, giving 75%, 12.5% and
// 12.5% (grpc-go's split on the same resources).
func TestLocalityAndEndpointWeights(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	east, west := testutils.Locality{Region: "east"}, testutils.Locality{Region: "west"}
	cla := testutils.Endpoints("A", []testutils.EndpointSpec{
		{Host: "127.0.0.1", Port: a.port, Locality: east, LocalityWeight: 3},
		{Host: "127.0.0.1", Port: b.port, Locality: west, LocalityWeight: 1, Weight: 1},
		{Host: "127.0.0.1", Port: c.port, Locality: west, Weight: 3},
	})
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), cla))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	// All three ready: the round robin is weighted only among what is ready.
	e.waitServed(conn, 50, func(string) bool { return a.conns.Load() > 0 && b.conns.Load() > 0 && c.conns.Load() > 0 })
	const n = 2000
	got := count(t, e.ctx, conn, n)
	t.Logf("localities 3:1, endpoints 1:3 over %d RPCs: %v", n, got)
	for name, want := range map[string]float64{"a": 0.75, "b": 0.125, "c": 0.125} {
		if share := float64(got[name]) / n; share < want-0.02 || share > want+0.02 {
			t.Errorf("%s got %.1f%% of the RPCs, want %.2f%%", name, 100*share, 100*want)
		}
	}
}

// Routes match on headers of the outgoing metadata, in order.
func TestHeaderRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	canary := &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/goxds.test."},
		Headers: []*routev3.HeaderMatcher{{
			Name:                 "x-variant",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "canary"},
		}},
	}
	beta := &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Path{Path: sayHello},
		Headers: []*routev3.HeaderMatcher{{
			Name:                 "x-user",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: "beta-"},
		}},
	}
	e.update(tree(routes(toCluster(canary, "B"), toCluster(beta, "C"), toCluster(prefix("/"), "A")),
		clusters("A", "B", "C"), eds("A", a), eds("B", b), eds("C", c)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	for _, tc := range []struct{ key, value, want string }{
		{"x-variant", "canary", "b"},
		{"x-variant", "stable", "a"},
		{"x-user", "beta-42", "c"},
		{"x-user", "alpha-1", "a"},
		{"other", "canary", "a"},
	} {
		for range 5 {
			got, err := callWithHeader(e.ctx, conn, tc.key, tc.value)
			if err != nil || got != tc.want {
				t.Errorf("%s: %s → %q, %v; want %q", tc.key, tc.value, got, err, tc.want)
			}
		}
	}
}

// Priority 0 takes the traffic; when its endpoint fails (server stopped)
// or is marked unhealthy, priority 1 does; when it is back, priority 0
// again. The same when the cluster connects on its first RPC.
func TestPriorityFailoverAndFailback(t *testing.T) {
	t.Parallel()
	forConnectModes(t, testPriorityFailoverAndFailback)
}

func testPriorityFailoverAndFailback(t *testing.T, opts grpcxds.Options) {
	e := newEnvWith(t, opts)
	p0, p1 := startBackend(t, "p0"), startBackend(t, "p1")
	cla := func(health corev3.HealthStatus) *endpointv3.ClusterLoadAssignment {
		return testutils.Endpoints("A", []testutils.EndpointSpec{
			{Host: "127.0.0.1", Port: p0.port, Locality: testutils.Locality{Zone: "z0"}, Health: health},
			{Host: "127.0.0.1", Port: p1.port, Locality: testutils.Locality{Zone: "z1"}, Priority: 1},
		})
	}
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), cla(corev3.HealthStatus_HEALTHY))
	e.update(res)
	conn := e.dial()
	is := func(want string) func(string) bool { return func(got string) bool { return got == want } }
	e.waitServed(conn, 20, is("p0"))
	if p1.conns.Load() != 0 {
		t.Errorf("priority 1 was connected while priority 0 was ready")
	}

	p0.stop()
	e.waitServed(conn, 20, is("p1"))
	p0.restart(t)
	e.waitServed(conn, 20, is("p0"))

	res.Endpoints[0] = cla(corev3.HealthStatus_UNHEALTHY)
	e.update(res)
	e.waitServed(conn, 20, is("p1"))
	res.Endpoints[0] = cla(corev3.HealthStatus_UNKNOWN)
	e.update(res)
	e.waitServed(conn, 20, is("p0"))
}

// Removing an endpoint over EDS under load fails no RPC and does not
// reconnect the endpoints that stay.
func TestEndpointRemovalUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a, b, c))
	e.update(res)
	conn := e.dial()
	e.waitServed(conn, 30, func(string) bool { return a.rpcs.Load() > 0 && b.rpcs.Load() > 0 && c.rpcs.Load() > 0 })

	stop := load(e.ctx, conn, 4)
	res.Endpoints[0] = eds("A", a, b)
	e.update(res)
	e.waitServed(conn, 100, func(name string) bool { return name != "c" })
	n, errs := stop()
	cBefore := c.rpcs.Load()
	count(t, e.ctx, conn, 50)
	if len(errs) > 0 {
		t.Fatalf("%d of %d RPCs failed while an endpoint was removed; first: %v", len(errs), n+int64(len(errs)), errs[0])
	}
	if got := c.rpcs.Load(); got != cBefore {
		t.Errorf("the removed endpoint still got %d RPCs", got-cBefore)
	}
	if a.conns.Load() != 1 || b.conns.Load() != 1 {
		t.Errorf("connections accepted: a %d, b %d; want 1 each (no reconnect of unchanged endpoints)", a.conns.Load(), b.conns.Load())
	}
	t.Logf("%d RPCs under load, none failed", n)
}

// Switching the route to another cluster under load fails no RPC.
func TestRouteSwitchUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })

	stop := load(e.ctx, conn, 4)
	e.update(tree(routes(toCluster(prefix("/"), "B")), clusters("A", "B"), eds("A", a), eds("B", b)))
	e.waitServed(conn, 100, func(name string) bool { return name == "b" })
	// And back; then cluster B goes, as a control plane removes what no
	// route uses any more (deleting it with the switch would race the
	// route update: the deletion may arrive first).
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A", "B"), eds("A", a), eds("B", b)))
	e.waitServed(conn, 100, func(name string) bool { return name == "a" })
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	e.waitServed(conn, 100, func(name string) bool { return name == "a" })
	n, errs := stop()
	if len(errs) > 0 {
		t.Fatalf("%d of %d RPCs failed during route switches; first: %v", len(errs), n+int64(len(errs)), errs[0])
	}
	t.Logf("%d RPCs under load through two route switches, none failed", n)
}

// A deleted listener (from a server marked fail_on_data_errors: gRFC A88)
// fails RPCs with a status that says so, and puts the channel in
// TRANSIENT_FAILURE, where wait-for-ready RPCs wait, as in gRPC; restored,
// RPCs succeed again, the waiting ones too.
func TestListenerDeletedAndRestored(t *testing.T) {
	t.Parallel()
	e := newEnvWithFeatures(t, grpcxds.Options{}, bootstrap.FeatureFailOnDataErrors)
	a := startBackend(t, "a")
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a))
	e.update(res)
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })

	gone := res
	gone.Listeners = nil
	e.update(gone)
	err := e.waitFailing(conn)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `Listener "greeter": resource does not exist`) {
		t.Errorf("RPC failed with %v; want UNAVAILABLE saying the listener does not exist", err)
	}
	if s := conn.GetState(); s != connectivity.TransientFailure {
		t.Errorf("channel state with the listener deleted: %v; want TRANSIENT_FAILURE", s)
	}
	waiting := waitForReadyCall(t, e.ctx, conn)
	e.update(res)
	if err := <-waiting; err != nil {
		t.Errorf("wait-for-ready RPC made while the listener was deleted: %v; want it served once restored", err)
	}
}

// waitForReadyCall starts a wait-for-ready RPC and returns, once the RPC
// has met the channel's configuration error (it waits in the goxds
// interceptor for a usable configuration, or a pick failed and gRPC holds
// it), where its outcome will be sent.
func waitForReadyCall(t *testing.T, ctx context.Context, conn *grpc.ClientConn) <-chan error {
	t.Helper()
	met := make(chan struct{})
	once := sync.OnceFunc(func() { close(met) })
	rpcCtx := grpcxds.WithConfigWaitObserver(ctx, once)
	rpcCtx = grpcxds.WithPickObserver(rpcCtx, func(err error) {
		if err != nil {
			once()
		}
	})
	out := make(chan error, 1)
	go func() {
		_, err := call(rpcCtx, conn, grpc.WaitForReady(true))
		out <- err
	}()
	select {
	case <-met:
	case err := <-out:
		t.Fatalf("wait-for-ready RPC ended before meeting the configuration error: %v", err)
	case <-ctx.Done():
		t.Fatal("wait-for-ready RPC never met the configuration error")
	}
	return out
}

// A listener that never existed fails RPCs that are not wait-for-ready at
// once (at the does-not-exist timer, for a new client) with the reason,
// and holds wait-for-ready ones until it exists or their deadline, on a
// channel with the goxds interceptors and on one without (the picker's
// error then is not a status, so gRPC holds them itself).
func TestListenerMissing(t *testing.T) {
	t.Parallel()
	a := startBackend(t, "a")
	for _, tc := range []struct {
		name string
		dial func(*env) *grpc.ClientConn
	}{
		{"interceptors", func(e *env) *grpc.ClientConn { return e.dial() }},
		{"resolver-only", func(e *env) *grpc.ClientConn {
			conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			return conn
		}},
	} {
		e := newEnv(t)
		conn := tc.dial(e)
		_, err := call(e.ctx, conn)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "resource does not exist") {
			t.Errorf("%s: RPC failed with %v; want UNAVAILABLE saying the listener does not exist", tc.name, err)
		}
		short, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
		_, err = call(short, conn, grpc.WaitForReady(true))
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%s: wait-for-ready RPC with a 50ms deadline and no listener: %v; want DEADLINE_EXCEEDED", tc.name, err)
		}
		waiting := waitForReadyCall(t, e.ctx, conn)
		e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
		if err := <-waiting; err != nil {
			t.Errorf("%s: wait-for-ready RPC made before the listener existed: %v; want it served once it does", tc.name, err)
		}
	}
}

// Losing the management server keeps the configuration in force.
func TestManagementServerLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	e.ms.Stop()
	count(t, e.ctx, conn, 50)
}

// RPCs no route matches, or that match a route that does not forward,
// fail with UNAVAILABLE and the reason.
func TestUnroutableRPCs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	redirect := &routev3.Route{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: sayHello}},
		Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{HostRedirect: "elsewhere"}},
	}
	e.update(tree(routes(redirect, toCluster(prefix("/other/"), "A")), clusters("A"), eds("A", a)))
	conn := e.dial()
	_, err := call(e.ctx, conn, grpc.WaitForReady(true))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("RPC to a redirect route: %v; want UNAVAILABLE naming the redirect", err)
	}
	e.update(tree(routes(toCluster(prefix("/other/"), "A")), clusters("A"), eds("A", a)))
	err = e.waitFailing(conn)
	for status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "redirect") {
		err = e.waitFailing(conn)
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no route matches RPC "+sayHello) {
		t.Errorf("RPC no route matches: %v; want UNAVAILABLE saying so", err)
	}
}

// drop_overloads drop RPCs with UNAVAILABLE naming the category.
func TestDropOverload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	cla := eds("A", a)
	cla.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{{
		Category:       "throttle",
		DropPercentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
	}}}
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), cla))
	conn := e.dial()
	_, err := call(e.ctx, conn, grpc.WaitForReady(true))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "dropped by load balancing policy: throttle") {
		t.Errorf("RPC: %v; want UNAVAILABLE, dropped by load balancing policy: throttle", err)
	}
	if a.rpcs.Load() != 0 {
		t.Errorf("backend got %d RPCs, want 0", a.rpcs.Load())
	}
}

// ring_hash with a header hash policy sends one header value to one
// backend, and spreads many values over the backends; also when the cluster
// connects on its first RPC.
func TestRingHash(t *testing.T) {
	t.Parallel()
	forConnectModes(t, testRingHash)
}

func testRingHash(t *testing.T, opts grpcxds.Options) {
	e := newEnvWith(t, opts)
	bs := []*backend{startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")}
	route := toCluster(prefix("/"), "A")
	route.GetRoute().HashPolicy = []*routev3.RouteAction_HashPolicy{{
		PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "x-user"}},
	}}
	cluster := testutils.Cluster("A", "")
	cluster.LbPolicy = clusterv3.Cluster_RING_HASH
	e.update(tree(routes(route), []*clusterv3.Cluster{cluster}, eds("A", bs...)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	// Every endpoint ready, so that no user waits on a connecting one.
	e.waitServed(conn, 30, func(string) bool { return bs[0].conns.Load()*bs[1].conns.Load()*bs[2].conns.Load() > 0 })

	seen := make(map[string]bool)
	for u := range 30 {
		user := "user-" + string(rune('A'+u))
		first, err := callWithHeader(e.ctx, conn, "x-user", user)
		if err != nil {
			t.Fatal(err)
		}
		seen[first] = true
		for range 10 {
			if got, err := callWithHeader(e.ctx, conn, "x-user", user); err != nil || got != first {
				t.Fatalf("%s went to %q (%v), then to %q", user, first, err, got)
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("30 users all went to %v", seen)
	}
}

// An endpoint listed by two clusters has one connection.
func TestEndpointSharedByClusters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(weighted(prefix("/"), testutils.ClusterWeight{Name: "A", Weight: 1}, testutils.ClusterWeight{Name: "B", Weight: 1})),
		clusters("A", "B"), eds("A", a), eds("B", a)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	count(t, e.ctx, conn, 100)
	if n := a.conns.Load(); n != 1 {
		t.Errorf("the endpoint of two clusters got %d connections, want 1", n)
	}
}
