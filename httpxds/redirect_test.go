package httpxds_test

import (
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

func redirectRoute(m *routev3.RouteMatch, ra *routev3.RedirectAction) *routev3.Route {
	return &routev3.Route{Name: "redirect " + m.String(), Match: m, Action: &routev3.Route_Redirect{Redirect: ra}}
}

func exactPath(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p}}
}

// TestRedirect: a route whose action is a redirect is answered by the
// server with the status and Location Envoy's router gives
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#config-route-v3-redirectaction):
// https_redirect and scheme_redirect (the request's port dropped when it
// is the default of its scheme, as the scheme_rewrite_specifier doc
// says), host_redirect, port_redirect, path_redirect (the doc's three
// old-path examples: a query in path_redirect overrides the request's
// and is kept under strip_query), prefix_rewrite (the matched prefix, or
// the whole path of a path match, swapped), regex_rewrite (the doc's
// /service/foo/v1/api example), response_code (301 by default) and
// strip_query; the path is the normalized one; the route's response
// header mutations apply; a redirect that cannot be built answers 500
// naming the route.
func TestRedirect(t *testing.T) {
	e := newEnv(t, envOptions{})
	https := &routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}}
	hostPort := &routev3.RedirectAction{HostRedirect: "other.test", PortRedirect: 8443, ResponseCode: routev3.RedirectAction_FOUND}
	portOnly := &routev3.RedirectAction{PortRedirect: 9000, ResponseCode: routev3.RedirectAction_SEE_OTHER}
	scheme := &routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "wss"}, ResponseCode: routev3.RedirectAction_TEMPORARY_REDIRECT}
	path1 := &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new-path-1"}}
	path2 := &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new-path-2"}, StripQuery: true}
	path3 := &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new-path-3?foo=1"}, StripQuery: true}
	prefixRW := &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/new/"}, ResponseCode: routev3.RedirectAction_PERMANENT_REDIRECT}
	exactRW := &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/e2"}}
	regexRW := &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_RegexRewrite{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{
		Pattern: &matcherv3.RegexMatcher{Regex: "^/service/([^/]+)(/.*)$"}, Substitution: `\2/instance/\1`}}}
	badRegex := &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_RegexRewrite{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{
		Pattern: &matcherv3.RegexMatcher{Regex: "("}, Substitution: "x"}}}
	withHeader := redirectRoute(prefix("/hdr"), &routev3.RedirectAction{HostRedirect: "h.test"})
	withHeader.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-redirected", Value: "yes"}}}
	e.serve(e.listener(routes("rc",
		redirectRoute(prefix("/https"), https),
		redirectRoute(prefix("/hostport"), hostPort),
		redirectRoute(prefix("/port"), portOnly),
		redirectRoute(prefix("/scheme"), scheme),
		redirectRoute(exactPath("/old-path-1"), path1),
		redirectRoute(exactPath("/old-path-2"), path2),
		redirectRoute(exactPath("/old-path-3"), path3),
		redirectRoute(prefix("/old/"), prefixRW),
		redirectRoute(exactPath("/exact"), exactRW),
		redirectRoute(prefix("/service/"), regexRW),
		redirectRoute(prefix("/bad"), badRegex),
		redirectRoute(prefix("/code42"), &routev3.RedirectAction{ResponseCode: 42}),
		redirectRoute(prefix("/bigport"), &routev3.RedirectAction{PortRedirect: 70000}),
		withHeader,
	), "", nil))
	for _, tc := range []struct {
		host, target string
		status       int
		location     string
	}{
		{"svc.test:80", "/https/a?x=1", 301, "https://svc.test/https/a?x=1"},
		{"svc.test:8080", "/https/a", 301, "https://svc.test:8080/https/a"},
		{"svc.test", "/https", 301, "https://svc.test/https"},
		{"[::1]:80", "/https", 301, "https://[::1]/https"},
		{"svc.test:80", "/hostport?x=1", 302, "http://other.test:8443/hostport?x=1"},
		{"svc.test:80", "/port", 303, "http://svc.test:9000/port"},
		{"svc.test:80", "/scheme", 307, "wss://svc.test/scheme"},
		{"svc.test:81", "/scheme", 307, "wss://svc.test:81/scheme"},
		{"svc.test", "/old-path-1?bar=1", 301, "http://svc.test/new-path-1?bar=1"},
		{"svc.test", "/old-path-2?bar=1", 301, "http://svc.test/new-path-2"},
		{"svc.test", "/old-path-3?bar=1", 301, "http://svc.test/new-path-3?foo=1"},
		{"svc.test", "/old/x/y?q=1", 308, "http://svc.test/new/x/y?q=1"},
		{"svc.test", "//old/./x/../y", 308, "http://svc.test/new/y"},
		{"svc.test", "/exact?q", 301, "http://svc.test/e2?q"},
		{"svc.test", "/service/foo/v1/api", 301, "http://svc.test/v1/api/instance/foo"},
	} {
		got := e.raw("GET", tc.target, "Host: "+tc.host)
		if loc := got.header.Get("Location"); got.status != tc.status || loc != tc.location || got.body != "" {
			t.Errorf("Host %s, GET %s: got %d Location %q body %q, want %d Location %q and no body", tc.host, tc.target, got.status, loc, got.body, tc.status, tc.location)
		}
	}
	got := e.get("/hdr")
	if got.status != 301 || got.header.Get("Location") != "http://h.test/hdr" || got.header.Get("X-Redirected") != "yes" {
		t.Errorf("GET /hdr: got %d %v, want 301 to http://h.test/hdr with x-redirected", got.status, got.header)
	}
	e.want(e.get("/bad"), http.StatusInternalServerError, "of route configuration \"rc\": redirect: regex_rewrite.pattern: error parsing regexp")
	e.want(e.get("/code42"), http.StatusInternalServerError, "redirect: response_code: unknown value 42")
	e.want(e.get("/bigport"), http.StatusInternalServerError, "redirect: port_redirect: 70000 is not a port")
}
