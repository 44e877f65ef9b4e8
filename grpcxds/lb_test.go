package grpcxds

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

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
		policy: &resources.LBPolicy{MinRingSize: 1024, MaxRingSize: 8 << 20}}
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

// policy sets p's policy and returns p.
func (p *priority) with(policy resources.LBPolicy) *priority {
	policy.MinRingSize, policy.MaxRingSize = 1024, 8<<20
	p.policy = &policy
	return p
}

func readyPicker(t *testing.T, p *priority) endpointPicker {
	t.Helper()
	pp := p.picker(connectivity.Ready).(*priorityPicker)
	if pp.inner == nil {
		t.Fatal("no picker for a ready priority")
	}
	return pp.inner
}

func within(got, want, slack int) bool { return got >= want-slack && got <= want+slack }

// Under wrr_locality (or the legacy ROUND_ROBIN) localities share the
// traffic by weight and round_robin shares each locality's part evenly,
// endpoint weights aside, as in gRPC: locality 1 (weight 1) holds a:1 and
// b:3, locality 2 (weight 2) holds c:1, so a and b get 1/6 each, c 2/3.
func TestPickerWRRLocalityRoundRobin(t *testing.T) {
	for _, kind := range []resources.LBPolicyKind{resources.LBRoundRobin, resources.LBWeightedRoundRobin} {
		p := prio(connectivity.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: kind, WRRLocality: true})
		const n = 12000
		got := picks(t, readyPicker(t, p), n)
		for name, want := range map[string]int{"a": 2000, "b": 2000, "c": 8000} {
			if !within(got[name], want, 2) {
				t.Errorf("%v: %s picked %d times of %d, want %d", kind, name, got[name], n, want)
			}
		}
	}
}

// Without wrr_locality round_robin (and weighted_round_robin without ORCA
// reports) spreads RPCs evenly over the priority, whatever the weights.
func TestRoundRobinIgnoresWeights(t *testing.T) {
	for _, kind := range []resources.LBPolicyKind{resources.LBRoundRobin, resources.LBWeightedRoundRobin} {
		p := prio(connectivity.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: kind})
		got := picks(t, readyPicker(t, p), 300)
		if got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
			t.Errorf("%v over 3 endpoints: %v, want 100 each", kind, got)
		}
	}
}

// Only ready endpoints count, and a locality with none gives up its share.
func TestOnlyReadyEndpoints(t *testing.T) {
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2, WRRLocality: true},
		{Kind: resources.LBPickFirst, WRRLocality: true},
		{Kind: resources.LBRingHash, WRRLocality: true},
		{Kind: resources.LBRoundRobin},
		{Kind: resources.LBPickFirst},
	} {
		p := prio(connectivity.Ready, []uint32{1, 1}, []uint32{1}).with(pol)
		p.localities[0].endpoints[0].conn.state = connectivity.TransientFailure
		p.localities[1].endpoints[0].conn.state = connectivity.Connecting
		if got := picks(t, readyPicker(t, p), 30); got["b"] != 30 {
			t.Errorf("%+v: %v, want b alone", pol, got)
		}
	}
}

// wrr_locality over least_request: localities by weight, then the less
// loaded of two within the locality.
func TestPickerWRRLocalityLeastRequest(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1, 1}, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBLeastRequest, ChoiceCount: 2, WRRLocality: true})
	got := picks(t, readyPicker(t, p), 3000)
	if loc1 := got["a"] + got["b"]; !within(loc1, 1000, 2) {
		t.Errorf("locality 1 (weight 1 of 3) got %d of 3000: %v", loc1, got)
	}
}

// pick_first sends everything to the first ready endpoint and stays on it
// while it is ready; under wrr_locality there is one per locality.
func TestPickFirst(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1, 1}, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBPickFirst})
	if got := picks(t, readyPicker(t, p), 10); got["a"] != 10 {
		t.Errorf("pick_first: %v, want all to a", got)
	}
	a := p.localities[0].endpoints[0].conn
	a.state = connectivity.TransientFailure
	if got := picks(t, readyPicker(t, p), 10); got["b"] != 10 {
		t.Errorf("pick_first with a failing: %v, want all to b", got)
	}
	a.state = connectivity.Ready
	if got := picks(t, readyPicker(t, p), 10); got["b"] != 10 {
		t.Errorf("pick_first with a back: %v, want it to stay on b", got)
	}
	// The endpoints are tried in order: one connecting is waited for,
	// even if one after it is ready, for 250ms per endpoint (Happy
	// Eyeballs): a and b connecting, c and d ready, c is chosen after
	// 500ms.
	q := prio(connectivity.Ready, []uint32{1, 1, 1, 1}).with(resources.LBPolicy{Kind: resources.LBPickFirst})
	clk := &fakeClock{now: time.Unix(1000, 0)}
	q.clock = clk
	q.localities[0].endpoints[0].conn.state = connectivity.Connecting
	q.localities[0].endpoints[1].conn.state = connectivity.Connecting
	for _, wait := range []time.Duration{0, 249 * time.Millisecond, 250 * time.Millisecond, 499 * time.Millisecond} {
		clk.now = time.Unix(1000, 0).Add(wait)
		if pp := q.picker(connectivity.Ready).(*priorityPicker); pp.inner != nil {
			t.Errorf("pick_first chose an endpoint after %v while a, before it, is connecting", wait)
		}
	}
	clk.now = time.Unix(1000, 0).Add(500 * time.Millisecond)
	if got := picks(t, readyPicker(t, q), 10); got["c"] != 10 {
		t.Errorf("pick_first after 500ms with a and b connecting: %v, want c", got)
	}
	// A new priority from an update keeps the endpoint chosen before.
	p2 := prio(connectivity.Ready).with(*p.policy)
	p2.localities = p.localities
	p2.pickedBefore = map[*endpointConn]bool{p.localities[0].endpoints[1].conn: true}
	if got := picks(t, readyPicker(t, p2), 10); got["b"] != 10 {
		t.Errorf("pick_first after an update: %v, want it to stay on b", got)
	}

	p = prio(connectivity.Ready, []uint32{1, 1}, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBPickFirst, WRRLocality: true})
	got := picks(t, readyPicker(t, p), 3000)
	if got["b"] != 0 || got["d"] != 0 || !within(got["a"], 1000, 2) || !within(got["c"], 2000, 2) {
		t.Errorf("wrr_locality over pick_first, localities 1:2: %v, want a 1000 and c 2000", got)
	}
}

// shuffle_address_list draws the order anew for each priority, an
// endpoint coming first in proportion to its weight (gRFC A113).
func TestPickFirstWeightedShuffle(t *testing.T) {
	const n = 4000
	first := make(map[string]int)
	for range n {
		p := prio(connectivity.Ready, []uint32{1, 3}).with(resources.LBPolicy{Kind: resources.LBPickFirst, ShuffleAddressList: true})
		res, err := readyPicker(t, p).pick(0)
		if err != nil {
			t.Fatal(err)
		}
		first[res.SubConn.(fakeSC).name]++
	}
	// b (weight 3 of 4) comes first 75% of the time: 3000 ± 5 sigma.
	if !within(first["b"], 3000, 140) {
		t.Errorf("b first %d times of %d, want about 3000", first["b"], n)
	}
}

func TestRing(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1, 3}).with(resources.LBPolicy{Kind: resources.LBRingHash})
	ring := buildRing(p.endpointGroups()[0].eps, 1024, 8<<20)
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
		if got := len(buildRing(p.endpointGroups()[0].eps, tc.min, tc.max)); uint64(got) != tc.want {
			t.Errorf("ring sized %d..%d for weights 1:3 has %d entries, want %d", tc.min, tc.max, got, tc.want)
		}
	}
	// Without wrr_locality the ring weighs locality shares times endpoint
	// shares; with it, each locality has its own ring by endpoint weights.
	p = prio(connectivity.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: resources.LBRingHash})
	if eps := p.endpointGroups()[0].eps; len(eps) != 3 || eps[0].weight != 1.0/12 || eps[1].weight != 3.0/12 || eps[2].weight != 2.0/3 {
		t.Errorf("ring weights %+v, want 1/12, 3/12, 2/3", eps)
	}
	p = prio(connectivity.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: resources.LBRingHash, WRRLocality: true})
	if gs := p.endpointGroups(); len(gs) != 2 || gs[0].weight != 1 || gs[0].eps[1].weight != 0.75 || gs[1].weight != 2 || gs[1].eps[0].weight != 1 {
		t.Errorf("wrr_locality ring groups %+v", gs)
	}

	// The owner of the hash takes the RPC; if it is connecting, the RPC
	// waits; if it fails, the next ready endpoint takes it.
	p = prio(connectivity.Ready, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBRingHash})
	rp := p.endpointGroups()[0].ringPicker(p).(*ringPicker)
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

// ring_hash's requestHashHeader hashes the header, not the route's hash.
func TestRingRequestHashHeader(t *testing.T) {
	p := prio(connectivity.Ready, []uint32{1, 1, 1, 1}).with(resources.LBPolicy{Kind: resources.LBRingHash, RequestHashHeader: "x-user"})
	pp := p.picker(connectivity.Ready)
	seen := make(map[string]bool)
	for i := range 40 {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user", "alice")
		res, err := pp.pick(balancer.PickInfo{Ctx: ctx}, uint64(i)*0x9e3779b97f4a7c15)
		if err != nil {
			t.Fatal(err)
		}
		seen[res.SubConn.(fakeSC).name] = true
	}
	if len(seen) != 1 {
		t.Errorf("one header value and 40 route hashes went to %v, want one endpoint", seen)
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
	_, rc, err := resources.RouteConfigType.DecodeTyped(nil, any)
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

// BenchmarkPick measures one pick of each policy over three localities of
// ten ready endpoints, from parallel goroutines.
func BenchmarkPick(b *testing.B) {
	ten := []uint32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin},
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2, WRRLocality: true},
		{Kind: resources.LBPickFirst, WRRLocality: true},
		{Kind: resources.LBRingHash},
	} {
		name := pol.Kind.String()
		if pol.WRRLocality {
			name = "wrr_locality_" + name
		}
		b.Run(name, func(b *testing.B) {
			p := prio(connectivity.Ready, ten, ten, ten).with(pol)
			pp := p.picker(connectivity.Ready)
			b.RunParallel(func(pb *testing.PB) {
				var h uint64
				for pb.Next() {
					h += 0x9e3779b97f4a7c15
					res, err := pp.pick(balancer.PickInfo{}, h)
					if err != nil {
						b.Fatal(err)
					}
					if res.Done != nil {
						res.Done(balancer.DoneInfo{})
					}
				}
			})
		})
	}
}
