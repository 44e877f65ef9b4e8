package httpxds_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// expectClosed checks that a connection to the server is closed without
// an answer: what a server that is not serving does.
func (e *env) expectClosed() {
	e.t.Helper()
	c, err := net.Dial("tcp", e.lis.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if n, err := c.Read(make([]byte, 1)); err == nil {
		e.t.Errorf("read %d bytes from a server that is not serving", n)
	}
}

// TestServingModes: not serving (connections closed) until the Listener
// and its RDS route configuration are held, serving then, and not serving
// again once the Listener is deleted by a server marked
// fail_on_data_errors (gRFC A88: only then does a deletion drop it), told
// to the callback with the reason (gRFC A36's serving modes), for SotW and
// delta ADS.
func TestServingModes(t *testing.T) {
	for _, api := range []string{testutils.APITypeSotW, testutils.APITypeDelta} {
		t.Run(api, func(t *testing.T) {
			e := newEnv(t, envOptions{apiType: api, edit: func(c *bootstrap.Config) {
				c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureFailOnDataErrors)
			}})
			e.expectClosed()
			l := e.listener(nil, "rds-routes", nil)
			// The Listener alone: still waiting for its route configuration.
			e.update(testutils.Resources{Listeners: []*listenerv3.Listener{l}})
			e.expectClosed()
			e.update(testutils.Resources{Listeners: []*listenerv3.Listener{l}, Routes: []*routev3.RouteConfiguration{routes("rds-routes", serveRoute(prefix("/")))}})
			e.waitMode(httpxds.ServingModeServing)
			e.want(e.get("/hello"), http.StatusOK, "served GET /hello")

			e.update(testutils.Resources{})
			got := e.waitMode(httpxds.ServingModeNotServing)
			if got.Err == nil || !strings.Contains(got.Err.Error(), e.name) {
				t.Errorf("not serving because of %v, want an error naming %q", got.Err, e.name)
			}
			e.expectClosed()
		})
	}
}

// TestListenerForAnotherAddress: a Listener whose address is not the
// listening one is not served, and the reason names both.
func TestListenerForAnotherAddress(t *testing.T) {
	e := newEnv(t, envOptions{})
	l := e.listener(routes("rc", serveRoute(prefix("/"))), "", nil)
	l.Address.GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: e.port + 1}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{l}})
	got := e.waitMode(httpxds.ServingModeNotServing)
	if got.Err == nil || !strings.Contains(got.Err.Error(), "not for the listening address "+e.lis.Addr().String()) {
		t.Errorf("not serving because of %v", got.Err)
	}
}

// TestRouting: virtual host by Host, routes by path, headers and query
// parameters (Envoy's RouteMatch: every matcher must match); 404 naming
// the host, path and route configuration when nothing matches, as Envoy
// answers 404 for no route; direct_response answered with its status and
// body; a forwarding route refused with 503 (gRFC A36: a server serves
// only non_forwarding_action; gRPC fails it UNAVAILABLE).
func TestRouting(t *testing.T) {
	e := newEnv(t, envOptions{})
	byHeader := serveRoute(&routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/h"},
		Headers: []*routev3.HeaderMatcher{{Name: "x-team", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
			StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "blue"}}}}},
	})
	byQuery := directRoute(&routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Path{Path: "/q"},
		QueryParameters: []*routev3.QueryParameterMatcher{
			{Name: "debug", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}},
			{Name: "v", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
				StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "2 x"}}}},
		},
	}, 200, "query route")
	forwarding := &routev3.Route{Name: "to-cluster", Match: prefix("/fwd"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "elsewhere"}}}}
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{
		{Name: "api", Domains: []string{"api.test"}, Routes: []*routev3.Route{byHeader, byQuery, forwarding, directRoute(prefix("/gone"), 410, "")}},
	}}
	e.serve(e.listener(rc, "", nil))
	get := func(host, target string, headers ...string) response {
		return e.raw("GET", target, append([]string{"Host: " + host}, headers...)...)
	}

	e.want(get("api.test", "/h1", "X-Team: blue"), http.StatusOK, "served GET /h1")
	e.want(get("api.test", "/h1", "X-Team: red"), http.StatusNotFound,
		`httpxds: no route for host "api.test" path "/h1" in route configuration "rc" (virtual host "api", listener "`+e.name+`")`)
	e.want(get("api.test", "/q?debug&v=2+x"), http.StatusOK, "query route")
	e.want(get("api.test", "/q?debug=1&v=2%20x&v=3"), http.StatusOK, "query route")
	e.want(get("api.test", "/q?v=2+x"), http.StatusNotFound, `no route for host "api.test" path "/q"`)
	e.want(get("api.test", "/q?debug&v=3&v=2+x"), http.StatusNotFound, `no route`) // the first value counts
	e.want(get("other.test", "/h1"), http.StatusNotFound, `httpxds: no virtual host for host "other.test" in route configuration "rc"`)
	e.want(get("api.test", "/fwd/x"), http.StatusServiceUnavailable,
		`route "to-cluster" of route configuration "rc" (host "api.test", path "/fwd/x") has action route; this server serves only non_forwarding_action, direct_response and redirect routes`)
	gone := get("api.test", "/gone")
	if gone.status != http.StatusGone || gone.body != "" {
		t.Errorf("direct_response 410 without a body: got %d %q", gone.status, gone.body)
	}
	q := get("api.test", "/q?debug&v=2+x")
	if ct := q.header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("direct_response with a body has Content-Type %q, want text/plain (Envoy's)", ct)
	}
}

// faultFilter is Envoy's fault filter with an abort (100%, status) and a
// header-controlled delay.
func faultFilter(status uint32) *hcmv3.HttpFilter {
	cfg := &faultv3.HTTPFault{
		Abort: &faultv3.FaultAbort{
			ErrorType:  &faultv3.FaultAbort_HttpStatus{HttpStatus: status},
			Percentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
		},
		Delay: &faultcommonv3.FaultDelay{
			FaultDelaySecifier: &faultcommonv3.FaultDelay_HeaderDelay_{HeaderDelay: &faultcommonv3.FaultDelay_HeaderDelay{}},
			Percentage:         &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
		},
	}
	return &hcmv3.HttpFilter{Name: "fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(cfg)}}
}

// TestFaultInjection: Envoy's fault filter on the server: an abort with
// the configured HTTP status and Envoy's body "fault filter abort"; the
// x-envoy-fault-abort-request header choosing the status of a
// header_abort; x-envoy-fault-delay-request delaying the request
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/fault_filter);
// a route whose typed_per_filter_config disables it is served.
func TestFaultInjection(t *testing.T) {
	e := newEnv(t, envOptions{})
	open := serveRoute(prefix("/open"))
	open.TypedPerFilterConfig = map[string]*anypb.Any{"fault": testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})}
	headerAbort := &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
		ErrorType:  &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
		Percentage: &typev3.FractionalPercent{Numerator: 100},
	}}
	byHeader := serveRoute(prefix("/header"))
	byHeader.TypedPerFilterConfig = map[string]*anypb.Any{"fault": testutils.MarshalAny(headerAbort)}
	e.serve(e.listener(routes("rc", open, byHeader, serveRoute(prefix("/"))), "", nil, faultFilter(503)))

	e.want(e.get("/x"), http.StatusServiceUnavailable, "fault filter abort")
	e.want(e.get("/open"), http.StatusOK, "served GET /open")
	e.want(e.get("/header", "x-envoy-fault-abort-request: 429"), http.StatusTooManyRequests, "fault filter abort")
	e.want(e.get("/header"), http.StatusOK, "served GET /header")
	grpcAbort := e.get("/header", "x-envoy-fault-abort-grpc-request: 14")
	if grpcAbort.status != http.StatusOK || grpcAbort.header.Get("grpc-status") != "14" || grpcAbort.body != "fault filter abort" {
		t.Errorf("gRPC status abort: %d grpc-status %q %q, want 200 grpc-status 14", grpcAbort.status, grpcAbort.header.Get("grpc-status"), grpcAbort.body)
	}

	start := time.Now()
	e.want(e.get("/x", "x-envoy-fault-delay-request: 50"), http.StatusServiceUnavailable, "fault filter abort")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("a request with a 50 ms header delay was answered after %v", d)
	}
}

// TestShutdownLetsRequestsFinish: Shutdown stops accepting but lets a
// request in progress finish; Serve then returns ErrServerClosed. That
// Shutdown waits for the request is shown by events, not by a pause: its
// context's Done is asked for (Shutdown has begun its wait) while the
// handler is still held, and Shutdown returns only after the handler
// has.
func TestShutdownLetsRequestsFinish(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var handlerDone atomic.Bool
	e := newEnv(t, envOptions{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer handlerDone.Store(true)
		close(started)
		<-release
		io.WriteString(w, "finished")
	})})
	e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil))
	// Not e.get, which fails the test from its goroutine when the
	// request is cut, and would leave got empty.
	got := make(chan response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://"+e.lis.Addr().String()+"/slow", nil)
		req.Host = "svc.test"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- response{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- response{status: resp.StatusCode, body: string(b)}
	}()
	select {
	case <-started:
	case <-time.After(testTimeout):
		t.Fatal("the request never reached the handler")
	}
	ctx := &waitingCtx{Context: context.Background(), waiting: make(chan struct{})}
	shut := make(chan error, 1)
	go func() { shut <- e.srv.Shutdown(ctx) }()
	select {
	case <-ctx.waiting: // Shutdown waits, bounded by ctx
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a request was in progress, without waiting", err)
	case <-time.After(testTimeout):
		t.Fatal("Shutdown never began to wait for the request in progress")
	}
	close(release)
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Shutdown did not return once the request in progress was done")
	}
	if !handlerDone.Load() {
		t.Error("Shutdown returned before the handler of the request in progress did")
	}
	select {
	case r := <-got:
		if r.status != http.StatusOK || r.body != "finished" {
			t.Errorf("the request in progress got %d %q", r.status, r.body)
		}
	case <-time.After(testTimeout):
		t.Fatal("the request in progress got no response")
	}
	if _, err := net.Dial("tcp", e.lis.Addr().String()); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
	if err := e.srv.Serve(newLoopbackListener(t)); !errors.Is(err, httpxds.ErrServerClosed) {
		t.Errorf("Serve after Shutdown = %v, want ErrServerClosed", err)
	}
}

// waitingCtx is a context that tells, by closing waiting, when Done is
// first asked for: a Shutdown given it has begun to wait.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

func newLoopbackListener(t *testing.T) net.Listener {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}
