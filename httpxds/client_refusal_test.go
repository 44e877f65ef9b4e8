package httpxds_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// refusedHTTPS sends n https requests to a cluster without TLS through
// e: each must be refused, not sent.
func refusedHTTPS(t *testing.T, e *cenv, n int) {
	t.Helper()
	for range n {
		req, err := http.NewRequest(http.MethodGet, "https://"+svcHost+"/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.do(req); err == nil || !strings.Contains(err.Error(), "which has no UpstreamTlsContext") {
			t.Fatalf("https to a cluster without TLS: %v, want the refusal", err)
		}
	}
}

// An https request refused because its cluster has no TLS never reached
// the endpoint it was picked for: it says nothing of that endpoint, so
// outlier detection does not count it (an https caller must not get a
// healthy plaintext endpoint ejected), as Envoy's outlier detection hears
// only of requests sent upstream
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier).
func TestClientHTTPSRefusalDoesNotEject(t *testing.T) {
	clock := testutils.NewFakeClock(time.Unix(1000, 0))
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.Clock = clock }})
	a, b := newBackend(t, "a"), newBackend(t, "b")
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a, b}})
	res.Clusters[0].OutlierDetection = failurePercentage()
	e.update(res)
	refusedHTTPS(t, e, 20)
	clock.Advance(10 * time.Second) // the interval ends: failure_percentage judges
	for range 20 {
		e.want(e.get("/x"), 200, "GET /x")
	}
	if a.count() != 10 || b.count() != 10 {
		t.Errorf("after 20 refused https requests, a served %d and b %d of 20; want 10 each (neither ejected)", a.count(), b.count())
	}
}

// The load report counts a refused https request not at all: it never
// left for the endpoint it was picked for, and Envoy counts a request
// issued (LRS's total_issued_requests) only once it has a connection
// upstream. A request sent after them is counted alone.
func TestClientHTTPSRefusalLoadReport(t *testing.T) {
	lrs := testutils.NewLRSServer()
	e := newCEnv(t, cenvOptions{ms: testutils.ManagementServerOptions{LoadReporting: lrs}})
	b := newBackend(t, "b")
	e.update(reportingWorld(
		testutils.EndpointSpec{Host: "127.0.0.1", Port: b.port, Locality: testutils.Locality{Region: "r", Zone: "z"}},
	))
	refusedHTTPS(t, e, 5)
	e.want(e.get("/x"), 200, "GET /x")
	st := lrsStream(t, e, lrs)
	issued, succeeded, errored, inProgress := localityTotals(t, e, st, 1)
	if issued != 1 || succeeded != 1 || errored != 0 || inProgress != 0 || b.count() != 1 {
		t.Errorf("reported issued %d, succeeded %d, errored %d, in progress %d (backend served %d); want 1, 1, 0, 0 (1): the 5 refused requests not issued",
			issued, succeeded, errored, inProgress, b.count())
	}
}
