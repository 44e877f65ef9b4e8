package grpcxds

import (
	"context"
	"errors"
	"maps"
	"slices"
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

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

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

// matchRoute reports whether r matches an RPC to method with metadata md,
// its headers as gRPC routing sees them.
func matchRoute(r *resources.Route, method string, md metadata.MD) bool {
	return r.MatchGRPC(method, route.GRPCHeaders(md).Get)
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

// The cluster layer's errors in gRPC's terms: a pick to hold waits for the
// next picker, a drop and the circuit breaker fail the RPC UNAVAILABLE
// with their reason, and any other reason is left to gRPC (UNAVAILABLE,
// or wait-for-ready RPCs wait).
func TestPickError(t *testing.T) {
	if err := pickError(cluster.ErrQueue); err != balancer.ErrNoSubConnAvailable {
		t.Errorf("ErrQueue: %v, want ErrNoSubConnAvailable", err)
	}
	if err := pickError(&cluster.DropError{Category: "lb"}); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "dropped by load balancing policy: lb" {
		t.Errorf("drop: %v", err)
	}
	if err := pickError(&cluster.OverloadError{Cluster: "c", MaxRequests: 2}); status.Code(err) != codes.Unavailable ||
		status.Convert(err).Message() != `goxds: cluster "c": 2 requests in flight, the circuit breaker's max_requests` {
		t.Errorf("circuit breaker: %v", err)
	}
	other := errors.New("cluster unusable")
	if err := pickError(other); err != other {
		t.Errorf("another error: %v, want it as it is", err)
	}
}

// ring_hash's requestHashHeader (gRFC A76) hashes a header of the RPC's
// outgoing metadata, which the balancer reads from the context a pick
// hands the cluster layer: one value, one hash; no context, a random one.
func TestHeaderHashOfRPC(t *testing.T) {
	b := &xdsBalancer{}
	ctx := func(v string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "x-user", v)
	}
	if b.HeaderHash(ctx("alice"), "x-user") != b.HeaderHash(ctx("alice"), "x-user") {
		t.Error("one header value, two hashes")
	}
	if b.HeaderHash(ctx("alice"), "x-user") == b.HeaderHash(ctx("bob"), "x-user") {
		t.Error("two header values, one hash")
	}
	if b.HeaderHash(nil, "x-user") == b.HeaderHash(nil, "x-user") {
		t.Error("an RPC without the header got a fixed hash, want a random one")
	}
}

// pick_first's Happy Eyeballs turn belongs to its priority: once an update
// rebuilds the priority, the old turn ending changes nothing, and no
// picker is published for it (it used to have the cluster's picker built
// and published again); the new priority's own turn then lets b in.
func TestPickFirstTurnOfRebuiltPriority(t *testing.T) {
	t.Parallel()
	clk := &manualClock{now: time.Unix(1000, 0)}
	cc := newLazyCC()
	b := newStuckBalancer(&cc.stuckCC, clk, time.Minute)
	b.cc = cc
	defer b.Close()
	snapOf := func(addrs ...string) resolver.State {
		var eps []resources.Endpoint
		for _, a := range addrs {
			eps = append(eps, resources.Endpoint{Addresses: []string{a}, Weight: 1})
		}
		return resolver.State{Attributes: withSnapshot(&watchers.Snapshot{
			VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "c"}}},
			Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{"c": {
				Name: "c",
				Cluster: &resources.Cluster{Name: "c", Kind: resources.ClusterKindEDS, MaxRequests: 1024,
					LBPolicy: resources.LBPolicy{Kind: resources.LBPickFirst}},
				Endpoints: &resources.Endpoints{Name: "c", Localities: []resources.Locality{{Weight: 1, Endpoints: eps}}},
			}}),
		})}
	}
	drain := func() {
		for {
			select {
			case <-cc.states:
			default:
				return
			}
		}
	}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: snapOf("10.0.0.1:80", "10.0.0.2:80")}); err != nil {
		t.Fatal(err)
	}
	made := func(addr string) *lazySC {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return cc.made[addr]
	}
	a := made("10.0.0.1:80")
	a.listener(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	drain() // a tried alone (gRFC A62): b's turn comes in 250ms
	clk.advance(100 * time.Millisecond)
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: snapOf("10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80")}); err != nil {
		t.Fatal(err)
	}
	s := cc.next(t)
	if _, err := pickCluster(t, s, "c"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("pick in the rebuilt priority, a connecting: %v, want the RPC queued", err)
	}
	drain()
	clk.advance(150 * time.Millisecond) // the old priority's turn would end
	select {
	case s := <-cc.states:
		t.Errorf("the turn of a priority rebuilt since ended, and a picker was published (%v)", s.ConnectivityState)
	default:
	}
	if made("10.0.0.2:80") != nil {
		t.Error("the turn of a priority rebuilt since ended, and b was made")
	}
	clk.advance(100 * time.Millisecond) // the new priority's turn ends
	second := made("10.0.0.2:80")
	if second == nil {
		t.Fatal("the rebuilt priority's turn ended, and b was not made")
	}
	drain()
	second.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	if res, err := pickCluster(t, cc.next(t), "c"); err != nil || res.SubConn != second {
		t.Errorf("pick with b ready after the rebuilt priority's turn: %v, %v; want b", res.SubConn, err)
	}
}
