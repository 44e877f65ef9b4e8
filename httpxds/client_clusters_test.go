package httpxds_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
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
	res.Clusters[0].OutlierDetection = &clusterv3.OutlierDetection{
		Interval:                       durationpb.New(10 * time.Second),
		BaseEjectionTime:               durationpb.New(time.Minute),
		MaxEjectionPercent:             wrapperspb.UInt32(50),
		FailurePercentageThreshold:     wrapperspb.UInt32(50),
		EnforcingFailurePercentage:     wrapperspb.UInt32(100),
		FailurePercentageMinimumHosts:  wrapperspb.UInt32(2),
		FailurePercentageRequestVolume: wrapperspb.UInt32(5),
		EnforcingSuccessRate:           wrapperspb.UInt32(0),
	}
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
// server: each request by locality, 5xx responses as errors, drops by
// category.
func TestClientLoadReporting(t *testing.T) {
	lrs := testutils.NewLRSServer()
	e := newCEnv(t, cenvOptions{ms: testutils.ManagementServerOptions{LoadReporting: lrs}})
	ok, fail := newBackend(t, "ok"), newBackend(t, "fail")
	fail.handler = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusBadGateway) }
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), nil)
	c := testutils.Cluster("c", "c")
	c.LrsServer = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	res.Clusters = []*clusterv3.Cluster{c}
	res.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("c", []testutils.EndpointSpec{
		{Host: "127.0.0.1", Port: ok.port, Locality: testutils.Locality{Region: "r", Zone: "zone-ok"}},
		{Host: "127.0.0.1", Port: fail.port, Locality: testutils.Locality{Region: "r", Zone: "zone-fail"}},
	})}
	e.update(res)
	const n = 20
	for range n {
		e.get("/x")
	}
	st, err := lrs.NextStream(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.NextRequest(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&lrsv3.LoadStatsResponse{SendAllClusters: true, LoadReportingInterval: durationpb.New(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
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
// connection serves both.
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
}
