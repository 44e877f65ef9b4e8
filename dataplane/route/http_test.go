package route

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/goxds/xds/resources"
)

// query is a Query from a map.
type query map[string]string

func (q query) Get(name string) (string, bool) { v, ok := q[name]; return v, ok }

// TestMatchHTTP: an HTTP route matches when its path, every header and
// every query parameter matcher match (Envoy's RouteMatch
// query_parameters: "they all must match", present_match true or false,
// string_match on the value); MatchGRPC, for gRPC requests, which have no
// query string, never matches a route with query parameter matchers.
func TestMatchHTTP(t *testing.T) {
	r := routeOf(t, &routev3.Route{
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/q"},
			Headers:       []*routev3.HeaderMatcher{{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}},
			QueryParameters: []*routev3.QueryParameterMatcher{
				{Name: "debug", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}},
				{Name: "legacy", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: false}},
				{Name: "v", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
					StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "2"}}}},
			},
		},
		Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
	})
	routes := []*resources.Route{r}
	h := headers{"x-a": "1"}
	tests := []struct {
		path string
		h    Headers
		q    Query
		want bool
	}{
		{"/q", h, query{"debug": "", "v": "2.1"}, true},
		{"/x", h, query{"debug": "", "v": "2.1"}, false},
		{"/q", headers{}, query{"debug": "", "v": "2.1"}, false},
		{"/q", h, query{"v": "2.1"}, false},
		{"/q", h, query{"debug": "", "v": "3"}, false},
		{"/q", h, query{"debug": "", "v": "2", "legacy": "1"}, false},
		{"/q", h, nil, false},
	}
	for _, tt := range tests {
		if got := MatchHTTP(routes, tt.path, tt.h, tt.q) != nil; got != tt.want {
			t.Errorf("MatchHTTP(%q, %v, %v) = %v, want %v", tt.path, tt.h, tt.q, got, tt.want)
		}
	}
	if Match(routes, &Request{Path: "/q", Headers: h}) != nil {
		t.Error("a gRPC request matched a route with query parameter matchers")
	}
}
