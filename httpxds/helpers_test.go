package httpxds_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/backoff"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// Every test closes its servers and management server; no goroutine may
// be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testTimeout = 20 * time.Second
	nodeID      = "node-1"
	template    = "http/server?xds.resource.listening_address=%s"
)

// env is a management server and an httpxds server listening on
// 127.0.0.1, whose serving-mode changes arrive on modes. Its handler
// answers "served <method> <path> <raw path>".
type env struct {
	t     testing.TB
	ctx   context.Context
	ms    *testutils.ManagementServer
	srv   *httpxds.Server
	lis   net.Listener
	name  string
	port  uint32
	modes chan httpxds.ServingModeChangeArgs
	// applied has a token when a configuration update was handled since
	// it was last taken (httpxds.OnConfigApplied).
	applied chan struct{}
}

var quietClient = client.Options{
	Logger:           slog.New(slog.DiscardHandler),
	WatchExpiry:      2 * time.Second,
	TransportOptions: transport.Options{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}},
}

// echo is the handler of every test server.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "served %s %s %s", r.Method, r.URL.Path, r.URL.EscapedPath())
})

type envOptions struct {
	apiType string                  // the bootstrap's api_type ("": SotW ADS)
	edit    func(*bootstrap.Config) // edits the server's bootstrap
	handler http.Handler            // nil: echo
	logger  *slog.Logger            // nil: discard
	// authzMetrics is the server's Options.ExtAuthzMetrics.
	authzMetrics httpxds.ServerExtAuthzMetrics
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID, APIType: o.apiType}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerListenerResourceNameTemplate = template
	if o.edit != nil {
		o.edit(cfg)
	}
	e := &env{t: t, ctx: ctx, ms: ms, modes: make(chan httpxds.ServingModeChangeArgs, 16), applied: make(chan struct{}, 1)}
	h := o.handler
	if h == nil {
		h = echo
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv, err := httpxds.NewServer(h, httpxds.Options{
		Bootstrap:       cfg,
		ClientOptions:   quietClient,
		Logger:          logger,
		ExtAuthzMetrics: o.authzMetrics,
		ServingModeCallback: func(_ net.Addr, args httpxds.ServingModeChangeArgs) {
			e.modes <- args
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	httpxds.OnConfigApplied(srv, func() {
		select {
		case e.applied <- struct{}{}:
		default: // a token already waits
		}
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.lis = srv, lis
	e.port = uint32(lis.Addr().(*net.TCPAddr).Port)
	e.name = fmt.Sprintf(template, lis.Addr().String())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != httpxds.ErrServerClosed {
			t.Errorf("Serve returned %v after Close, want ErrServerClosed", err)
		}
	})
	return e
}

func (e *env) update(res testutils.Resources) {
	e.t.Helper()
	if err := e.ms.Update(e.ctx, nodeID, res); err != nil {
		e.t.Fatal(err)
	}
}

// waitMode waits for the next serving-mode change and checks it.
func (e *env) waitMode(want httpxds.ServingMode) httpxds.ServingModeChangeArgs {
	e.t.Helper()
	select {
	case got := <-e.modes:
		if got.Mode != want {
			e.t.Fatalf("serving mode = %v (%v), want %v", got.Mode, got.Err, want)
		}
		return got
	case <-e.ctx.Done():
		e.t.Fatalf("no serving mode change to %v", want)
	}
	return httpxds.ServingModeChangeArgs{}
}

// serve publishes l and waits until the server serves it.
func (e *env) serve(l *listenerv3.Listener, rcs ...*routev3.RouteConfiguration) {
	e.t.Helper()
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{l}, Routes: rcs})
	e.waitMode(httpxds.ServingModeServing)
}

// response is a status and a body.
type response struct {
	status int
	body   string
	header http.Header
}

// raw sends one HTTP/1.1 request with exactly target as its request
// target (no client library cleans it) and the given extra header lines.
func (e *env) raw(method, target string, headers ...string) response {
	e.t.Helper()
	d := net.Dialer{}
	c, err := d.DialContext(e.ctx, "tcp", e.lis.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	req := method + " " + target + " HTTP/1.1\r\nConnection: close\r\n"
	if !slices.ContainsFunc(headers, func(h string) bool { return strings.HasPrefix(h, "Host:") }) {
		req += "Host: svc.test\r\n"
	}
	for _, h := range headers {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: strings.TrimSpace(string(b)), header: resp.Header}
}

// get is raw with GET.
func (e *env) get(target string, headers ...string) response {
	e.t.Helper()
	return e.raw("GET", target, headers...)
}

// want checks a response's status and that its body contains sub.
func (e *env) want(got response, status int, sub string) {
	e.t.Helper()
	if got.status != status || !strings.Contains(got.body, sub) {
		e.t.Errorf("got %d %q, want %d with %q", got.status, got.body, status, sub)
	}
}

// listener is the server's Listener: one filter chain whose connection
// manager has rc inline (or fetches rdsName over RDS when rc is nil) and
// the given HTTP filters before the router; edit, if not nil, edits the
// connection manager.
func (e *env) listener(rc *routev3.RouteConfiguration, rdsName string, edit func(*hcmv3.HttpConnectionManager), filters ...*hcmv3.HttpFilter) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		HttpFilters: append(filters, &hcmv3.HttpFilter{
			Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(&routerv3.Router{})},
		}),
	}
	if rc != nil {
		hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc}
	} else {
		hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
			RouteConfigName: rdsName,
		}}
	}
	if edit != nil {
		edit(hcm)
	}
	return &listenerv3.Listener{
		Name: e.name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.port},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Name: "chain",
			Filters: []*listenerv3.Filter{{
				Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: testutils.MarshalAny(hcm)},
			}},
		}},
	}
}

// routes is a route configuration of one virtual host for any domain.
func routes(name string, rs ...*routev3.Route) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: rs}}}
}

func prefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

// serveRoute is a non_forwarding_action route: the handler serves it.
func serveRoute(m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{Match: m, Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}}
}

// directRoute answers with status and body itself.
func directRoute(m *routev3.RouteMatch, status uint32, body string) *routev3.Route {
	return &routev3.Route{Match: m, Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
		Status: status, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
	}}}
}

// rbacDenyingPrefix is an RBAC filter that denies every path under p.
func rbacDenyingPrefix(p string) *hcmv3.HttpFilter {
	cfg := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_DENY,
		Policies: map[string]*rbacv3.Policy{"no-admin": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
				Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: p}}},
			}}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}},
	}}
	return &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(cfg)}}
}
