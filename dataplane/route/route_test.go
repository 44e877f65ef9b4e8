package route

import (
	"errors"
	"regexp"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
)

// headers is a request's headers for these tests: one value each.
type headers map[string]string

func (h headers) Get(name string) (string, bool) {
	v, ok := h[name]
	return v, ok
}

func (h headers) Last(name string) (string, bool) { return h.Get(name) }

func prefixRoute(p string) *resources.Route {
	return &resources.Route{Prefix: p, Action: resources.RouteActionRoute, Cluster: "c", RuntimeFraction: -1}
}

// testRetryOn names two conditions, as an adapter would.
var testRetryOn = map[string]uint{"unavailable": 14, "cancelled": 1}

func TestTableRoutesFirstMatch(t *testing.T) {
	a, b := prefixRoute("/a"), prefixRoute("/")
	b.Cluster = "d"
	tbl := NewTable(&resources.VirtualHost{Routes: []*resources.Route{a, b}}, nil, Options{})
	var d Decision
	if err := tbl.Route(&Request{Path: "/a/x"}, &d); err != nil || d.Route != a || d.Cluster != "c" || d.WeightedCluster != -1 {
		t.Errorf("/a/x: %+v, %v; want the first route, cluster c", d, err)
	}
	if err := tbl.Route(&Request{Path: "/b"}, &d); err != nil || d.Route != b || d.Cluster != "d" {
		t.Errorf("/b: %+v, %v; want the second route, cluster d", d, err)
	}
}

func TestTableErrors(t *testing.T) {
	redirect := prefixRoute("/r")
	redirect.Action = resources.RouteActionRedirect
	none := prefixRoute("/n")
	none.Cluster = ""
	tbl := NewTable(&resources.VirtualHost{Routes: []*resources.Route{redirect, none}}, nil, Options{})
	for _, tc := range []struct {
		path  string
		kind  ErrorKind
		route *resources.Route
	}{{"/x", NoRoute, nil}, {"/r", NotForwarding, redirect}, {"/n", NoCluster, none}} {
		var d Decision
		err := tbl.Route(&Request{Path: tc.path}, &d)
		var re *Error
		if !errors.As(err, &re) || re.Kind != tc.kind || re.Route != tc.route {
			t.Errorf("%s: %v; want an *Error of kind %d", tc.path, err, tc.kind)
		}
	}
	var d Decision
	if err := NewTable(nil, nil, Options{}).Route(&Request{Path: "/"}, &d); err == nil {
		t.Error("a table without a virtual host routed a request")
	}
}

// Headers are matched through the adapter's view.
func TestTableMatchesHeaders(t *testing.T) {
	r := routeOf(t, &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{
			Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "1"},
		}}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}},
	})
	tbl := NewTable(&resources.VirtualHost{Routes: []*resources.Route{r}}, nil, Options{})
	var d Decision
	if err := tbl.Route(&Request{Path: "/m", Headers: headers{"x-a": "1"}}, &d); err != nil {
		t.Errorf("with the header: %v", err)
	}
	if err := tbl.Route(&Request{Path: "/m", Headers: headers{"x-a": "2"}}, &d); err == nil {
		t.Error("another value matched")
	}
	if err := tbl.Route(&Request{Path: "/m"}, &d); err == nil {
		t.Error("no headers matched")
	}
}

func TestWeightedClusterDrawn(t *testing.T) {
	r := prefixRoute("/")
	r.Cluster = ""
	r.WeightedClusters = []resources.WeightedCluster{{Name: "a", Weight: 1}, {Name: "b", Weight: 3}}
	tbl := NewTable(&resources.VirtualHost{Routes: []*resources.Route{r}}, nil, Options{})
	got := map[string]int{}
	const n = 4000
	for range n {
		var d Decision
		if err := tbl.Route(&Request{Path: "/"}, &d); err != nil {
			t.Fatal(err)
		}
		if r.WeightedClusters[d.WeightedCluster].Name != d.Cluster {
			t.Fatalf("cluster %q, index %d", d.Cluster, d.WeightedCluster)
		}
		got[d.Cluster]++
	}
	if share := float64(got["b"]) / n; share < 0.7 || share > 0.8 {
		t.Errorf("b drawn %d of %d times with weight 3 of 4", got["b"], n)
	}
}

func TestPluginRoute(t *testing.T) {
	r := prefixRoute("/")
	r.Cluster, r.ClusterSpecifierPlugin = "", "rls"
	var d Decision
	if err := Select([]*resources.Route{r}, &Request{Path: "/"}, &d); err != nil || d.Plugin != "rls" || d.Cluster != "" {
		t.Errorf("%+v, %v; want plugin rls, no cluster", d, err)
	}
}

// routeOf decodes one route through the resources package.
func routeOf(t *testing.T, r *routev3.Route) *resources.Route {
	t.Helper()
	a, err := anypb.New(&routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{r},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := resources.RouteConfigType.DecodeTyped(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	return rc.VirtualHosts[0].Routes[0]
}

func retryPolicy(on string, retries uint32) *routev3.RetryPolicy {
	return &routev3.RetryPolicy{RetryOn: on, NumRetries: wrapperspb.UInt32(retries)}
}

// A route's retry policy replaces its virtual host's, even when it retries
// nothing the adapter knows; conditions are the adapter's bits.
func TestRetryPolicyOfRoute(t *testing.T) {
	own, inherits, nothing := prefixRoute("/own"), prefixRoute("/"), prefixRoute("/nothing")
	own.RetryPolicy = retryPolicy(" Cancelled ,unavailable,5xx", 3)
	nothing.RetryPolicy = retryPolicy("5xx", 3)
	vh := &resources.VirtualHost{Routes: []*resources.Route{own, nothing, inherits}, RetryPolicy: retryPolicy("unavailable", 1)}
	tbl := NewTable(vh, nil, Options{RetryOn: testRetryOn})
	var d Decision
	if err := tbl.Route(&Request{Path: "/own"}, &d); err != nil {
		t.Fatal(err)
	}
	if p := d.Retry; p == nil || p.On != 1<<14|1<<1 || p.MaxAttempts != 4 || p.Base != 25*time.Millisecond || p.Max != 250*time.Millisecond {
		t.Errorf("route's own policy: %+v", p)
	}
	if err := tbl.Route(&Request{Path: "/x"}, &d); err != nil || d.Retry == nil || d.Retry.MaxAttempts != 2 || !d.Retry.RetriesOn(14) || d.Retry.RetriesOn(1) {
		t.Errorf("virtual host's policy: %+v, %v", d.Retry, err)
	}
	if err := tbl.Route(&Request{Path: "/nothing"}, &d); err != nil || d.Retry != nil {
		t.Errorf("a route's policy of conditions the adapter does not know: %+v, %v; want none", d.Retry, err)
	}
	zero := retryPolicy("unavailable", 0)
	if p := parseRetryPolicy(zero, Options{RetryOn: testRetryOn}); p != nil {
		t.Errorf("num_retries 0: %+v; want no policy", p)
	}
	backoff := retryPolicy("unavailable", 1)
	backoff.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(3 * time.Second)}
	if p := parseRetryPolicy(backoff, Options{RetryOn: testRetryOn}); p.Base != time.Second || p.Max != 3*time.Second {
		t.Errorf("retry_back_off: %+v", p)
	}
}

// Backoff doubles from Base up to Max with a jitter of ±20%; pushback
// replaces it and restarts the doubling; attempts are capped.
func TestRetryStateNext(t *testing.T) {
	p := &RetryPolicy{On: 1, MaxAttempts: 4, Base: time.Second, Max: 3 * time.Second}
	if lo, hi := p.Backoff(0, 0), p.Backoff(0, 0.999999); lo != 800*time.Millisecond || hi < 1199*time.Millisecond || hi > 1200*time.Millisecond {
		t.Errorf("first backoff spans %v to %v; want 0.8s to 1.2s", lo, hi)
	}
	s := RetryState{Attempts: 1}
	var got []time.Duration
	for s.Attempts < 4 {
		d, ok := s.Next(p, 0, false, 0.5)
		if !ok {
			t.Fatalf("attempt %d not retried", s.Attempts)
		}
		got = append(got, d)
		s.Attempts++
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("backoffs %v; want %v", got, want)
	}
	if _, ok := s.Next(p, 0, false, 0.5); ok {
		t.Error("retried past MaxAttempts")
	}
	s = RetryState{Attempts: 1}
	s.Next(p, 0, false, 0.5)
	if d, ok := s.Next(p, 7*time.Millisecond, true, 0.5); !ok || d != 7*time.Millisecond {
		t.Errorf("pushback: %v, %v", d, ok)
	}
	if d, _ := s.Next(p, 0, false, 0.5); d != time.Second {
		t.Errorf("backoff after a pushback: %v; want base again", d)
	}
}

func TestGRPCTimeout(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	l := &resources.Listener{MaxStreamDuration: 3 * time.Second}
	r := prefixRoute("/")
	if got := GRPCTimeout(r, l); got != 3*time.Second {
		t.Errorf("listener's: %v", got)
	}
	r.MaxStreamDuration = d(2 * time.Second)
	if got := GRPCTimeout(r, l); got != 2*time.Second {
		t.Errorf("route's max_stream_duration: %v", got)
	}
	r.GRPCTimeoutHeaderMax = d(time.Second)
	if got := GRPCTimeout(r, l); got != time.Second {
		t.Errorf("grpc_timeout_header_max: %v", got)
	}
	r.Timeout = d(time.Hour)
	if got := GRPCTimeout(prefixRoute("/"), nil); got != 0 {
		t.Errorf("nothing set: %v", got)
	}
}

func TestRequestHash(t *testing.T) {
	user := resources.HashPolicy{Kind: resources.HashPolicyHeader, HeaderName: "x-user"}
	alice := &Request{Headers: headers{"x-user": "alice"}, ChannelID: 1}
	alice2 := &Request{Headers: headers{"x-user": "alice"}, ChannelID: 2}
	if RequestHash([]resources.HashPolicy{user}, alice) != RequestHash([]resources.HashPolicy{user}, alice2) {
		t.Error("one header value, two hashes")
	}
	if RequestHash([]resources.HashPolicy{user}, alice) == RequestHash([]resources.HashPolicy{user}, &Request{Headers: headers{"x-user": "bob"}}) {
		t.Error("two header values, one hash")
	}
	channel := resources.HashPolicy{Kind: resources.HashPolicyChannelID}
	if RequestHash([]resources.HashPolicy{channel}, &Request{ChannelID: 7}) != 7 {
		t.Error("channel_id does not hash the channel ID")
	}
	terminal := user
	terminal.Terminal = true
	if RequestHash([]resources.HashPolicy{terminal, channel}, alice) != RequestHash([]resources.HashPolicy{user}, alice2) {
		t.Error("a terminal policy that hashed did not end the list")
	}
	// A header the request does not show yields no hash: random.
	absent := resources.HashPolicy{Kind: resources.HashPolicyHeader, HeaderName: "x-absent"}
	if RequestHash([]resources.HashPolicy{absent}, alice) == RequestHash([]resources.HashPolicy{absent}, alice) {
		t.Error("no hash twice gave the same hash")
	}
	rewrite := resources.HashPolicy{Kind: resources.HashPolicyHeader, HeaderName: "x-user",
		RegexRewrite: regexp.MustCompile(`^(\w+)-\d+$`), RegexSubstitution: `\1`}
	if RequestHash([]resources.HashPolicy{rewrite}, &Request{Headers: headers{"x-user": "alice-42"}}) != RequestHash([]resources.HashPolicy{user}, alice) {
		t.Error("the regex rewrite is not applied before hashing")
	}
	if HeaderHash(headers{"x-user": "alice"}, "x-user") != HeaderHash(headers{"x-user": "alice"}, "x-user") {
		t.Error("HeaderHash: one value, two hashes")
	}
}

func TestGoTemplate(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:      `plain`,
		`\1-\2`:      `${1}-${2}`,
		`\12`:        `${12}`,
		`$1 and \\`:  `$$1 and \`,
		`trailing\`:  `trailing\`,
		`\1x\n`:      `${1}xn`,
		`cost: $5\1`: `cost: $$5${1}`,
	} {
		if got := goTemplate(in); got != want {
			t.Errorf("goTemplate(%q) = %q, want %q", in, got, want)
		}
	}
}

// The filters of a request: the most specific override wins (weighted
// cluster, route, virtual host), an override can switch a filter off or
// on, and the terminal router is left out. Worked out once per route.
func TestFiltersWithOverrides(t *testing.T) {
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{
		{Name: "f1", Parsed: "f1-own"},
		{Name: "f2", Parsed: "f2-own", Disabled: true},
		{Name: "router", TypeURL: "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
	}}
	r := prefixRoute("/")
	r.Cluster = ""
	r.WeightedClusters = []resources.WeightedCluster{
		{Name: "a", Weight: 1, FilterOverrides: map[string]resources.HTTPFilterConfig{"f1": resources.DisabledFilterOverride{}}},
		{Name: "b", Weight: 1},
	}
	r.FilterOverrides = map[string]resources.HTTPFilterConfig{"f2": "f2-route"}
	vh := &resources.VirtualHost{Routes: []*resources.Route{r}, FilterOverrides: map[string]resources.HTTPFilterConfig{"f1": "f1-vh", "f2": "f2-vh"}}
	tbl := NewTable(vh, l, Options{})
	seen := map[string]bool{}
	for range 200 {
		var d Decision
		if err := tbl.Route(&Request{Path: "/"}, &d); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range d.Filters {
			got = append(got, f.Filter.Name+"="+f.Config.(string))
			if &l.HTTPFilters[f.Index] != f.Filter {
				t.Fatalf("filter %s has index %d", f.Filter.Name, f.Index)
			}
		}
		want := map[string]string{"a": "[f2=f2-route]", "b": "[f1=f1-vh f2=f2-route]"}[d.Cluster]
		if s := "[" + join(got) + "]"; s != want {
			t.Errorf("to %s: filters %s; want %s", d.Cluster, s, want)
		}
		seen[d.Cluster] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Errorf("clusters drawn: %v", seen)
	}
}

func join(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += " "
		}
		out += s
	}
	return out
}

// A decision allocates nothing once the route's policy is worked out.
func TestRouteAllocatesNothing(t *testing.T) {
	r := prefixRoute("/")
	r.RetryPolicy = retryPolicy("unavailable", 2)
	tbl := NewTable(&resources.VirtualHost{Routes: []*resources.Route{prefixRoute("/a"), r}}, nil, Options{RetryOn: testRetryOn})
	req := &Request{Path: "/svc/M", Headers: headers{}}
	var d Decision
	if n := testing.AllocsPerRun(100, func() {
		if err := tbl.Route(req, &d); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Route allocates %v times per request; want 0", n)
	}
}
