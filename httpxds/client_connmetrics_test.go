package httpxds_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/metrics/otelxds"
	"github.com/goxds/xds/metrics/promxds"
	"github.com/goxds/xds/testutils"
)

// The connection recorders of both metrics adapters serve the HTTP
// client: their own instruments, and the gRPC channels' (one set of
// grpc.subchannel.* series across both clients).
var (
	_ httpxds.ConnectionMetrics = (*otelxds.HTTPConnectionMetrics)(nil)
	_ httpxds.ConnectionMetrics = (*promxds.HTTPConnectionCollector)(nil)
	_ httpxds.ConnectionMetrics = (*otelxds.SubchannelMetrics)(nil)
	_ httpxds.ConnectionMetrics = (*promxds.SubchannelCollector)(nil)
)

// connRecorder is an httpxds.ConnectionMetrics that keeps what it hears,
// one line each, and signals each on got. If tr is set, each call first
// sends a request through it, as outlierRecorder does, to tell whether it
// was called under the Transport's lock (underLock).
type connRecorder struct {
	tr  *httpxds.Transport
	got chan struct{}

	mu        sync.Mutex
	heard     []string
	underLock bool
}

func newConnRecorder() *connRecorder { return &connRecorder{got: make(chan struct{}, 100)} }

func (r *connRecorder) note(format string, args ...any) {
	if r.tr != nil && blocksOn(r.tr) {
		r.mu.Lock()
		r.underLock = true
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.heard = append(r.heard, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *connRecorder) ConnectionAttemptSucceeded(target, backendService, locality string) {
	r.note("%q %s %s succeeded", target, backendService, locality)
}

func (r *connRecorder) ConnectionAttemptFailed(target, backendService, locality string) {
	r.note("%q %s %s failed", target, backendService, locality)
}

func (r *connRecorder) Disconnection(target, backendService, locality, reason string) {
	r.note("%q %s %s disconnected: %s", target, backendService, locality, reason)
}

func (r *connRecorder) OpenConnections(target, backendService, locality string, delta int) {
	r.note("%q %s %s open %+d", target, backendService, locality, delta)
}

// expect waits for the recorder to hear len(want) more lines, and checks
// they are want, in any order (an attempt's lines and a disconnection's
// come from different goroutines).
func (r *connRecorder) expect(t *testing.T, when string, want ...string) {
	t.Helper()
	for range want {
		select {
		case <-r.got:
		case <-time.After(testTimeout):
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("%s: heard %q, want %q", when, r.heard, want)
		}
	}
	r.mu.Lock()
	got := r.heard
	r.heard = nil
	r.mu.Unlock()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: heard %q, want %q", when, got, want)
	}
}

// connWorld is svcHost routed to cluster "c", whose one endpoint is
// 127.0.0.1:port in locality r1/z1/s1.
func connWorld(port uint32) testutils.Resources {
	return testutils.Resources{
		Listeners: []*listenerv3.Listener{clientListener(routes("rc", toCluster(prefix("/"), "c", nil)))},
		Clusters:  []*clusterv3.Cluster{testutils.Cluster("c", "c")},
		Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("c", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: port,
			Locality: testutils.Locality{Region: "r1", Zone: "z1", SubZone: "s1"}}})},
	}
}

const connLabels = `"" c {region="r1", zone="z1", sub_zone="s1"}`

// Each TCP connection the Transport makes to an endpoint is measured as
// gRFC A94 measures a subchannel's, with the leaf cluster and the EDS
// locality as labels and no target, from outside the Transport's lock: a
// dial that connects is an attempt that succeeded and a connection open;
// the backend closing an idle connection is a disconnection, reason
// "unknown"; one reset under a request is "connection reset"; the
// endpoint leaving the configuration closes its idle connection,
// "subchannel shutdown".
func TestClientConnectionMetrics(t *testing.T) {
	rec := newConnRecorder()
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.ConnectionMetrics = rec }})
	rec.tr = e.tr
	b := newBackend(t, "b")
	b.handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/reset" {
			fmt.Fprint(w, "ok")
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // close with a reset
		conn.Close()
	}
	e.update(connWorld(b.port))

	e.want(e.get("/x"), http.StatusOK, "ok")
	rec.expect(t, "first request", connLabels+" succeeded", connLabels+" open +1")

	b.srv.CloseClientConnections()
	rec.expect(t, "backend closed the idle connection", connLabels+" disconnected: unknown", connLabels+" open -1")

	if got, err := e.do(mustRequest(t, "http://"+svcHost+"/reset")); err == nil && got.status == http.StatusOK {
		t.Errorf("/reset answered %d %q, want a failure", got.status, got.body)
	}
	rec.expect(t, "connection reset", connLabels+" succeeded", connLabels+" open +1",
		connLabels+" disconnected: connection reset", connLabels+" open -1")

	e.want(e.get("/x"), http.StatusOK, "ok")
	rec.expect(t, "request again", connLabels+" succeeded", connLabels+" open +1")
	other := newBackend(t, "other")
	e.update(connWorld(other.port))
	rec.expect(t, "endpoint dropped", connLabels+" disconnected: subchannel shutdown", connLabels+" open -1")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.underLock {
		t.Error("ConnectionMetrics was called under the Transport's lock")
	}
}

// A dial the endpoint refuses is an attempt failed, and no connection
// open.
func TestClientConnectionMetricsRefused(t *testing.T) {
	rec := newConnRecorder()
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.ConnectionMetrics = rec }})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(l.Addr().(*net.TCPAddr).Port)
	l.Close() // nothing listens there: refused
	e.update(connWorld(port))
	if got, err := e.do(mustRequest(t, "http://"+svcHost+"/x")); err == nil && got.status == http.StatusOK {
		t.Errorf("request answered %d %q, want a failure", got.status, got.body)
	}
	rec.expect(t, "refused", connLabels+" failed")
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// Over TLS, an attempt ends with the handshake: one that succeeds is an
// attempt succeeded (and HTTP/2 is still negotiated by ALPN: the
// measuring wraps the TCP connection, under the TLS one net/http looks
// for); one that fails (the server's SAN does not match) is an attempt
// failed, not a disconnection. Closing the Transport closes the
// connection it made: "subchannel shutdown".
func TestClientConnectionMetricsTLS(t *testing.T) {
	w := newTLSWorld(t)
	rec := newConnRecorder()
	e := newCEnv(t, cenvOptions{edit: w.providers(t), opts: func(o *httpxds.TransportOptions) { o.ConnectionMetrics = rec }})
	res := world(routes("rc", toCluster(prefix("/h2"), "h2", nil), toCluster(prefix("/badsan"), "badsan", nil)),
		map[string][]*backend{"h2": {w.b}, "badsan": {w.b}})
	for _, c := range res.Clusters {
		switch c.Name {
		case "h2":
			secure(c, "id", "roots", upstreamDNS)
			c.TypedExtensionProtocolOptions = h2cOptions()
		case "badsan":
			secure(c, "id", "roots", "someone.else")
		}
	}
	e.update(res)
	const (
		h2     = `"" h2 {region="", zone="", sub_zone=""}`
		badsan = `"" badsan {region="", zone="", sub_zone=""}`
	)
	e.want(e.get("/h2"), http.StatusOK, "proto=HTTP/2.0")
	rec.expect(t, "TLS and HTTP/2", h2+" succeeded", h2+" open +1")
	if _, err := e.do(mustRequest(t, "http://"+svcHost+"/badsan")); err == nil {
		t.Error("SAN mismatch: the request succeeded")
	}
	rec.expect(t, "handshake failed", badsan+" failed")
	e.tr.Close()
	rec.expect(t, "Transport closed", h2+" disconnected: subchannel shutdown", h2+" open -1")
}

// otelxds's HTTPConnectionMetrics plugs into
// TransportOptions.ConnectionMetrics: a request's connection is one
// attempt succeeded and one connection open on goxds.http.client.*, with
// the cluster and locality as attributes and no grpc.target. (The dial
// reports before net/http writes the request on the connection, so the
// measurements are in before the response.)
func TestClientConnectionMetricsOTel(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	cm, err := otelxds.NewHTTPConnectionMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) { o.ConnectionMetrics = cm }})
	b := newBackend(t, "b")
	e.update(connWorld(b.port))
	e.want(e.get("/x"), http.StatusOK, "b GET /x")
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if _, ok := p.Attributes.Value("grpc.target"); ok {
					t.Errorf("%s: a grpc.target attribute", m.Name)
				}
				if v, _ := p.Attributes.Value("grpc.lb.backend_service"); v.AsString() != "c" {
					t.Errorf("%s: grpc.lb.backend_service %q, want c", m.Name, v.Emit())
				}
				if v, _ := p.Attributes.Value("grpc.lb.locality"); v.AsString() != `{region="r1", zone="z1", sub_zone="s1"}` {
					t.Errorf("%s: grpc.lb.locality %q", m.Name, v.Emit())
				}
				got[m.Name] += p.Value
			}
		}
	}
	want := map[string]int64{"goxds.http.client.connection_attempts_succeeded": 1, "goxds.http.client.open_connections": 1}
	if !maps.Equal(got, want) {
		t.Errorf("measured %v, want %v", got, want)
	}
}
