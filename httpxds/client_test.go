package httpxds_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// A request's URL host names the Listener; its routes send each path to
// its cluster, over SotW and delta ADS, and the configuration is followed
// live: an update of the route configuration moves the next request.
func TestClientRoutesByListener(t *testing.T) {
	for _, mode := range []struct{ name, apiType string }{
		{"sotw", testutils.APITypeSotW},
		{"delta", testutils.APITypeDelta},
	} {
		t.Run(mode.name, func(t *testing.T) {
			e := newCEnv(t, cenvOptions{apiType: mode.apiType})
			a, b := newBackend(t, "a"), newBackend(t, "b")
			rc := routes("rc", toCluster(prefix("/a"), "ca", nil), toCluster(prefix("/b"), "cb", nil))
			e.update(world(rc, map[string][]*backend{"ca": {a}, "cb": {b}}))
			e.want(e.get("/a/x"), 200, "a GET /a/x")
			e.want(e.get("/b/y?q=1"), 200, "b GET /b/y q=1 host=svc.test")

			rc = routes("rc", toCluster(prefix("/"), "cb", nil))
			e.update(world(rc, map[string][]*backend{"cb": {b}}))
			e.waitConfig(svcHost, "cluster ca is gone", func(s *watchers.Snapshot) bool { return s.Clusters.Get("ca") == nil })
			e.want(e.get("/a/x"), 200, "b GET /a/x")
		})
	}
}

// A host whose Listener the server does not have fails its requests with
// an error naming the listener (and the node), once the client's
// does-not-exist timer says so.
func TestClientUnknownListener(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	e.update(world(routes("rc", toCluster(prefix("/"), "c", nil)), nil))
	req, _ := http.NewRequest(http.MethodGet, "http://nowhere.test:8080/x", nil)
	_, err := e.do(req)
	var herr *httpxds.HostError
	if !errors.As(err, &herr) || !errors.Is(err, client.ErrResourceNotFound) {
		t.Fatalf("got %v, want a *HostError wrapping ErrResourceNotFound", err)
	}
	if !strings.Contains(err.Error(), `"nowhere.test:8080"`) || !strings.Contains(err.Error(), nodeID) {
		t.Errorf("error %q does not name the listener and the node", err)
	}
}

// A request before the first configuration waits for it, bounded by its
// context.
func TestClientWaitsForConfiguration(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+svcHost+"/x", nil)
	_, err := e.hc.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the xDS configuration") {
		t.Fatalf("got %v, want the wait for the configuration to end with the context", err)
	}
	a := newBackend(t, "a")
	// getAsync, not e.get: a t.Fatal in a goroutine of the test's would
	// not end the test, which would then wait on done.
	done := make(chan response, 1)
	e.getAsync("/x", done)
	e.update(world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}}))
	e.want(recv(t, e, done, "the GET /x that waited for the configuration"), 200, "a GET /x")
}

// No route: Envoy's router answers 404 (route_not_found); the body names
// the listener, the route configuration and the path.
func TestClientNoRoute(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	e.update(world(routes("rc", toCluster(prefix("/a"), "c", nil)), map[string][]*backend{"c": {a}}))
	got := e.get("/b")
	e.want(got, 404, `no route for host "svc.test" path "/b" in route configuration "rc"`)
	e.want(got, 404, `listener "svc.test"`)
}

// A cluster with no healthy endpoint: 503 naming the cluster (Envoy's
// "no healthy upstream").
func TestClientNoHealthyEndpoint(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), nil)
	cl, _ := clusterOf("c")
	res.Clusters = append(res.Clusters, cl)
	res.Endpoints = append(res.Endpoints, testutils.Endpoints("c", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: 1, Health: corev3.HealthStatus_UNHEALTHY}}))
	e.update(res)
	e.want(e.get("/x"), 503, `no healthy upstream in cluster "c"`)
}

// Routes match on headers (Envoy's pseudo-headers included) and query
// parameters, as Envoy's RouteMatch: every matcher must match
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#config-route-v3-routematch).
func TestClientRouteMatchHeadersAndQuery(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	byHeader := prefix("/")
	byHeader.Headers = []*routev3.HeaderMatcher{{Name: "x-canary", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "yes"}}}}}
	byQuery := prefix("/")
	byQuery.QueryParameters = []*routev3.QueryParameterMatcher{{Name: "v", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "2"}}}}}
	rc := routes("rc", toCluster(byHeader, "ca", nil), toCluster(byQuery, "cb", nil), toCluster(prefix("/"), "cc", nil))
	e.update(world(rc, map[string][]*backend{"ca": {a}, "cb": {b}, "cc": {c}}))
	e.want(e.get("/x", "X-Canary: yes"), 200, "a GET")
	e.want(e.get("/x?v=2"), 200, "b GET")
	e.want(e.get("/x?v=3"), 200, "c GET")
}

// The virtual host is chosen by the request's Host, by Envoy's domain
// matching (exact, then suffix and prefix wildcards, then "*")
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#config-route-v3-virtualhost).
func TestClientVirtualHostByHost(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a, b := newBackend(t, "a"), newBackend(t, "b")
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{
		{Name: "admin", Domains: []string{"admin.svc.test"}, Routes: []*routev3.Route{toCluster(prefix("/"), "ca", nil)}},
		{Name: "any", Domains: []string{"*"}, Routes: []*routev3.Route{toCluster(prefix("/"), "cb", nil)}},
	}}
	e.update(world(rc, map[string][]*backend{"ca": {a}, "cb": {b}}))
	e.want(e.get("/x", "Host: admin.svc.test"), 200, "a GET /x  host=admin.svc.test")
	e.want(e.get("/x"), 200, "b GET /x  host=svc.test")
}

// Weighted clusters split requests by weight
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#config-route-v3-weightedcluster).
func TestClientWeightedClusters(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a, b := newBackend(t, "a"), newBackend(t, "b")
	rc := testutils.WeightedRouteConfig("rc", "*", testutils.ClusterWeight{Name: "ca", Weight: 1}, testutils.ClusterWeight{Name: "cb", Weight: 3})
	e.update(world(rc, map[string][]*backend{"ca": {a}, "cb": {b}}))
	const n = 400
	for range n {
		if got := e.get("/x"); got.status != 200 {
			t.Fatalf("got %d %q", got.status, got.body)
		}
	}
	// 1/4 of 400: 100, standard deviation 8.7; five of them either side.
	if got := a.count(); got < 56 || got > 144 {
		t.Errorf("cluster ca got %d of %d requests, want about %d", got, n, n/4)
	}
}

// Header mutations (the route's, virtual host's and route
// configuration's, in Envoy's order), prefix_rewrite and
// host_rewrite_literal
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#custom-request-response-headers,
// RouteAction.prefix_rewrite, host_rewrite_literal).
func TestClientMutationsAndRewrites(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	r := toCluster(prefix("/api/"), "c", func(ra *routev3.RouteAction) {
		ra.PrefixRewrite = "/v2/"
		ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "backend.internal"}
	})
	r.RequestHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-route", Value: "r1"},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}}
	r.RequestHeadersToRemove = []string{"x-secret"}
	r.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-served-by", Value: "mesh"}}}
	rx := toCluster(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/users/([0-9]+)/profile"}}}, "c",
		func(ra *routev3.RouteAction) {
			ra.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^/users/([0-9]+)/profile$"}, Substitution: `/profile/\1`}
		})
	e.update(world(routes("rc", r, rx), map[string][]*backend{"c": {a}}))
	req, _ := http.NewRequest(http.MethodGet, "http://"+svcHost+"/api/items?x=1", nil)
	req.Header.Set("X-Route", "caller")
	req.Header.Set("X-Secret", "s")
	got, err := e.do(req)
	if err != nil {
		t.Fatal(err)
	}
	e.want(got, 200, "a GET /v2/items x=1 host=backend.internal")
	if h := got.header.Get("X-Served-By"); h != "mesh" {
		t.Errorf("response header X-Served-By = %q, want mesh", h)
	}
	last := a.last()
	if last.Header.Get("X-Route") != "r1" || last.Header.Get("X-Secret") != "" {
		t.Errorf("backend got X-Route %q X-Secret %q, want r1 and none", last.Header.Get("X-Route"), last.Header.Get("X-Secret"))
	}
	if req.Header.Get("X-Route") != "caller" || req.Header.Get("X-Secret") != "s" || req.Host != svcHost || req.URL.Path != "/api/items" {
		t.Errorf("the caller's request was changed: %v %q %v", req.Header, req.Host, req.URL)
	}
	e.want(e.get("/users/42/profile"), 200, "a GET /profile/42")
}

// direct_response and redirect routes are answered by the client itself,
// as Envoy's router answers them; http.Client follows the redirect.
func TestClientDirectResponseAndRedirect(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	redirect := &routev3.Route{Match: prefix("/old"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{
		PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/new"},
	}}}
	rc := routes("rc", directRoute(prefix("/teapot"), 418, "short and stout"), redirect, toCluster(prefix("/"), "c", nil))
	e.update(world(rc, map[string][]*backend{"c": {a}}))
	e.want(e.get("/teapot"), 418, "short and stout")
	e.want(e.get("/old/page"), 200, "a GET /new/page")
}

// route.timeout bounds the request; when it fires before the response,
// Envoy's router answers 504 "upstream request timeout"
// (https://www.envoyproxy.io/docs/envoy/latest/faq/configuration/timeouts#route-timeouts).
func TestClientRouteTimeout(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	a.handler = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	r := toCluster(prefix("/"), "c", func(ra *routev3.RouteAction) { ra.Timeout = durationpb.New(50 * time.Millisecond) })
	e.update(world(routes("rc", r), map[string][]*backend{"c": {a}}))
	e.want(e.get("/slow"), 504, "upstream request timeout: route timeout 50ms")
}

// max_requests: a request over the circuit breaker's limit gets Envoy's
// 503 with x-envoy-overloaded
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/circuit_breaking).
func TestClientCircuitBreaker(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	entered, release := make(chan struct{}, 1), make(chan struct{})
	a.handler = func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	res.Clusters[0].CircuitBreakers = circuitBreaker(1)
	e.update(res)
	first := make(chan response, 1)
	e.getAsync("/1", first) // not e.get: its t.Fatal would end only its goroutine
	select {
	case <-entered:
	case got := <-first:
		t.Fatalf("the first request ended before the backend had it: %d %q", got.status, got.body)
	case <-e.ctx.Done():
		t.Fatal("timed out waiting for the first request at the backend")
	}
	got := e.get("/2")
	e.want(got, 503, `cluster "c": 1 requests in flight`)
	if got.header.Get("X-Envoy-Overloaded") != "true" {
		t.Errorf("no x-envoy-overloaded header: %v", got.header)
	}
	close(release)
	e.want(recv(t, e, first, "the first request's response"), 200, "")
	// The first request's end gave its place back.
	a.handler = nil
	e.want(e.get("/3"), 200, "a GET /3")
}

// EDS drop_overloads drop requests with 503, naming the category.
func TestClientDrops(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	res.Endpoints[0].Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{{
		Category: "throttle", DropPercentage: &typeFractionalPercent100,
	}}}
	e.update(res)
	e.want(e.get("/x"), 503, `request dropped (drop_overload category "throttle")`)
}

// An endpoint the configuration drops has its connections closed.
func TestClientClosesDroppedEndpoints(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a, b := newBackend(t, "a"), newBackend(t, "b")
	rc := routes("rc", toCluster(prefix("/"), "c", nil))
	e.update(world(rc, map[string][]*backend{"c": {a}}))
	e.want(e.get("/x"), 200, "a GET")
	e.update(world(rc, map[string][]*backend{"c": {b}}))
	e.waitConfig(svcHost, "cluster c has only b", func(s *watchers.Snapshot) bool {
		eps := endpointsOf(s, "c")
		_, ok := eps[b.addr()]
		return ok && len(eps) == 1
	})
	e.want(e.get("/x"), 200, "b GET")
	a.waitAllClosed(t, e.ctx)
}

// A Transport on a shared client routes through it, and its Close leaves
// the client open for its other users.
func TestClientSharedClient(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	e.update(world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}}))
	xc, err := client.New(e.cfg, quietClient)
	if err != nil {
		t.Fatal(err)
	}
	defer xc.Close()
	hc, tr, err := httpxds.NewClient(httpxds.TransportOptions{Client: xc})
	if err != nil {
		t.Fatal(err)
	}
	get := func(hc *http.Client) {
		t.Helper()
		req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://"+svcHost+"/x", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	get(hc)
	tr.Close()
	hc2, tr2, err := httpxds.NewClient(httpxds.TransportOptions{Client: xc})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	get(hc2) // the client still serves its cache and its stream
}
