package grpcxds_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// rlsConfig is a route lookup config for the Greeter service whose key
// "k" is the request's x-k header, looked up at server addr; defaultTarget
// may be "".
func rlsConfig(addr, defaultTarget string) string {
	return fmt.Sprintf(`{"grpcKeybuilders": [{"names": [{"service": "goxds.test.Greeter"}], "headers": [{"key": "k", "names": ["x-k"]}]}],
		"lookupService": %q, "lookupServiceTimeout": "10s", "cacheSizeBytes": "1000000", "defaultTarget": %q}`, addr, defaultTarget)
}

// rlsRoutes is a route configuration whose only route sends every RPC to
// the cluster the RLS plugin of config rlc names.
func rlsRoutes(t *testing.T, rlc string, optional bool) *routev3.RouteConfiguration {
	t.Helper()
	cfg, err := testutils.RouteLookupClusterSpecifier(rlc)
	if err != nil {
		t.Fatal(err)
	}
	return rlsRoutesWith(&routev3.ClusterSpecifierPlugin{Extension: &corev3.TypedExtensionConfig{Name: "rls", TypedConfig: cfg}, IsOptional: optional})
}

func rlsRoutesWith(p *routev3.ClusterSpecifierPlugin, more ...*routev3.Route) *routev3.RouteConfiguration {
	rc := routes(append([]*routev3.Route{{Match: prefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_ClusterSpecifierPlugin{ClusterSpecifierPlugin: "rls"},
	}}}}, more...)...)
	rc.ClusterSpecifierPlugins = []*routev3.ClusterSpecifierPlugin{p}
	return rc
}

// startRLS starts a lookup service that names cluster A for key a, B for
// b, and fails any other lookup.
func startRLS(t *testing.T) *testutils.RLSServer {
	t.Helper()
	rls, err := testutils.StartRLSServer(testutils.RLSTargetsByKey("k", map[string]string{"a": "A", "b": "B"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rls.Stop)
	return rls
}

// An RPC routed by the RLS plugin goes to the cluster the lookup service
// names for its keys, which no route names: the channel subscribes to it.
// A failed lookup sends it to the default target. Without the plugin's
// route, the clusters only RLS used are dropped. The same when the
// channel connects clusters on their first RPC: RLS targets at once, the
// route's cluster when called.
func TestRLSRoutesToTheClusterNamed(t *testing.T) {
	t.Parallel()
	forConnectModes(t, testRLSRoutesToTheClusterNamed)
}

func testRLSRoutesToTheClusterNamed(t *testing.T, opts grpcxds.Options) {
	cds := newCDSLog()
	e := newEnvServer(t, opts, testutils.ManagementServerOptions{OnStreamRequest: cds.record})
	a, b, d := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "d")
	rls := startRLS(t)
	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), "D"), false), clusters("A", "B", "D"), eds("A", a), eds("B", b), eds("D", d)))
	conn := e.dial()

	for key, want := range map[string]string{"a": "a", "b": "b", "other": "d"} {
		for range 3 {
			got, err := callWithHeader(e.ctx, conn, "x-k", key)
			if err != nil || got != want {
				t.Fatalf("RPC with x-k %q: served by %q, err %v; want %q", key, got, err, want)
			}
		}
	}
	// The lookups went to the server once per key: the policy caches.
	seen := make(map[string]int)
	for _, r := range rls.Requests() {
		if r.TargetType != "grpc" {
			t.Errorf("lookup target_type %q, want grpc", r.TargetType)
		}
		seen[r.KeyMap["k"]]++
	}
	if seen["a"] != 1 || seen["b"] != 1 || seen["other"] == 0 {
		t.Errorf("lookups by key = %v; want a and b once each, other at least once", seen)
	}

	cds.wait(t, e.ctx, "A", "B", "D")

	// The plugin's route gone, so is the RLS policy; RPCs go by the new
	// route, and the clusters only RLS used are unsubscribed.
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A", "B", "D"), eds("A", a), eds("B", b), eds("D", d)))
	e.waitServed(conn, 3, func(name string) bool { return name == "a" })
	// A key never looked up: through an RLS policy it would be. (Counting
	// every lookup instead raced with one the old policy had sent for
	// waitServed's RPCs before the new route took over.)
	if got, err := callWithHeader(e.ctx, conn, "x-k", "c"); err != nil || got != "a" {
		t.Errorf("RPC after the plugin's route left: served by %q, err %v; want a", got, err)
	}
	for _, r := range rls.Requests() {
		if r.KeyMap["k"] == "c" {
			t.Errorf("a lookup for key c after the plugin's route left")
		}
	}
	cds.wait(t, e.ctx, "A")
}

// cdsLog follows the Cluster names a SotW client subscribes to.
type cdsLog struct {
	mu    sync.Mutex
	names []string
	wake  chan struct{} // closed and replaced at each change
}

func newCDSLog() *cdsLog { return &cdsLog{wake: make(chan struct{})} }

func (l *cdsLog) record(_ int64, req *discoveryv3.DiscoveryRequest) error {
	if req.GetTypeUrl() != resources.ClusterTypeURL {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = slices.Sorted(slices.Values(req.GetResourceNames()))
	close(l.wake)
	l.wake = make(chan struct{})
	return nil
}

// wait waits until the names subscribed are want, sorted.
func (l *cdsLog) wait(t *testing.T, ctx context.Context, want ...string) {
	t.Helper()
	for {
		l.mu.Lock()
		got, wake := l.names, l.wake
		l.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("clusters subscribed: %v; want %v", got, want)
		}
	}
}

// Without a default target, a failed lookup fails the RPC with
// UNAVAILABLE, as in gRPC (the lookup's own code is not passed on).
func TestRLSFailedLookupWithoutDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	rls := startRLS(t)
	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), ""), false), clusters("A"), eds("A", a)))
	conn := e.dial()
	if got, err := callWithHeader(e.ctx, conn, "x-k", "a"); err != nil || got != "a" {
		t.Fatalf("RPC with x-k a: served by %q, err %v; want a", got, err)
	}
	_, err := callWithHeader(e.ctx, conn, "x-k", "zzz")
	if status.Code(err) != codes.Unavailable {
		t.Errorf("RPC whose lookup fails: %v; want UNAVAILABLE", err)
	}
}

// A route by an optional plugin that is not supported is skipped; one
// whose RLS config is invalid makes the route configuration invalid,
// optional or not (as gRPC decides), and the one in force stays.
func TestRLSPluginSkippedOrRejected(t *testing.T) {
	t.Parallel()
	nacks := make(chan string, 10)
	e := newEnvServer(t, grpcxds.Options{}, testutils.ManagementServerOptions{
		OnStreamRequest: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			if req.GetErrorDetail() != nil && req.GetTypeUrl() == resources.RouteConfigTypeURL {
				select {
				case nacks <- req.GetErrorDetail().GetMessage():
				default:
				}
			}
			return nil
		},
	})
	a, b := startBackend(t, "a"), startBackend(t, "b")
	unknown := &routev3.ClusterSpecifierPlugin{IsOptional: true, Extension: &corev3.TypedExtensionConfig{
		Name: "rls", TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/acme.Plugin"},
	}}
	e.update(tree(rlsRoutesWith(unknown, toCluster(prefix("/"), "A")), clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial()
	e.waitServed(conn, 3, func(name string) bool { return name == "a" })

	// Were the plugin skipped as unsupported, RPCs would go to B.
	bad := rlsRoutes(t, `{"lookupService": "127.0.0.1:1", "cacheSizeBytes": "1000"}`, true) // no key builders
	bad.VirtualHosts[0].Routes = append(bad.VirtualHosts[0].Routes, toCluster(prefix("/"), "B"))
	e.update(tree(bad, clusters("A", "B"), eds("A", a), eds("B", b)))
	select {
	case msg := <-nacks:
		if !strings.Contains(msg, `rls plugin "rls"`) || !strings.Contains(msg, "GrpcKeyBuilder") {
			t.Errorf("NACK %q; want it to name the plugin and what is wrong", msg)
		}
	case <-e.ctx.Done():
		t.Fatal("the route configuration with an invalid RLS config was not NACKed")
	}
	if got := count(t, e.ctx, conn, 10); got["a"] != 10 {
		t.Errorf("RPCs served by %v; want all by a, the configuration in force", got)
	}
}

// A target the management server does not have fails the RPCs sent to it
// once the client knows it is missing, naming it.
func TestRLSTargetMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	rls, err := testutils.StartRLSServer(func(r testutils.RLSRequest) (testutils.RLSResponse, error) {
		return testutils.RLSResponse{Targets: []string{strings.ToUpper(r.KeyMap["k"])}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rls.Stop)
	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), ""), false), clusters("A"), eds("A", a)))
	conn := e.dial()
	if got, err := callWithHeader(e.ctx, conn, "x-k", "a"); err != nil || got != "a" {
		t.Fatalf("RPC with x-k a: served by %q, err %v; want a", got, err)
	}
	_, err = callWithHeader(e.ctx, conn, "x-k", "ghost")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `"GHOST"`) {
		t.Errorf("RPC to a cluster that does not exist: %v; want UNAVAILABLE naming it", err)
	}
}

// A channel made with the resolver alone (no interceptors) routes by the
// plugin too: its picker matches the route itself.
func TestRLSWithoutInterceptors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	rls := startRLS(t)
	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), ""), false), clusters("A", "B"), eds("A", a), eds("B", b)))
	conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, key := range []string{"a", "b", "a"} {
		got, err := callWithHeader(e.ctx, conn, "x-k", key)
		if err != nil || got != key {
			t.Errorf("RPC with x-k %q: served by %q, err %v", key, got, err)
		}
	}
}

// The header data of the lookup's answer reaches the backend as
// x-google-rls-data; an RPC sent to the default target carries none.
func TestRLSHeaderDataReachesBackend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, d := startBackend(t, "a"), startBackend(t, "d")
	seen := make(chan []string, 10)
	h := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		seen <- md.Get("x-google-rls-data")
		return nil
	}
	a.handler.Store(&h)
	d.handler.Store(&h)
	rls, err := testutils.StartRLSServer(func(r testutils.RLSRequest) (testutils.RLSResponse, error) {
		if r.KeyMap["k"] == "a" {
			return testutils.RLSResponse{Targets: []string{"A"}, HeaderData: "data-for-a"}, nil
		}
		return testutils.RLSResponse{}, status.Error(codes.NotFound, "no target")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rls.Stop)
	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), "D"), false), clusters("A", "D"), eds("A", a), eds("D", d)))
	conn := e.dial()
	for key, want := range map[string][]string{"a": {"data-for-a"}, "other": nil} {
		got, err := callWithHeader(e.ctx, conn, "x-k", key)
		if err != nil {
			t.Fatalf("RPC with x-k %q: %v", key, err)
		}
		if md := <-seen; !slices.Equal(md, want) {
			t.Errorf("RPC with x-k %q served by %s with x-google-rls-data %q; want %q", key, got, md, want)
		}
	}
}
