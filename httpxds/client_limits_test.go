package httpxds_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// connLimits is a cluster's circuit breakers with max_pending_requests
// and max_connections.
func connLimits(pending, conns uint32) *clusterv3.CircuitBreakers {
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxPendingRequests: wrapperspb.UInt32(pending), MaxConnections: wrapperspb.UInt32(conns),
	}}}
}

// blocking makes b's handler tell entered of each request and hold it
// until release is closed.
func blocking(b *backend) (entered chan string, release chan struct{}) {
	entered, release = make(chan string, 16), make(chan struct{})
	b.handler = func(w http.ResponseWriter, r *http.Request) {
		entered <- b.name
		<-release
	}
	return entered, release
}

// getAsync sends GET path from a goroutine, its response to out.
func (e *cenv) getAsync(path string, out chan<- response) {
	go func() {
		req, err := http.NewRequest(http.MethodGet, "http://"+svcHost+path, nil)
		if err != nil {
			panic(err)
		}
		got, err := e.do(req)
		if err != nil {
			got = response{status: -1, body: err.Error()}
		}
		out <- got
	}()
}

// recv receives from ch within the test's deadline.
func recv[T any](t *testing.T, e *cenv, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-e.ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// Envoy's circuit breakers on HTTP/1.1 connections
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/circuit_breaking):
// with max_connections 2 busy, a request waits for one as a pending
// request rather than open a third; with max_pending_requests 1 waiting,
// the next is refused at once with 503 and x-envoy-overloaded; once the
// connections free, the pending request is served on one of them.
func TestClientMaxPendingRequestsAndConnections(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackend(t, "a")
	entered, release := blocking(a)
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	res.Clusters[0].CircuitBreakers = connLimits(1, 2)
	e.update(res)

	out := make(chan response, 4)
	e.getAsync("/1", out)
	recv(t, e, entered, "the first request at the backend")
	e.getAsync("/2", out)
	recv(t, e, entered, "the second request at the backend")
	// Both connections busy: one of these waits, the other overflows.
	e.getAsync("/3", out)
	e.getAsync("/4", out)
	got := recv(t, e, out, "a request refused by max_pending_requests")
	e.want(got, http.StatusServiceUnavailable, `cluster "c": 1 requests waiting for a connection, the circuit breaker's max_pending_requests`)
	if got.header.Get("X-Envoy-Overloaded") != "true" {
		t.Errorf("no x-envoy-overloaded header: %v", got.header)
	}
	close(release)
	for range 3 {
		e.want(recv(t, e, out, "the other responses"), http.StatusOK, "")
	}
	a.mu.Lock()
	open := a.open
	a.mu.Unlock()
	if open != 2 {
		t.Errorf("the backend accepted %d connections, want max_connections' 2", open)
	}
}

// max_connections counts the connections to every endpoint of the
// cluster, but an endpoint the balancer picks that has no connection
// gets one anyway, as Envoy makes sure it does: with max_connections 1
// busy on one endpoint, a request to the other is served, not held.
func TestClientMaxConnectionsOnePerEndpoint(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a, b := newBackend(t, "a"), newBackend(t, "b")
	entered, release := blocking(a)
	b.handler = func(w http.ResponseWriter, r *http.Request) {
		entered <- "b"
		<-release
	}
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a, b}})
	res.Clusters[0].CircuitBreakers = connLimits(1024, 1)
	e.update(res)
	out := make(chan response, 2)
	e.getAsync("/1", out)
	first := recv(t, e, entered, "the first request at a backend")
	e.getAsync("/2", out)
	if second := recv(t, e, entered, "the second request at the other backend"); second == first {
		t.Fatalf("both requests at %s, want one at each (round robin)", first)
	}
	close(release)
	for range 2 {
		e.want(recv(t, e, out, "the responses"), http.StatusOK, "")
	}
}

// On HTTP/2 the requests share the connection: once it is open none
// waits, so max_pending_requests only counts the requests that wait for
// it to be made, and max_connections 1 serves them all.
func TestClientMaxPendingRequestsHTTP2(t *testing.T) {
	e := newCEnv(t, cenvOptions{})
	a := newBackendWith(t, "a", func(s *http.Server) {
		s.Protocols = new(http.Protocols)
		s.Protocols.SetHTTP1(true)
		s.Protocols.SetUnencryptedHTTP2(true)
	})
	entered, release := blocking(a)
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	res.Clusters[0].CircuitBreakers = connLimits(1, 1)
	res.Clusters[0].TypedExtensionProtocolOptions = h2cOptions()
	e.update(res)
	out := make(chan response, 6)
	e.getAsync("/first", out)
	recv(t, e, entered, "the first request at the backend")
	for range 5 {
		e.getAsync("/more", out)
	}
	for range 5 {
		select {
		case <-entered:
		case got := <-out:
			t.Fatalf("a request answered %d %q while the connection was busy, want it multiplexed", got.status, got.body)
		case <-e.ctx.Done():
			t.Fatal("timed out waiting for the requests at the backend")
		}
	}
	close(release)
	for range 6 {
		e.want(recv(t, e, out, "the responses"), http.StatusOK, "")
	}
	a.mu.Lock()
	open := a.open
	a.mu.Unlock()
	if open != 1 {
		t.Errorf("the backend accepted %d connections, want 1", open)
	}
}

// A request refused by max_pending_requests is reported to LRS as
// max_requests' refusals are: dropped, in the total only, and never
// issued to a locality.
func TestClientMaxPendingRequestsLoadReport(t *testing.T) {
	lrs := testutils.NewLRSServer()
	e := newCEnv(t, cenvOptions{ms: testutils.ManagementServerOptions{LoadReporting: lrs}})
	a := newBackend(t, "a")
	entered, release := blocking(a)
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	res.Clusters[0].LrsServer = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	res.Clusters[0].CircuitBreakers = connLimits(1, 1)
	e.update(res)
	out := make(chan response, 3)
	e.getAsync("/1", out)
	recv(t, e, entered, "the first request at the backend")
	e.getAsync("/2", out)
	e.getAsync("/3", out)
	e.want(recv(t, e, out, "a request refused by max_pending_requests"), http.StatusServiceUnavailable, "max_pending_requests")
	close(release)
	for range 2 {
		e.want(recv(t, e, out, "the other responses"), http.StatusOK, "")
	}

	st := lrsStream(t, e, lrs)
	var issued, dropped uint64
	for issued < 2 || dropped < 1 {
		req, err := st.NextRequest(e.ctx)
		if err != nil {
			t.Fatalf("%v; reported so far: %d issued, %d dropped", err, issued, dropped)
		}
		for _, cs := range req.ClusterStats {
			dropped += cs.TotalDroppedRequests
			for _, ls := range cs.UpstreamLocalityStats {
				issued += ls.TotalIssuedRequests
			}
		}
	}
	if issued != 2 || dropped != 1 {
		t.Errorf("reported %d issued, %d dropped; want 2 and 1", issued, dropped)
	}
}

// A pending request its caller cancels before it got a connection never
// went upstream: the load report counts it neither as issued nor in
// progress, as Envoy counts a request issued (its host's rq_total, LRS's
// total_issued_requests) only once its connection pool attaches it to a
// connection (conn_pool_base.cc, attachStreamToClient).
func TestClientLoadReportPendingCancelled(t *testing.T) {
	lrs := testutils.NewLRSServer()
	e := newCEnv(t, cenvOptions{ms: testutils.ManagementServerOptions{LoadReporting: lrs}})
	a := newBackend(t, "a")
	entered, release := blocking(a)
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {a}})
	res.Clusters[0].LrsServer = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	res.Clusters[0].CircuitBreakers = connLimits(1, 1)
	e.update(res)
	out := make(chan response, 2)
	e.getAsync("/1", out)
	recv(t, e, entered, "the first request at the backend")

	// Of two more requests, one waits for the only connection and the
	// other is refused by max_pending_requests; then the waiting one's
	// caller gives up.
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ends := make(chan error, 2)
	for _, path := range []string{"/2", "/3"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+svcHost+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			resp, err := e.hc.Do(req)
			if err == nil {
				if resp.StatusCode != http.StatusServiceUnavailable {
					err = fmt.Errorf("status %d, want 503", resp.StatusCode)
				}
				resp.Body.Close()
			}
			ends <- err
		}()
	}
	if err := recv(t, e, ends, "the refusal by max_pending_requests"); err != nil {
		t.Fatalf("the first of two requests to end: %v, want a 503", err)
	}
	cancel()
	if err := recv(t, e, ends, "the cancelled request's end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled pending request: %v, want context.Canceled", err)
	}
	close(release)
	e.want(recv(t, e, out, "the first response"), http.StatusOK, "")

	st := lrsStream(t, e, lrs)
	var issued, inProgress, dropped uint64
	for issued < 1 || dropped < 1 {
		req, err := st.NextRequest(e.ctx)
		if err != nil {
			t.Fatalf("%v; reported so far: %d issued, %d dropped", err, issued, dropped)
		}
		for _, cs := range req.ClusterStats {
			dropped += cs.TotalDroppedRequests
			for _, ls := range cs.UpstreamLocalityStats {
				issued += ls.TotalIssuedRequests
				inProgress = ls.TotalRequestsInProgress
			}
		}
	}
	if issued != 1 || inProgress != 0 || dropped != 1 {
		t.Errorf("reported %d issued, %d in progress, %d dropped; want 1, 0 and 1 (the cancelled pending request never issued)", issued, inProgress, dropped)
	}
}
