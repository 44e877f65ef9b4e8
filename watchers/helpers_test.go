package watchers_test

import (
	"context"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
	"github.com/goxds/xds/watchers"
)

// The tests run every behaviour against go-control-plane's server over real
// gRPC on 127.0.0.1, once per ADS variant, and script exact orders with the
// fake server where go-control-plane cannot produce them. They wait on
// events with deadlines and never sleep.

const (
	testTimeout = 20 * time.Second
	nodeID      = "node-1"
	// longExpiry never fires in a test: resources that exist must never
	// be declared missing because a loaded machine was slow.
	longExpiry = time.Minute
	// shortExpiry is for tests of resources that do not exist; long enough
	// that those that do exist arrive in time on a loaded machine.
	shortExpiry = 2 * time.Second

	ldsURL = resources.ListenerTypeURL
	rdsURL = resources.RouteConfigTypeURL
	cdsURL = resources.ClusterTypeURL
	edsURL = resources.EndpointsTypeURL
)

var allTypes = []string{ldsURL, rdsURL, cdsURL, edsURL}

// variant is one protocol variant, as the bootstrap's api_type names it,
// and for the tests against go-control-plane the cache that serves it.
type variant struct {
	name    string
	apiType string
	// linear serves from go-control-plane's linear cache; adsCache from its
	// snapshot cache in ADS mode. Neither: its snapshot cache without ADS
	// mode. Only for newEnv.
	linear, adsCache bool
}

// variants are the ADS variants, which the tests against a fake server run
// on.
var variants = []variant{
	{name: "sotw", apiType: testutils.APITypeSotW},
	{name: "delta", apiType: testutils.APITypeDelta},
}

// serverVariants are the variants the tests against go-control-plane run
// on: every mode users run against its stock server and caches, but one.
// Not SotW from the snapshot cache in ADS mode: it answers a SotW request
// naming resources only once the request names every resource of the type
// in the snapshot, and drops the others without keeping a watch, so a tree
// that needs some of the clusters, or asks for them before the server has
// them, is never answered (envoyproxy/go-control-plane#426). The client
// suite's E2E tests run there, on whole types.
var serverVariants = append(variants[:len(variants):len(variants)],
	variant{name: "delta-ads-cache", apiType: testutils.APITypeDelta, adsCache: true},
	variant{name: "sotw-linear", apiType: testutils.APITypeSotW, linear: true},
	variant{name: "delta-linear", apiType: testutils.APITypeDelta, linear: true},
	variant{name: "sotw-per-type", apiType: testutils.APITypeSotWPerType},
	variant{name: "delta-per-type", apiType: testutils.APITypeDeltaPerType},
)

// forEachVariant runs f once per ADS variant, in parallel subtests.
func forEachVariant(t *testing.T, f func(t *testing.T, v variant)) {
	t.Helper()
	forVariants(t, variants, f)
}

// forEachServerVariant runs f once per server variant, in parallel
// subtests.
func forEachServerVariant(t *testing.T, f func(t *testing.T, v variant)) {
	t.Helper()
	forVariants(t, serverVariants, f)
}

func forVariants(t *testing.T, vs []variant, f func(t *testing.T, v variant)) {
	t.Helper()
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			f(t, v)
		})
	}
}

// fastBackoff and fastTransport keep reconnection quick in tests, for
// streams and for gRPC's own reconnection of the connection under them.
var (
	fastBackoff   = backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}
	fastTransport = transport.Options{
		Backoff:           fastBackoff,
		MinStreamInterval: time.Millisecond,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           fastBackoff,
			MinConnectTimeout: time.Second,
		})},
	}
)

// env is a management server and a client of it.
type env struct {
	t    *testing.T
	v    variant
	ms   *testutils.ManagementServer
	subs *subsLog
	c    *client.Client
}

// newEnv starts a management server and a client of it; features are the
// server's server_features in the client's bootstrap.
func newEnv(t *testing.T, v variant, expiry time.Duration, features ...string) *env {
	t.Helper()
	subs := newSubsLog()
	ms, err := testutils.StartManagementServer(subs.hooks(testutils.ManagementServerOptions{Linear: v.linear, ADS: v.adsCache}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	e := &env{t: t, v: v, ms: ms, subs: subs}
	e.c = newClient(t, ms.Address(), v, expiry, features...)
	return e
}

// failOnDataErrors marks a server whose deletions drop what the client
// holds (gRFC A88); without it a deleted Listener or Cluster is kept, and
// its watchers get an ambient error.
const failOnDataErrors = bootstrap.FeatureFailOnDataErrors

func newClient(t *testing.T, addr string, v variant, expiry time.Duration, features ...string) *client.Client {
	t.Helper()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:      addr,
		APIType:        v.apiType,
		NodeID:         nodeID,
		ServerFeatures: features,
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{WatchExpiry: expiry, TransportOptions: fastTransport, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // runs before the server's Stop: cleanups are LIFO
	return c
}

func (e *env) update(res testutils.Resources) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.ms.Update(ctx, nodeID, res); err != nil {
		e.t.Fatal(err)
	}
}

// watch starts a tree watch with a recorder; the tree is cancelled when
// the test ends.
func (e *env) watch(listener string, opts watchers.TreeOptions) (*recorder, func()) {
	r := newRecorder(e.t)
	cancel := watchers.WatchConfigTree(e.c, listener, opts, r)
	e.t.Cleanup(cancel)
	return r, cancel
}

// barrier returns once every callback the client queued before the call
// has run. A watch of a type the client does not know fails at once,
// through the callback queue, behind everything already in it.
func barrier(t *testing.T, c *client.Client) {
	t.Helper()
	done := make(chan struct{})
	cancel := c.WatchResource("type.googleapis.com/goxds.test.Barrier", "barrier", client.WatcherFuncs[resources.Resource]{
		OnResourceError: func(error) { close(done) },
	})
	defer cancel()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("barrier: the client's callback queue did not drain")
	}
}

// Resource builders beyond testutils': route configurations with several
// routes of different kinds.

func route(prefix, cluster string) *routev3.Route {
	return &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
		}},
	}
}

func weightedRoute(prefix string, cws ...testutils.ClusterWeight) *routev3.Route {
	wc := &routev3.WeightedCluster{}
	for _, cw := range cws {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: cw.Name, Weight: wrapperspb.UInt32(cw.Weight)})
	}
	return &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc},
		}},
	}
}

func redirectRoute(prefix string) *routev3.Route {
	return &routev3.Route{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{HostRedirect: "elsewhere.example.com"}},
	}
}

// routeConfig builds a RouteConfiguration with one virtual host per domain
// list; each virtual host gets all the routes.
func routeConfig(name string, domains []string, routes ...*routev3.Route) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    name + "-vhost",
			Domains: domains,
			Routes:  routes,
		}},
	}
}

// simpleTree is listener L → RDS R → one route to each named EDS cluster
// (weighted, equal weights, when there are several).
func simpleTree(listener, rc string, clusterNames ...string) testutils.Resources {
	return testutils.DefaultResources(testutils.ResourceParams{
		ListenerName: listener,
		RouteName:    rc,
		ClusterNames: clusterNames,
	})
}

func listeners(ls ...*listenerv3.Listener) []*listenerv3.Listener { return ls }
