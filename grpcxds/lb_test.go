package grpcxds

import (
	"context"
	"errors"
	"maps"
	"slices"
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
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// fakeSC stands for a SubConn in picker tests.
type fakeSC struct {
	balancer.SubConn
	name string
}

func (fakeSC) Connect()  {}
func (fakeSC) Shutdown() {}

// fakeDialer makes an endpoint's connection a fakeSC named by its key.
type fakeDialer struct{}

func (fakeDialer) NewConn(ep *endpoint.Endpoint) (endpoint.Conn, error) {
	return &subConn{SubConn: fakeSC{name: ep.Key()}, ep: ep}, nil
}
func (fakeDialer) Dropped(*endpoint.Endpoint) {}

// prio builds a priority of one locality per weights entry, each with
// endpoints of the given weights, all in state.
func prio(state connectivity.State, localities ...[]uint32) *priority {
	p := &priority{leaf: "c", maxRequests: 1024, inflight: new(atomic.Int64),
		lb: lbpolicy.Leaf{Policy: &resources.LBPolicy{MinRingSize: 1024, MaxRingSize: 8 << 20}}}
	pool := endpoint.NewPool(fakeDialer{}, nil)
	n := 0
	for i, eps := range localities {
		l := lbpolicy.Locality{Weight: uint32(i + 1)}
		for _, w := range eps {
			c, _ := pool.Get([]string{string(rune('a' + n))}, "")
			n++
			pool.Want(c)
			pool.SetState(c, c.Conn(), endpointState(state), nil)
			l.Endpoints = append(l.Endpoints, lbpolicy.WeightedEndpoint{Endpoint: c, Weight: w})
		}
		p.lb.Localities = append(p.lb.Localities, l)
	}
	return p
}

// picks makes n picks of the priority's picker and counts them by
// endpoint name. The RPCs are left unfinished, so that outlier detection
// counts none.
func picks(t *testing.T, cp clusterPicker, n int) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		res, err := cp.pick(balancer.PickInfo{}, 0)
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
	p.lb.Policy = &policy
	return p
}

func readyPicker(t *testing.T, p *priority) clusterPicker {
	t.Helper()
	pp := p.picker(connectivity.Ready).(*priorityPicker)
	if pp.inner == nil {
		t.Fatal("no picker for a ready priority")
	}
	return pp
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
		// Without reports (a round robin), but with the per-RPC report
		// hook of its Done.
		{Kind: resources.LBWeightedRoundRobin, WRR: resources.WRRConfig{WeightExpirationPeriod: time.Hour, WeightUpdatePeriod: time.Hour}},
	} {
		name := pol.Kind.String()
		if pol.WRRLocality {
			name = "wrr_locality_" + name
		}
		b.Run(name, func(b *testing.B) {
			benchPick(b, prio(connectivity.Ready, ten, ten, ten).with(pol))
		})
	}
	// Outlier detection counts each RPC's outcome, in the RPC's Done.
	b.Run("round_robin_outlier_detection", func(b *testing.B) {
		p := prio(connectivity.Ready, ten, ten, ten).with(resources.LBPolicy{Kind: resources.LBRoundRobin})
		withOutlierDetection(p)
		benchPick(b, p)
	})
}

// benchPick makes picks of p's picker from parallel goroutines, ending
// each RPC at once.
func benchPick(b *testing.B, p *priority) {
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
}

// pick_first connects one endpoint at a time, in order (gRFC A62), its
// Happy Eyeballs turns on the balancer's clock as its other timers: only
// a is made and connected at first; a failing, b is at once; b still
// connecting after its 250ms turn, c is too, b still trying; c ready,
// the cluster's RPCs go to c, and a new picker is published at each step.
func TestPickFirstConnectsInTurn(t *testing.T) {
	t.Parallel()
	clk := &manualClock{now: time.Unix(1000, 0)}
	cc := newLazyCC()
	b := newStuckBalancer(&cc.stuckCC, clk, time.Minute)
	b.cc = cc
	defer b.Close()
	addrs := []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}
	var eps []resources.Endpoint
	for _, a := range addrs {
		eps = append(eps, resources.Endpoint{Addresses: []string{a}, Weight: 1})
	}
	snap := &watchers.Snapshot{
		VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "c"}}},
		Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{"c": {
			Name: "c",
			Cluster: &resources.Cluster{Name: "c", Kind: resources.ClusterKindEDS, MaxRequests: 1024,
				LBPolicy: resources.LBPolicy{Kind: resources.LBPickFirst}},
			Endpoints: &resources.Endpoints{Name: "c", Localities: []resources.Locality{{Weight: 1, Endpoints: eps}}},
		}}),
	}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(snap)}}); err != nil {
		t.Fatal(err)
	}
	cc.next(t)
	connected := func(want ...string) map[string]*lazySC {
		t.Helper()
		made, conn := cc.madeAndConnected()
		slices.Sort(made)
		slices.Sort(conn)
		if !slices.Equal(made, want) || !slices.Equal(conn, want) {
			t.Fatalf("SubConns made %v, connected %v; want %v", made, conn, want)
		}
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return maps.Clone(cc.made)
	}
	sc := connected(addrs[0])
	sc[addrs[0]].listener(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	cc.next(t)
	sc[addrs[0]].listener(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errors.New("refused")})
	cc.next(t)
	sc = connected(addrs[0], addrs[1])
	sc[addrs[1]].listener(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	clk.advance(lbpolicy.HappyEyeballsDelay - time.Millisecond)
	connected(addrs[0], addrs[1])
	clk.advance(time.Millisecond)
	sc = connected(addrs...)
	sc[addrs[2]].listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	var last balancer.State
	for len(cc.states) > 0 {
		last = <-cc.states
	}
	if res, err := pickCluster(t, last, "c"); err != nil || res.SubConn != sc[addrs[2]] {
		t.Errorf("pick with c ready, a failing and b connecting: %v, %v; want c", res.SubConn, err)
	}
}
