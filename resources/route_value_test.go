package resources

import (
	"reflect"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// decodeRoute decodes r as the only route of a route configuration.
func decodeRoute(t *testing.T, r *routev3.Route) *Route {
	t.Helper()
	_, rc, err := decodeMsg(RouteConfigType, routeConfig("rc", vhost("vh", []string{"*"}, r)))
	if err != nil {
		t.Fatal(err)
	}
	return rc.VirtualHosts[0].Routes[0]
}

func TestRouteValue(t *testing.T) {
	in := prefixRoute("/svc/", "c")
	in.Name = "r1"
	in.Match.CaseSensitive = wrapperspb.Bool(false)
	in.Match.Headers = []*routev3.HeaderMatcher{{Name: "X-Env", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "prod"}}}
	in.Match.RuntimeFraction = fraction(25, typev3.FractionalPercent_HUNDRED)
	a := in.GetRoute()
	a.Timeout = durationpb.New(2 * time.Second)
	a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{GrpcTimeoutHeaderMax: durationpb.New(0)}
	a.RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable"}
	a.HashPolicy = []*routev3.RouteAction_HashPolicy{
		headerHash("X-User", &matcherv3.RegexMatchAndSubstitute{Pattern: regexMatcher("[0-9]+"), Substitution: "n"}),
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_FilterState_{FilterState: &routev3.RouteAction_HashPolicy_FilterState{Key: "other"}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "c"}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_FilterState_{FilterState: &routev3.RouteAction_HashPolicy_FilterState{Key: channelIDFilterStateKey}}, Terminal: true},
	}
	r := decodeRoute(t, in)

	if r.Name != "r1" || r.PathMatch != PathMatchPrefix || r.Prefix != "/svc/" || !r.CaseInsensitive {
		t.Errorf("path match = %v %q case-insensitive %v", r.PathMatch, r.Prefix, r.CaseInsensitive)
	}
	if len(r.Headers) != 1 || r.Headers[0].Name() != "x-env" || !r.Headers[0].Match("prod", true) {
		t.Errorf("headers = %v", r.Headers)
	}
	if r.RuntimeFraction != 250000 {
		t.Errorf("RuntimeFraction = %d, want 250000", r.RuntimeFraction)
	}
	if r.Action != RouteActionRoute || r.Cluster != "c" || r.WeightedClusters != nil {
		t.Errorf("action = %v %q %v", r.Action, r.Cluster, r.WeightedClusters)
	}
	if r.Timeout == nil || *r.Timeout != 2*time.Second {
		t.Errorf("Timeout = %v", r.Timeout)
	}
	if r.MaxStreamDuration != nil || r.GRPCTimeoutHeaderMax == nil || *r.GRPCTimeoutHeaderMax != 0 {
		t.Errorf("MaxStreamDuration = %v, GRPCTimeoutHeaderMax = %v", r.MaxStreamDuration, r.GRPCTimeoutHeaderMax)
	}
	if r.RetryPolicy.GetRetryOn() != "unavailable" {
		t.Errorf("RetryPolicy = %v", r.RetryPolicy)
	}
	if len(r.HashPolicies) != 3 {
		t.Fatalf("got %d hash policies, want 3 (unsupported ones dropped): %+v", len(r.HashPolicies), r.HashPolicies)
	}
	h := r.HashPolicies[0]
	if h.Kind != HashPolicyHeader || h.HeaderName != "x-user" || h.RegexRewrite == nil || h.RegexSubstitution != "n" ||
		h.RegexRewrite.ReplaceAllString("u123v45", h.RegexSubstitution) != "unvn" {
		t.Errorf("header hash policy = %+v", h)
	}
	if r.HashPolicies[1].Kind != HashPolicySourceIP || r.HashPolicies[2].Kind != HashPolicyChannelID || !r.HashPolicies[2].Terminal {
		t.Errorf("hash policies = %+v", r.HashPolicies)
	}
	if (&Route{}).RuntimeFraction != 0 || decodeRoute(t, prefixRoute("/", "c")).RuntimeFraction != -1 {
		t.Error("a route without runtime_fraction must report -1")
	}
}

func TestRouteRuntimeFraction(t *testing.T) {
	tests := []struct {
		n    uint32
		d    typev3.FractionalPercent_DenominatorType
		want int32
	}{
		{0, typev3.FractionalPercent_HUNDRED, 0},
		{1, typev3.FractionalPercent_HUNDRED, 10000},
		{100, typev3.FractionalPercent_HUNDRED, 1000000},
		{101, typev3.FractionalPercent_HUNDRED, 1000000},
		{1 << 31, typev3.FractionalPercent_HUNDRED, 1000000},
		{7, typev3.FractionalPercent_TEN_THOUSAND, 700},
		{7, typev3.FractionalPercent_MILLION, 7},
		{2000000, typev3.FractionalPercent_MILLION, 1000000},
	}
	for _, tt := range tests {
		in := prefixRoute("/", "c")
		in.Match.RuntimeFraction = fraction(tt.n, tt.d)
		if got := decodeRoute(t, in).RuntimeFraction; got != tt.want {
			t.Errorf("%d/%v = %d per million, want %d", tt.n, tt.d, got, tt.want)
		}
	}
}

func TestRouteActionKinds(t *testing.T) {
	tests := []struct {
		action func(r *routev3.Route)
		want   RouteActionKind
	}{
		{func(r *routev3.Route) {}, RouteActionRoute},
		{func(r *routev3.Route) {
			r.Action = &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}
		}, RouteActionNonForwarding},
		{func(r *routev3.Route) {
			r.Action = &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 503}}
		}, RouteActionDirectResponse},
		{func(r *routev3.Route) { r.Action = &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{}} }, RouteActionRedirect},
		{func(r *routev3.Route) { r.Action = &routev3.Route_FilterAction{FilterAction: &routev3.FilterAction{}} }, RouteActionUnsupported},
		{func(r *routev3.Route) { r.Action = nil }, RouteActionUnsupported},
	}
	for _, tt := range tests {
		in := prefixRoute("/", "c")
		tt.action(in)
		r := decodeRoute(t, in)
		if r.Action != tt.want {
			t.Errorf("action %v, want %v", r.Action, tt.want)
		}
		if tt.want != RouteActionRoute && r.ClusterNames() != nil {
			t.Errorf("%v route has clusters %v", r.Action, r.ClusterNames())
		}
	}
	for k, want := range map[RouteActionKind]string{RouteActionRoute: "route", RouteActionRedirect: "redirect", 42: "RouteActionKind(42)"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(k), k.String(), want)
		}
	}
}

func TestRouteClusterNames(t *testing.T) {
	r := decodeRoute(t, weightedRoute("/", map[string]uint32{"b": 1, "a": 2, "zero": 0}, "b", "zero", "a", "b"))
	if want := []WeightedCluster{{Name: "b", Weight: 1}, {Name: "a", Weight: 2}, {Name: "b", Weight: 1}}; !reflect.DeepEqual(r.WeightedClusters, want) {
		t.Errorf("WeightedClusters = %v, want %v", r.WeightedClusters, want)
	}
	if got, want := r.ClusterNames(), []string{"b", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterNames = %v, want %v", got, want)
	}
	if got := decodeRoute(t, prefixRoute("/", "one")).ClusterNames(); !reflect.DeepEqual(got, []string{"one"}) {
		t.Errorf("ClusterNames = %v", got)
	}
}

func TestRouteMatchPath(t *testing.T) {
	prefix := func(p string, ci bool) *Route {
		return &Route{PathMatch: PathMatchPrefix, Prefix: p, CaseInsensitive: ci}
	}
	exact := func(p string, ci bool) *Route {
		return &Route{PathMatch: PathMatchExact, Path: p, CaseInsensitive: ci}
	}
	regexRoute := func(re string, ci bool) *Route {
		in := prefixRoute("", "c")
		in.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher(re)}
		in.Match.CaseSensitive = wrapperspb.Bool(!ci)
		return decodeRoute(t, in)
	}
	tests := []struct {
		name  string
		route *Route
		path  string
		want  bool
	}{
		{"empty prefix matches all", prefix("", false), "/a/b", true},
		{"prefix", prefix("/svc/", false), "/svc/Get", true},
		{"prefix mismatch", prefix("/svc/", false), "/other/Get", false},
		{"prefix is case sensitive", prefix("/Svc/", false), "/svc/Get", false},
		{"prefix case insensitive", prefix("/Svc/", true), "/sVC/Get", true},
		{"prefix longer than path", prefix("/svc/Get/x", true), "/svc/Get", false},
		{"exact", exact("/svc/Get", false), "/svc/Get", true},
		{"exact needs the whole path", exact("/svc/Get", false), "/svc/GetX", false},
		{"exact case sensitive", exact("/svc/get", false), "/svc/Get", false},
		{"exact case insensitive", exact("/svc/get", true), "/SVC/GET", true},
		{"regex full match", regexRoute("/svc/[A-Z][a-z]+", false), "/svc/Get", true},
		{"regex is anchored at the end", regexRoute("/svc/[A-Z][a-z]+", false), "/svc/Get/x", false},
		{"regex is anchored at the start", regexRoute("[a-z]+/Get", false), "/svc/Get", false},
		{"regex alternation stays anchored", regexRoute("/a|/b", false), "/a/x", false},
		{"regex ignores case_sensitive", regexRoute("/svc/get", true), "/svc/Get", false},
		{"regex on a hand-made route without one", &Route{PathMatch: PathMatchRegex}, "/", false},
		{"unknown kind", &Route{PathMatch: 9}, "/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.route.MatchPath(tt.path); got != tt.want {
				t.Errorf("MatchPath(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}
