package httpxds_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"

	"google.golang.org/protobuf/types/known/anypb"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// Outlier detection counts 5xx responses as failures (Envoy's success
// rate and failure percentage count them, and locally originated errors
// with them unless split_external_local_origin_errors,
// https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier):
// an endpoint answering 500 is ejected at the next interval, and the
// requests go to the other.
func TestClientOutlierDetection(t *testing.T) {
	clock := testutils.NewFakeClock(time.Unix(1000, 0))
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock }})
	bad, good := newBackend(t, "bad"), newBackend(t, "good")
	bad.handler = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad", http.StatusInternalServerError) }
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {bad, good}})
	od := failurePercentage()
	od.FailurePercentageMinimumHosts = wrapperspb.UInt32(2)
	// consecutive_5xx (client_outlier_test.go) would eject bad
	// before the interval: off, to see the failure percentage's.
	od.EnforcingConsecutive_5Xx = wrapperspb.UInt32(0)
	res.Clusters[0].OutlierDetection = od
	e.update(res)
	for range 20 {
		e.get("/x")
	}
	if bad.count() == 0 || good.count() == 0 {
		t.Fatalf("round robin: bad served %d, good %d", bad.count(), good.count())
	}
	clock.Advance(10 * time.Second)
	before := bad.count()
	for range 20 {
		e.want(e.get("/x"), 200, "good GET")
	}
	if bad.count() != before {
		t.Errorf("the ejected endpoint served %d more requests", bad.count()-before)
	}
}

// Clusters whose lrs_server is self report their load to the management
// server: each request by locality, 5xx responses as errors.
func TestClientLoadReporting(t *testing.T) {
	lrs := testutils.NewLRSServer()
	e := newCEnv(t, cenvOptions{ms: testutils.ManagementServerOptions{LoadReporting: lrs}})
	ok, fail := newBackend(t, "ok"), newBackend(t, "fail")
	fail.handler = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusBadGateway) }
	e.update(reportingWorld(
		testutils.EndpointSpec{Host: "127.0.0.1", Port: ok.port, Locality: testutils.Locality{Region: "r", Zone: "zone-ok"}},
		testutils.EndpointSpec{Host: "127.0.0.1", Port: fail.port, Locality: testutils.Locality{Region: "r", Zone: "zone-fail"}},
	))
	const n = 20
	for range n {
		e.get("/x")
	}
	st := lrsStream(t, e, lrs)
	got := map[string][2]uint64{} // zone: issued, errored
	for {
		req, err := st.NextRequest(e.ctx)
		if err != nil {
			t.Fatalf("%v; reports so far: %v", err, got)
		}
		for _, cs := range req.ClusterStats {
			for _, ls := range cs.UpstreamLocalityStats {
				z := got[ls.Locality.GetZone()]
				z[0] += ls.TotalIssuedRequests
				z[1] += ls.TotalErrorRequests
				got[ls.Locality.GetZone()] = z
			}
		}
		if got["zone-ok"][0]+got["zone-fail"][0] >= n {
			break
		}
	}
	if got["zone-ok"] != [2]uint64{uint64(ok.count()), 0} || got["zone-fail"] != [2]uint64{uint64(fail.count()), uint64(fail.count())} {
		t.Errorf("reported (issued, errored) by zone: %v; backends served ok %d, fail %d", got, ok.count(), fail.count())
	}
}

// An aggregate cluster fails over to its next cluster when the first has
// no healthy endpoint, and a LOGICAL_DNS cluster sends to what its name
// resolves to (gRFC A37's aggregate and LOGICAL_DNS clusters, as for
// gRPC).
func TestClientAggregateAndLogicalDNS(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "dns")
	res := world(routes("rc", toCluster(prefix("/"), "agg", nil)), nil)
	down := testutils.Cluster("down", "down")
	res.Clusters = []*clusterv3.Cluster{testutils.AggregateCluster("agg", "down", "dns"), down, testutils.LogicalDNSCluster("dns", "localhost", a.port)}
	res.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("down", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: 1, Health: corev3.HealthStatus_UNHEALTHY}})}
	e.update(res)
	got := e.get("/x")
	if got.status != 200 || !strings.HasPrefix(got.body, "dns GET /x") {
		t.Fatalf("got %d %q, want the LOGICAL_DNS cluster's backend", got.status, got.body)
	}
}

// Two hosts whose routes name the same cluster share its endpoints: one
// connection serves both; an update of the endpoints moves both, and the
// endpoint dropped has its connection closed.
func TestClientHostsShareEndpoints(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	rc := routes("rc", toCluster(prefix("/"), "c", nil))
	res := world(rc, map[string][]*backend{"c": {a}})
	other := testutils.ListenerInlineRoute("other.test", rc)
	res.Listeners = append(res.Listeners, other)
	e.update(res)
	e.want(e.get("/x"), 200, "a GET /x  host=svc.test")
	e.want(e.get("http://other.test/y"), 200, "a GET /y  host=other.test")
	a.mu.Lock()
	open := a.open
	a.mu.Unlock()
	if open != 1 {
		t.Errorf("the backend saw %d connections, want one shared by both hosts", open)
	}

	// An update of the cluster's endpoints reaches both hosts' requests.
	b := newBackend(t, "b")
	res = world(rc, map[string][]*backend{"c": {b}})
	res.Listeners = append(res.Listeners, other)
	e.update(res)
	for _, host := range []string{svcHost, "other.test"} {
		e.waitConfig(host, "cluster c has only b", func(s *watchers.Snapshot) bool {
			eps := endpointsOf(s, "c")
			_, ok := eps[b.addr()]
			return ok && len(eps) == 1
		})
	}
	e.want(e.get("/x"), 200, "b GET /x")
	e.want(e.get("http://other.test/y"), 200, "b GET /y")
	a.waitAllClosed(t, e.ctx)
}

// A cluster whose transport socket is http_11_proxy reaches its endpoints
// through CONNECT tunnels of the proxy their metadata names (gRFC A86),
// plaintext HTTP included.
func TestClientHTTPConnectProxy(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	p, err := testutils.StartConnectProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	testutils.HTTP11ProxyCluster(res.Clusters[0])
	testutils.ViaProxy(res.Endpoints[0], p.Port())
	e.update(res)
	e.want(e.get("/x"), 200, "a GET /x")
	e.want(e.get("/y"), 200, "a GET /y")
	if n := p.Tunnels(); n != 1 {
		t.Errorf("the proxy made %d tunnels, want one kept alive", n)
	}
}

// Priorities: requests go to the first priority with a healthy endpoint
// (EDS health status; Envoy's priority levels,
// https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/priority),
// and back up when it has one again.
func TestClientPriorities(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	p0, p1 := newBackend(t, "p0"), newBackend(t, "p1")
	eds := func(p0Health corev3.HealthStatus) testutils.Resources {
		res := world(routes("rc", toCluster(prefix("/"), "c", nil)), nil)
		res.Clusters = []*clusterv3.Cluster{testutils.Cluster("c", "c")}
		res.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("c", []testutils.EndpointSpec{
			{Host: "127.0.0.1", Port: p0.port, Priority: 0, Health: p0Health},
			{Host: "127.0.0.1", Port: p1.port, Priority: 1},
		})}
		return res
	}
	e.update(eds(corev3.HealthStatus_UNHEALTHY))
	e.want(e.get("/x"), 200, "p1 GET")
	e.update(eds(corev3.HealthStatus_HEALTHY))
	e.waitConfig(svcHost, "p0 is healthy", func(s *watchers.Snapshot) bool {
		return endpointsOf(s, "c")[p0.addr()] == resources.HealthStatusHealthy
	})
	e.want(e.get("/x"), 200, "p0 GET")
}

// The leaf policies run as for gRPC, over HTTP endpoints: wrr_locality
// shares requests between localities by weight (1:3), round_robin and
// least_request spread them within one, pick_first sends them all to the
// first endpoint
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/locality_weight).
func TestClientLeafPolicies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy proto.Message
		check  func(t *testing.T, near1, near2, far int)
	}{
		{"round_robin", &roundrobinv3.RoundRobin{}, func(t *testing.T, n1, n2, f int) {
			// far has weight 3 of 4: about 300 of 400, and near's split evenly.
			if f < 240 || f > 360 || n1 == 0 || n2 == 0 {
				t.Errorf("near %d+%d, far %d of 400; want about 100:300, both near endpoints used", n1, n2, f)
			}
		}},
		{"least_request", &leastrequestv3.LeastRequest{}, func(t *testing.T, n1, n2, f int) {
			if f < 240 || f > 360 || n1 == 0 || n2 == 0 {
				t.Errorf("near %d+%d, far %d of 400; want about 100:300, both near endpoints used", n1, n2, f)
			}
		}},
		{"pick_first", &pickfirstv3.PickFirst{}, func(t *testing.T, n1, n2, f int) {
			if n2 != 0 || n1 == 0 || f < 240 || f > 360 {
				t.Errorf("near %d+%d, far %d of 400; want near's all on its first endpoint, far about 300", n1, n2, f)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCEnv(t, cenvOptions{})
			n1, n2, f := newBackend(t, "n1"), newBackend(t, "n2"), newBackend(t, "far")
			res := world(routes("rc", toCluster(prefix("/"), "c", nil)), nil)
			c := testutils.Cluster("c", "c")
			child, err := anypb.New(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			wrr := testutils.MarshalAny(&wrrlocalityv3.WrrLocality{EndpointPickingPolicy: &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
				TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: "child", TypedConfig: child}}}}})
			c.LoadBalancingPolicy = &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
				TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: "wrr_locality", TypedConfig: wrr}}}}
			res.Clusters = []*clusterv3.Cluster{c}
			near, far := testutils.Locality{Zone: "near"}, testutils.Locality{Zone: "far"}
			res.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("c", []testutils.EndpointSpec{
				{Host: "127.0.0.1", Port: n1.port, Locality: near, LocalityWeight: 1},
				{Host: "127.0.0.1", Port: n2.port, Locality: near, LocalityWeight: 1},
				{Host: "127.0.0.1", Port: f.port, Locality: far, LocalityWeight: 3},
			})}
			e.update(res)
			for range 400 {
				if got := e.get("/x"); got.status != 200 {
					t.Fatalf("got %d %q", got.status, got.body)
				}
			}
			tc.check(t, n1.count(), n2.count(), f.count())
		})
	}
}

// A request its caller cancels is reported as issued, neither succeeded
// nor errored, as Envoy's load reports count it: its router charges a
// host an error (rq_error, LRS's total_error_requests) only for a 5xx,
// and a downstream reset charges none (router.cc, Filter::onDestroy).
func TestClientLoadReportingCallerCancel(t *testing.T) {
	lrs := testutils.NewLRSServer()
	e := newCEnv(t, cenvOptions{ms: testutils.ManagementServerOptions{LoadReporting: lrs}})
	b := newBackend(t, "b")
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server closes
	b.handler = func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	e.update(reportingWorld(
		testutils.EndpointSpec{Host: "127.0.0.1", Port: b.port, Locality: testutils.Locality{Region: "r", Zone: "z"}},
	))
	const n = 5
	for range n {
		ctx, cancel := context.WithCancel(e.ctx)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+svcHost+"/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			resp, err := e.hc.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		select {
		case <-arrived:
		case <-e.ctx.Done():
			t.Fatal("the request never reached the backend")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled request: %v, want context.Canceled", err)
		}
	}
	st := lrsStream(t, e, lrs)
	issued, succeeded, errored, inProgress := localityTotals(t, e, st, n)
	if issued != n || succeeded != 0 || errored != 0 || inProgress != 0 {
		t.Errorf("reported issued %d, succeeded %d, errored %d, in progress %d; want %d, 0, 0, 0", issued, succeeded, errored, inProgress, n)
	}
}
