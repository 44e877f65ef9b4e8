package httpxds

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/dataplane/httppath"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/serverlds"
	"github.com/goxds/xds/resources"
)

// benchChain decodes a server Listener of one chain: three routes (the
// last serving "/api/"), and with rbac an RBAC filter denying "/admin".
func benchChain(b *testing.B, rbac bool) *resources.FilterChain {
	b.Helper()
	nf := func(p string) *routev3.Route {
		return &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}},
			Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}}
	}
	var filters []*hcmv3.HttpFilter
	if rbac {
		cfg := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{"no-admin": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
				Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "/admin"}}}}}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}}}}
		filters = append(filters, &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(b, cfg)}})
	}
	filters = append(filters, &hcmv3.HttpFilter{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(b, &routerv3.Router{})}})
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "rc",
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{nf("/health"), nf("/static/"), nf("/api/")}}}}},
		HttpFilters: filters,
	}
	l := &listenerv3.Listener{
		Name: "bench",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: anyOf(b, hcm)}}}}},
	}
	_, dl, err := resources.ListenerType.DecodeTyped(nil, anyOf(b, l))
	if err != nil {
		b.Fatal(err)
	}
	return dl.Server.FilterChains[0]
}

// BenchmarkServeHTTP is the handler wrapper's cost per request: a plain
// http.Handler called directly, against the same handler behind a
// generation's ServeHTTP (path normalization, virtual host, route, RBAC
// when on), on an HTTP/1.1 GET with a few headers, in process (no network,
// so that the wrapper's own cost shows).
func BenchmarkServeHTTP(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	newReq := func(ctx context.Context) *http.Request {
		r := httptest.NewRequestWithContext(ctx, "GET", "/api/users/42?fields=name", nil)
		r.Header.Set("Accept", "application/json")
		r.Header.Set("User-Agent", "bench")
		r.Header.Set("X-Request-Id", "0f1e2d3c")
		return r
	}
	run := func(b *testing.B, hh http.Handler, r *http.Request) {
		w := &nopWriter{h: make(http.Header)}
		b.ReportAllocs()
		for b.Loop() {
			hh.ServeHTTP(w, r)
		}
		if w.status != http.StatusNoContent {
			b.Fatalf("status %d", w.status)
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, h, newReq(context.Background())) })
	for _, rbac := range []bool{false, true} {
		name := "httpxds"
		if rbac {
			name += "+rbac"
		}
		b.Run(name, func(b *testing.B) {
			fc := benchChain(b, rbac)
			s := &Server{h: h, faults: route.NewFaults(nil)}
			// Never served: the core only names the Listener and holds
			// the (empty) route configurations; the chain's is inline.
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			l := &listener{s: s}
			l.core = serverlds.New(serverlds.Config[*generation]{Raw: raw, Name: "bench", Server: l})
			g := &generation{l: l}
			cs := &chainState{fc: fc, norm: httppath.Resolve(fc.PathNormalization)}
			ctx := context.WithValue(context.Background(), chainKey{}, &chainConn{cs: cs})
			r := newReq(ctx)
			r.RemoteAddr = "127.0.0.1:40000"
			run(b, g, r)
		})
	}
}

// nopWriter is a ResponseWriter that keeps the status only.
type nopWriter struct {
	h      http.Header
	status int
}

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(s int)           { w.status = s }

func anyOf(b *testing.B, m proto.Message) *anypb.Any {
	b.Helper()
	a, err := anypb.New(m)
	if err != nil {
		b.Fatal(err)
	}
	return a
}
