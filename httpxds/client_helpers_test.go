package httpxds_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// svcHost is the host client tests send to: with the bootstrap's default
// template ("%s") it names the Listener "svc.test".
const svcHost = "svc.test"

// cenv is a management server and an httpxds Transport watching it.
type cenv struct {
	t   testing.TB
	ctx context.Context
	ms  *testutils.ManagementServer
	cfg *bootstrap.Config
	tr  *httpxds.Transport
	hc  *http.Client
	// configs are the configurations the Transport's hosts took.
	configs *hostConfigs
}

// hostConfigs are the configurations the hosts of a Transport took last,
// as httpxds.OnHostApplied tells them.
type hostConfigs struct {
	mu   sync.Mutex
	last map[string]*watchers.Snapshot // by URL host; nil: an error
	// changed is closed and replaced at each configuration taken.
	changed chan struct{}
}

func (c *hostConfigs) applied(host, _ string, s *watchers.Snapshot, _ error) {
	c.mu.Lock()
	c.last[host] = s
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// waitConfig waits until the configuration host took last satisfies ok
// (what says what is awaited, for the failure): once it returns, requests
// to host route by it.
func (e *cenv) waitConfig(host, what string, ok func(*watchers.Snapshot) bool) {
	e.t.Helper()
	c := e.configs
	for {
		c.mu.Lock()
		s, changed := c.last[host], c.changed
		c.mu.Unlock()
		if s != nil && ok(s) {
			return
		}
		select {
		case <-changed:
		case <-e.ctx.Done():
			e.t.Fatalf("host %s never took a configuration where %s", host, what)
		}
	}
}

// endpointsOf are the addresses of the cluster's endpoints in s, each with
// its health status.
func endpointsOf(s *watchers.Snapshot, cluster string) map[string]resources.HealthStatus {
	got := map[string]resources.HealthStatus{}
	cc := s.Clusters.Get(cluster)
	if cc == nil || cc.Endpoints == nil {
		return got
	}
	for _, l := range cc.Endpoints.Localities {
		for _, ep := range l.Endpoints {
			for _, a := range ep.Addresses {
				got[a] = ep.HealthStatus
			}
		}
	}
	return got
}

// addr is a backend's address as EDS names it.
func (b *backend) addr() string { return fmt.Sprintf("127.0.0.1:%d", b.port) }

type cenvOptions struct {
	apiType string // the bootstrap's api_type ("": SotW ADS)
	edit    func(*bootstrap.Config)
	opts    func(*httpxds.TransportOptions)
	ms      testutils.ManagementServerOptions
}

func newCEnv(t testing.TB, o cenvOptions) *cenv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(o.ms)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID, APIType: o.apiType}))
	if err != nil {
		t.Fatal(err)
	}
	if o.edit != nil {
		o.edit(cfg)
	}
	opts := httpxds.TransportOptions{Bootstrap: cfg, ClientOptions: quietClient, Logger: slog.New(slog.DiscardHandler)}
	if o.opts != nil {
		o.opts(&opts)
	}
	tr, err := httpxds.NewTransport(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	configs := &hostConfigs{last: map[string]*watchers.Snapshot{}, changed: make(chan struct{})}
	httpxds.OnHostApplied(tr, configs.applied)
	return &cenv{t: t, ctx: ctx, ms: ms, cfg: cfg, tr: tr, hc: &http.Client{Transport: tr}, configs: configs}
}

func (e *cenv) update(res testutils.Resources) {
	e.t.Helper()
	if err := e.ms.Update(e.ctx, nodeID, res); err != nil {
		e.t.Fatal(err)
	}
}

// do sends req and reads the response whole.
func (e *cenv) do(req *http.Request) (response, error) {
	resp, err := e.hc.Do(req.WithContext(e.ctx))
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, body: strings.TrimSpace(string(b)), header: resp.Header}, nil
}

// get sends a GET to url (of svcHost unless it has a host) with the
// given "Name: value" headers.
func (e *cenv) get(url string, headers ...string) response {
	e.t.Helper()
	if strings.HasPrefix(url, "/") {
		url = "http://" + svcHost + url
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		if strings.EqualFold(name, "host") {
			req.Host = strings.TrimSpace(value)
			continue
		}
		req.Header.Add(name, strings.TrimSpace(value))
	}
	got, err := e.do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", url, err)
	}
	return got
}

// want checks a response's status and that its body contains sub.
func (e *cenv) want(got response, status int, sub string) {
	e.t.Helper()
	if got.status != status || !strings.Contains(got.body, sub) {
		e.t.Errorf("got %d %q, want %d with %q", got.status, got.body, status, sub)
	}
}

// backend is a test HTTP server that answers "<name> <method> <path>
// <raw query> host=<Host>", and records each request's headers.
type backend struct {
	name string
	srv  *httptest.Server
	port uint32

	mu   sync.Mutex
	reqs []*http.Request
	// conns counts the connections open, closed the ones closed.
	open, closed int
	// connsChanged is closed and replaced when open or closed change.
	connsChanged chan struct{}
	// handler, if set, answers instead.
	handler http.HandlerFunc
}

func newBackend(t testing.TB, name string) *backend { return newBackendWith(t, name, nil) }

// newBackendWith is newBackend with edit, if set, editing the server
// before it starts.
func newBackendWith(t testing.TB, name string, edit func(*http.Server)) *backend {
	t.Helper()
	b := &backend{name: name, connsChanged: make(chan struct{})}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	if edit != nil {
		edit(b.srv.Config)
	}
	b.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch s {
		case http.StateNew:
			b.open++
		case http.StateClosed, http.StateHijacked:
			b.closed++
		default:
			return
		}
		close(b.connsChanged)
		b.connsChanged = make(chan struct{})
	}
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	b.port = uint32(b.srv.Listener.Addr().(*net.TCPAddr).Port)
	return b
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.reqs = append(b.reqs, r)
	h := b.handler
	b.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	fmt.Fprintf(w, "%s %s %s %s host=%s proto=%s", b.name, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, r.Proto)
}

// last is the last request the backend served.
func (b *backend) last() *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.reqs) == 0 {
		return nil
	}
	return b.reqs[len(b.reqs)-1]
}

func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reqs)
}

// clientListener is the client Listener of svcHost with rc inline and
// the given HTTP filters before the router.
func clientListener(rc *routev3.RouteConfiguration, filters ...*hcmv3.HttpFilter) *listenerv3.Listener {
	l := testutils.ListenerInlineRoute(svcHost, rc)
	if len(filters) == 0 {
		return l
	}
	var hcm hcmv3.HttpConnectionManager
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
		panic(err)
	}
	hcm.HttpFilters = append(filters, hcm.HttpFilters...)
	l.ApiListener.ApiListener = testutils.MarshalAny(&hcm)
	return l
}

// toCluster is a route of match to cluster c, edited by edit if set.
func toCluster(m *routev3.RouteMatch, c string, edit func(*routev3.RouteAction)) *routev3.Route {
	a := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: c}}
	if edit != nil {
		edit(a)
	}
	return &routev3.Route{Match: m, Action: &routev3.Route_Route{Route: a}}
}

// clusterOf is an EDS cluster named name with one endpoint per backend,
// and its endpoints.
func clusterOf(name string, bs ...*backend) (*clusterv3.Cluster, *endpointv3.ClusterLoadAssignment) {
	ports := make([]uint32, len(bs))
	for i, b := range bs {
		ports[i] = b.port
	}
	return testutils.Cluster(name, name), testutils.ClusterLoadAssignment(name, "127.0.0.1", ports...)
}

// world is the Listener of rc and one cluster per name, each with its
// backends.
func world(rc *routev3.RouteConfiguration, clusters map[string][]*backend, filters ...*hcmv3.HttpFilter) testutils.Resources {
	res := testutils.Resources{Listeners: []*listenerv3.Listener{clientListener(rc, filters...)}}
	for name, bs := range clusters {
		c, eds := clusterOf(name, bs...)
		res.Clusters = append(res.Clusters, c)
		res.Endpoints = append(res.Endpoints, eds)
	}
	return res
}

// circuitBreaker is a cluster's circuit breakers with max_requests n.
func circuitBreaker(n uint32) *clusterv3.CircuitBreakers {
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(n)}}}
}

// typeFractionalPercent100 is 100%.
var typeFractionalPercent100 = typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}

// waitAllClosed waits until every connection the backend accepted (at
// least one) is closed.
func (b *backend) waitAllClosed(t testing.TB, ctx context.Context) {
	t.Helper()
	for {
		b.mu.Lock()
		open, closed, changed := b.open, b.closed, b.connsChanged
		b.mu.Unlock()
		if open > 0 && open == closed {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("backend %s: %d connections opened, %d closed; want all closed", b.name, open, closed)
		case <-changed:
		}
	}
}

// lrsStream waits for the client's LRS stream on lrs and its first
// request, and asks for every cluster's load every 50ms.
func lrsStream(t *testing.T, e *cenv, lrs *testutils.LRSServer) *testutils.LRSStream {
	t.Helper()
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
	return st
}

// localityTotals reads st's load reports until they count n issued
// requests, summing every locality's; inProgress is the last one reported.
func localityTotals(t *testing.T, e *cenv, st *testutils.LRSStream, n uint64) (issued, succeeded, errored, inProgress uint64) {
	t.Helper()
	for issued < n {
		req, err := st.NextRequest(e.ctx)
		if err != nil {
			t.Fatalf("%v; issued so far: %d", err, issued)
		}
		for _, cs := range req.ClusterStats {
			for _, ls := range cs.UpstreamLocalityStats {
				issued += ls.TotalIssuedRequests
				succeeded += ls.TotalSuccessfulRequests
				errored += ls.TotalErrorRequests
				inProgress = ls.TotalRequestsInProgress
			}
		}
	}
	return issued, succeeded, errored, inProgress
}

// failurePercentage is outlier detection by failure percentage alone
// (success rate not enforced): judged every 10s, over hosts with 5
// requests or more, ejecting one at 50% failures for a minute, at most
// half of the hosts.
func failurePercentage() *clusterv3.OutlierDetection {
	return &clusterv3.OutlierDetection{
		Interval:                       durationpb.New(10 * time.Second),
		BaseEjectionTime:               durationpb.New(time.Minute),
		MaxEjectionPercent:             wrapperspb.UInt32(50),
		FailurePercentageThreshold:     wrapperspb.UInt32(50),
		EnforcingFailurePercentage:     wrapperspb.UInt32(100),
		FailurePercentageMinimumHosts:  wrapperspb.UInt32(1),
		FailurePercentageRequestVolume: wrapperspb.UInt32(5),
		EnforcingSuccessRate:           wrapperspb.UInt32(0),
	}
}

// blocksOn reports whether a request through tr (already cancelled, so
// it goes no further than the Transport's own bookkeeping) fails to
// return within testTimeout/2: a recorder calls it from a callback to
// tell whether the callback runs under the Transport's lock.
func blocksOn(tr *httpxds.Transport) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://lock-probe.test/", nil)
	done := make(chan struct{})
	go func() {
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
		close(done)
	}()
	select {
	case <-done:
		return false
	case <-time.After(testTimeout / 2):
		return true
	}
}

// reportingWorld routes every request to cluster "c", which reports its
// load to the management server itself (lrs_server: self), over eps.
func reportingWorld(eps ...testutils.EndpointSpec) testutils.Resources {
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), nil)
	c := testutils.Cluster("c", "c")
	c.LrsServer = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	res.Clusters = []*clusterv3.Cluster{c}
	res.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("c", eps)}
	return res
}

// unanswered sends n GET /x requests one at a time and returns how many
// got no response; a response other than 200 fails the test.
func unanswered(t *testing.T, e *cenv, n int) (failed int) {
	t.Helper()
	for range n {
		req, err := http.NewRequest(http.MethodGet, "http://"+svcHost+"/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.do(req)
		switch {
		case err != nil:
			failed++
		case got.status != http.StatusOK:
			t.Fatalf("a response %d, want 200 or no response", got.status)
		}
	}
	return failed
}

// h2cOptions are a cluster's HttpProtocolOptions asking for HTTP/2: h2
// over TLS, h2c without.
func h2cOptions() map[string]*anypb.Any {
	return map[string]*anypb.Any{
		"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": testutils.MarshalAny(&httpv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
			}},
		}),
	}
}
