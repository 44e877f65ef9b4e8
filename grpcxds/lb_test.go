package grpcxds

import (
	"errors"
	"math"
	"regexp"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
)

// fakeSC stands for a SubConn in picker tests.
type fakeSC struct {
	balancer.SubConn
	name string
}

// prio builds a priority of one locality per weights entry, each with
// endpoints of the given weights, all in state.
func prio(state connectivity.State, localities ...[]uint32) *priority {
	p := &priority{leaf: "c", maxRequests: 1024, inflight: new(atomic.Int64),
		policy: resources.LBPolicy{MinRingSize: 1024, MaxRingSize: 8 << 20}}
	n := 0
	for i, eps := range localities {
		l := locality{weight: uint32(i + 1)}
		for _, w := range eps {
			key := string(rune('a' + n))
			n++
			c := &endpointConn{key: key, sc: fakeSC{name: key}, state: state}
			l.endpoints = append(l.endpoints, weightedConn{c, w})
		}
		p.localities = append(p.localities, l)
	}
	return p
}

func picks(t *testing.T, p endpointPicker, n int) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		res, err := p.pick(0)
		if err != nil {
			t.Fatal(err)
		}
		got[res.SubConn.(fakeSC).name]++
	}
	return got
}

// Weighted round robin: locality 1 (weight 1) holds a:1 and b:3, locality
// 2 (weight 2) holds c:1, so a gets 1/3 × 1/4, b 1/3 × 3/4, c 2/3.
func TestWeightedRoundRobin(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1, 3}, []uint32{1})
	const n = 12000
	got := picks(t, newWRRPicker(p.readyEndpoints()), n)
	for name, want := range map[string]int{"a": 1000, "b": 3000, "c": 8000} {
		if d := got[name] - want; d < -2 || d > 2 {
			t.Errorf("%s picked %d times of %d, want %d", name, got[name], n, want)
		}
	}
	// Equal weights: plain round robin, exactly even.
	got = picks(t, newWRRPicker(prio(connectivity.Ready, []uint32{1, 1, 1}).readyEndpoints()), 300)
	if got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
		t.Errorf("round robin over 3: %v", got)
	}
}

// Only ready endpoints count, and a locality with none gives up its share.
func TestReadyEndpointsWeights(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1, 1}, []uint32{1})
	p.localities[0].endpoints[1].conn.state = connectivity.TransientFailure
	p.localities[1].endpoints[0].conn.state = connectivity.Connecting
	eps := p.readyEndpoints()
	if len(eps) != 1 || eps[0].weight != 1 {
		t.Errorf("ready endpoints %+v, want a alone with all the weight", eps)
	}
}

func TestRing(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1, 3})
	ring := p.buildRing()
	if len(ring) != 1024 {
		t.Errorf("ring of %d entries for weights 1:3 and the default sizes, want 1024", len(ring))
	}
	owned := make(map[int]int)
	for i, e := range ring {
		owned[e.ep]++
		if i > 0 && ring[i-1].hash > e.hash {
			t.Fatal("ring not sorted")
		}
	}
	if math.Abs(float64(owned[1])/float64(len(ring))-0.75) > 0.01 {
		t.Errorf("b owns %d of %d points, want 75%%", owned[1], len(ring))
	}
	for _, tc := range []struct{ min, max, want uint64 }{
		{4, 10, 4},
		{1 << 20, 8 << 20, ringSizeCap},
		{3, 3, 3}, // weights need 4 for a whole point each; max wins
	} {
		p.policy.MinRingSize, p.policy.MaxRingSize = tc.min, tc.max
		if got := len(p.buildRing()); uint64(got) != tc.want {
			t.Errorf("ring sized %d..%d for weights 1:3 has %d entries, want %d", tc.min, tc.max, got, tc.want)
		}
	}

	// The owner of the hash takes the RPC; if it is connecting, the RPC
	// waits; if it fails, the next ready endpoint takes it.
	p = prio(connectivity.Ready, []uint32{1, 1})
	rp := p.ringPicker().(*ringPicker)
	h := rp.ring[0].hash
	owner := rp.ring[0].ep
	if res, err := rp.pick(h); err != nil || res.SubConn != rp.eps[owner].sc {
		t.Errorf("pick(%x) = %v, %v; want the owner", h, res.SubConn, err)
	}
	rp.eps[owner].state = connectivity.Connecting
	if _, err := rp.pick(h); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("owner connecting: %v; want the RPC queued", err)
	}
	rp.eps[owner].state = connectivity.TransientFailure
	if res, err := rp.pick(h); err != nil || res.SubConn != rp.eps[1-owner].sc {
		t.Errorf("owner failing: %v, %v; want the other endpoint", res.SubConn, err)
	}
	rp.eps[1-owner].state, rp.eps[1-owner].err = connectivity.TransientFailure, errors.New("refused")
	if _, err := rp.pick(h); err == nil {
		t.Error("every endpoint failing: the pick succeeded")
	}
}

func TestRequestHash(t *testing.T) {
	user := resources.HashPolicy{Kind: resources.HashPolicyHeader, HeaderName: "x-user"}
	md := metadata.Pairs("x-user", "alice", "x-key-bin", "zz")
	if requestHash([]resources.HashPolicy{user}, md, 1) != requestHash([]resources.HashPolicy{user}, md, 2) {
		t.Error("one header value, two hashes")
	}
	if requestHash([]resources.HashPolicy{user}, md, 1) == requestHash([]resources.HashPolicy{user}, metadata.Pairs("x-user", "bob"), 1) {
		t.Error("two header values, one hash")
	}
	channel := resources.HashPolicy{Kind: resources.HashPolicyChannelID}
	if requestHash([]resources.HashPolicy{channel}, nil, 7) != 7 {
		t.Error("channel_id does not hash the channel ID")
	}
	terminal := user
	terminal.Terminal = true
	if requestHash([]resources.HashPolicy{terminal, channel}, md, 1) != requestHash([]resources.HashPolicy{user}, md, 2) {
		t.Error("a terminal policy that hashed did not end the list")
	}
	// A binary header is never hashed, so no policy yields a hash: random.
	bin := resources.HashPolicy{Kind: resources.HashPolicyHeader, HeaderName: "x-key-bin"}
	if requestHash([]resources.HashPolicy{bin}, md, 1) == requestHash([]resources.HashPolicy{bin}, md, 1) {
		t.Error("no hash twice gave the same hash")
	}
	rewrite := resources.HashPolicy{Kind: resources.HashPolicyHeader, HeaderName: "x-user",
		RegexRewrite: regexp.MustCompile(`^(\w+)-\d+$`), RegexSubstitution: `\1`}
	if requestHash([]resources.HashPolicy{rewrite}, metadata.Pairs("x-user", "alice-42"), 0) != requestHash([]resources.HashPolicy{user}, md, 0) {
		t.Error("the regex rewrite is not applied before hashing")
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

// Drops come first; then the circuit breaker caps RPCs in flight.
func TestPriorityPicker(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1})
	p.maxRequests = 2
	pp := p.picker(connectivity.Ready)
	var dones []func(balancer.DoneInfo)
	for range 2 {
		res, err := pp.pick(balancer.PickInfo{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, res.Done)
	}
	if _, err := pp.pick(balancer.PickInfo{}, 0); status.Code(err) != codes.Unavailable {
		t.Errorf("third RPC in flight with max_requests 2: %v; want UNAVAILABLE", err)
	}
	dones[0](balancer.DoneInfo{})
	if _, err := pp.pick(balancer.PickInfo{}, 0); err != nil {
		t.Errorf("after one RPC finished: %v", err)
	}

	p.drops = []resources.DropOverload{{Category: "lb", PerMillion: 1_000_000}}
	if _, err := p.picker(connectivity.Connecting).pick(balancer.PickInfo{}, 0); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "dropped by load balancing policy: lb" {
		t.Errorf("drop: %v", err)
	}
}

// routeOf decodes one route through the resources package.
func routeOf(t *testing.T, r *routev3.Route) *resources.Route {
	t.Helper()
	any, err := anypb.New(&routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{r},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := resources.RouteConfigType.DecodeTyped(any)
	if err != nil {
		t.Fatal(err)
	}
	return rc.VirtualHosts[0].Routes[0]
}

func TestMatchRoute(t *testing.T) {
	action := &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}}
	match := func(m *routev3.RouteMatch) *resources.Route {
		return routeOf(t, &routev3.Route{Match: m, Action: action})
	}
	header := func(name string, spec *routev3.HeaderMatcher) *routev3.RouteMatch {
		spec.Name = name
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{spec}}
	}
	exact := func(v string) *routev3.HeaderMatcher {
		return &routev3.HeaderMatcher{HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: v}}
	}
	present := &routev3.HeaderMatcher{HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}
	md := metadata.Pairs("x-a", "1", "x-a", "2", "x-key-bin", "v")
	for _, tc := range []struct {
		name string
		r    *resources.Route
		want bool
	}{
		{"repeated header joined", match(header("x-a", exact("1,2"))), true},
		{"binary header unseen", match(header("x-key-bin", present)), false},
		{"content-type", match(header("content-type", exact("application/grpc"))), true},
		{"absent header", match(header("x-b", exact(""))), false},
		{"case-insensitive prefix", match(&routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/PKG."}, CaseSensitive: wrapperspb.Bool(false),
		}), true},
		{"query parameters never match", match(&routev3.RouteMatch{
			PathSpecifier:   &routev3.RouteMatch_Prefix{Prefix: "/"},
			QueryParameters: []*routev3.QueryParameterMatcher{{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: false}}},
		}), false},
		{"runtime fraction 0%", match(&routev3.RouteMatch{
			PathSpecifier:   &routev3.RouteMatch_Prefix{Prefix: "/"},
			RuntimeFraction: fraction(0),
		}), false},
		{"runtime fraction 100%", match(&routev3.RouteMatch{
			PathSpecifier:   &routev3.RouteMatch_Prefix{Prefix: "/"},
			RuntimeFraction: fraction(100),
		}), true},
	} {
		if got := matchRoute(tc.r, "/pkg.Svc/Method", md); got != tc.want {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.want)
		}
	}
}

func fraction(percent uint32) *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: percent}}
}

func TestParseConfig(t *testing.T) {
	cfg, err := balancerBuilder{}.ParseConfig([]byte(`{"failoverTimeout":"250ms"}`))
	if err != nil || cfg.(*lbConfig).failoverTimeout.Milliseconds() != 250 {
		t.Errorf("ParseConfig: %v, %v", cfg, err)
	}
	if cfg, err := (balancerBuilder{}).ParseConfig([]byte(`{}`)); err != nil || cfg.(*lbConfig).failoverTimeout != DefaultFailoverTimeout {
		t.Errorf("ParseConfig({}): %v, %v", cfg, err)
	}
	for _, bad := range []string{`{"failoverTimeout":"-1s"}`, `{"failoverTimeout":"soon"}`, `[]`} {
		if _, err := (balancerBuilder{}).ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s) succeeded", bad)
		}
	}
}
