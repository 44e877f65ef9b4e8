package httpxds

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
)

// FuzzClientRoute reads a route's client policy (rewrites, host rewrite,
// hash policies) from what a server could send, and applies it to requests
// a caller could make: never a panic; a policy it cannot apply is an
// error, not a route that forwards something else; a prefix_rewrite
// applied keeps the rest of the path.
func FuzzClientRoute(f *testing.F) {
	for _, s := range [][7]string{
		{"/api/", "/v2/", "", "", "backend.internal", "/api/items", "k=v"},
		{"/", "", "^/users/([0-9]+)$", `/u/\1`, "", "/users/42", ""},
		{"/x", "", "(", "", "", "/x", "%zz"},
		{"/", "/\r\n", "", "", "a b", "/", "a=1&a=2"},
		{"", "", "a*", "$1$$", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
	}
	f.Fuzz(func(t *testing.T, prefix, prefixRewrite, regex, sub, host, path, query string) {
		ra := &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"},
			PrefixRewrite:    prefixRewrite,
			HashPolicy: []*routev3.RouteAction_HashPolicy{
				{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "x-user",
					RegexRewrite: &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: regex}, Substitution: sub}}}},
				{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "s"}}},
				{PolicySpecifier: &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: "k"}}},
				{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}},
			},
		}
		if prefixRewrite == "" && regex != "" {
			ra.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: regex}, Substitution: sub}
		}
		if host != "" {
			ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: host}
		}
		rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
			Action: &routev3.Route_Route{Route: ra},
		}}}}}
		a, err := anypb.New(rc)
		if err != nil {
			return
		}
		_, drc, err := resources.RouteConfigType.DecodeTyped(nil, a)
		if err != nil || len(drc.VirtualHosts) == 0 || len(drc.VirtualHosts[0].Routes) == 0 {
			return // rejected, as it may be
		}
		vh := drc.VirtualHosts[0]
		rt := vh.Routes[0]
		cr := newClientRoute(rt, vh, drc, 42)
		u := &url.URL{Scheme: "http", Host: "svc", Path: path, RawQuery: query}
		req := &http.Request{Method: "GET", URL: u, Header: http.Header{"X-User": {path}, "Cookie": {"s=" + query}}}
		view := &reqView{r: req, path: u.EscapedPath()}
		cr.requestHash(view)
		if cr.err != nil || !rt.MatchPath(view.path) {
			return
		}
		got := cr.rewritePath(rt, view.path)
		if cr.prefixRewrite != nil && rt.PathMatch == resources.PathMatchPrefix && !strings.HasPrefix(got, *cr.prefixRewrite) {
			t.Errorf("prefix_rewrite %q of %q gave %q", *cr.prefixRewrite, view.path, got)
		}
		if strings.ContainsAny(cr.hostRewrite, "\r\n") {
			t.Errorf("host_rewrite_literal %q passed", cr.hostRewrite)
		}
		var out url.URL
		setPath(&out, got)
	})
}
