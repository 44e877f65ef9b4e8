package grpcxds

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// lbRecorder is an OutlierMetrics and a SubchannelMetrics that keeps what
// it hears, one line a measurement, and fails the test if it hears it
// with the balancer's lock held.
type lbRecorder struct {
	t  *testing.T
	b  *xdsBalancer
	mu sync.Mutex
	// got are the measurements since the last take.
	got []string
}

func (r *lbRecorder) add(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if r.b != nil {
		if !r.b.mu.TryLock() {
			r.t.Errorf("%s: measured under the balancer's lock", line)
		} else {
			r.b.mu.Unlock()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, line)
}

func (r *lbRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	slices.Sort(got)
	return got
}

func (r *lbRecorder) EjectionEnforced(target, backendService, method string) {
	r.add("%s %s %s enforced", target, backendService, method)
}
func (r *lbRecorder) EjectionUnenforced(target, backendService, method, reason string) {
	r.add("%s %s %s %s", target, backendService, method, reason)
}
func (r *lbRecorder) ConnectionAttemptSucceeded(target, backendService, locality string) {
	r.add("%s %s %s succeeded", target, backendService, locality)
}
func (r *lbRecorder) ConnectionAttemptFailed(target, backendService, locality string) {
	r.add("%s %s %s failed", target, backendService, locality)
}
func (r *lbRecorder) Disconnection(target, backendService, locality, reason string) {
	r.add("%s %s %s disconnected: %s", target, backendService, locality, reason)
}
func (r *lbRecorder) OpenConnections(target, backendService, locality string, delta int) {
	r.add("%s %s %s open %+d", target, backendService, locality, delta)
}

// measuredState is the resolver state of snap for a channel whose Builder
// measures with rec, as the goxds resolver makes it.
func measuredState(snap *watchers.Snapshot, rec *lbRecorder) balancer.ClientConnState {
	cs := newChannelState(&Builder{outlierMetrics: rec, subchannelMetrics: rec})
	cfg := &channelConfig{snap: snap, src: &source{cs: cs, epoch: cs.epochNow()}}
	return balancer.ClientConnState{
		ResolverState:  resolver.State{Attributes: attributes.New(configKey{}, cfg)},
		BalancerConfig: &lbConfig{failoverTimeout: time.Minute},
	}
}

// newMeasuredBalancer is a balancer of channel "goxds:///svc" over cc,
// on clk.
func newMeasuredBalancer(t *testing.T, cc *lazyCC, clk clock) *xdsBalancer {
	b := newStuckBalancer(&cc.stuckCC, clk, time.Minute)
	b.cc = cc
	b.bopts.Target = resolver.Target{URL: url.URL{Scheme: "goxds", Path: "/svc"}}
	t.Cleanup(b.Close)
	return b
}

// gRFC A91 through the balancer: an outlier ejected at the end of an
// interval (on the balancer's clock) is measured with the channel's
// target and the leaf cluster, once the balancer's lock is released; one
// the cap leaves in is measured as max_ejection_overflow.
func TestOutlierMetrics(t *testing.T) {
	t.Parallel()
	clk := &manualClock{now: time.Unix(1000, 0)}
	cc := newLazyCC()
	b := newMeasuredBalancer(t, cc, clk)
	rec := &lbRecorder{t: t, b: b}
	var eps []resources.Endpoint
	for _, addr := range []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"} {
		eps = append(eps, resources.Endpoint{Addresses: []string{addr}, Weight: 1})
	}
	snap := &watchers.Snapshot{
		VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "c"}}},
		Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{"c": {
			Name: "c",
			Cluster: &resources.Cluster{Name: "c", Kind: resources.ClusterKindEDS, MaxRequests: 1024,
				LBPolicy: resources.LBPolicy{Kind: resources.LBRoundRobin},
				OutlierDetection: &clusterv3.OutlierDetection{
					Interval:                       durationpb.New(time.Second),
					BaseEjectionTime:               durationpb.New(30 * time.Second),
					MaxEjectionPercent:             wrapperspb.UInt32(25),
					EnforcingSuccessRate:           wrapperspb.UInt32(0),
					EnforcingFailurePercentage:     wrapperspb.UInt32(100),
					FailurePercentageThreshold:     wrapperspb.UInt32(50),
					FailurePercentageMinimumHosts:  wrapperspb.UInt32(4),
					FailurePercentageRequestVolume: wrapperspb.UInt32(3),
				}},
			Endpoints: &resources.Endpoints{Name: "c", Localities: []resources.Locality{{Weight: 1, Endpoints: eps}}},
		}}),
	}
	if err := b.UpdateClientConnState(measuredState(snap, rec)); err != nil {
		t.Fatal(err)
	}
	cc.next(t)
	cc.mu.Lock()
	var scs []*lazySC
	for _, ep := range eps {
		scs = append(scs, cc.made[ep.Addresses[0]])
	}
	cc.mu.Unlock()
	for _, sc := range scs {
		sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	}
	state := latestState(t, cc, "the backends were ready")
	// Two of the four fail every RPC; the cap (25%) lets one out.
	for range 40 {
		res, err := pickHeld(t, state, "c")
		if err != nil {
			t.Fatal(err)
		}
		var di balancer.DoneInfo
		if a := res.SubConn.(*lazySC).addr; a == scs[0].addr || a == scs[1].addr {
			di.Err = errors.New("boom")
		}
		res.Done(di)
	}
	rec.take() // the connections' measurements
	clk.advance(time.Second)
	want := []string{
		"goxds:///svc c failure_percentage enforced",
		"goxds:///svc c failure_percentage max_ejection_overflow",
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("after the interval: %q, want %q", got, want)
	}
}

// gRFC A94 through the balancer: a SubConn's connection attempts,
// succeeded or failed, its disconnections, underneath ("unknown") or by
// the balancer ("subchannel shutdown"), and the open connections, each
// with the channel's target, the leaf cluster and the locality the
// endpoint was first listed under, measured once the balancer's lock is
// released; an attempt cut short by the balancer is not measured.
func TestSubchannelMetrics(t *testing.T) {
	t.Parallel()
	clk := &manualClock{now: time.Unix(1000, 0)}
	cc := newLazyCC()
	b := newMeasuredBalancer(t, cc, clk)
	rec := &lbRecorder{t: t, b: b}
	r1 := resources.LocalityID{Region: "r1", Zone: "z1", SubZone: "s1"}
	r2 := resources.LocalityID{Region: "r2"}
	edsOf := func(name string, locs map[resources.LocalityID][]string) *watchers.ClusterConfig {
		var ls []resources.Locality
		for _, id := range []resources.LocalityID{r1, r2} {
			if len(locs[id]) == 0 {
				continue
			}
			l := resources.Locality{ID: id, Weight: 1}
			for _, a := range locs[id] {
				l.Endpoints = append(l.Endpoints, resources.Endpoint{Addresses: []string{a}, Weight: 1})
			}
			ls = append(ls, l)
		}
		return &watchers.ClusterConfig{Name: name,
			Cluster: &resources.Cluster{Name: name, Kind: resources.ClusterKindEDS, MaxRequests: 1024,
				LBPolicy: resources.LBPolicy{Kind: resources.LBRoundRobin}},
			Endpoints: &resources.Endpoints{Name: name, Localities: ls}}
	}
	update := func(cs ...*watchers.ClusterConfig) {
		t.Helper()
		m := map[string]*watchers.ClusterConfig{}
		var routes []*resources.Route
		for _, c := range cs {
			m[c.Name] = c
			routes = append(routes, &resources.Route{Action: resources.RouteActionRoute, Cluster: c.Name})
		}
		snap := &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: routes}, Clusters: watchers.NewClusterMap(m)}
		if err := b.UpdateClientConnState(measuredState(snap, rec)); err != nil {
			t.Fatal(err)
		}
	}
	// a in r1 of A; b in r2 of A, then also in r1 of B: one connection,
	// labelled as A listed it first.
	update(edsOf("A", map[resources.LocalityID][]string{r1: {"a:1"}, r2: {"b:1"}}))
	update(edsOf("A", map[resources.LocalityID][]string{r1: {"a:1"}, r2: {"b:1"}}),
		edsOf("B", map[resources.LocalityID][]string{r1: {"b:1"}}))
	sc := func(addr string) *lazySC {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return cc.made[addr]
	}
	set := func(addr string, s connectivity.State) {
		sc(addr).listener(balancer.SubConnState{ConnectivityState: s, ConnectionError: errors.New("x")})
	}
	check := func(when string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if got := rec.take(); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", when, got, want)
		}
	}
	const (
		aLabels = `goxds:///svc A {region="r1", zone="z1", sub_zone="s1"}`
		bLabels = `goxds:///svc A {region="r2", zone="", sub_zone=""}`
	)
	set("a:1", connectivity.Connecting)
	set("a:1", connectivity.Ready)
	set("b:1", connectivity.Connecting)
	set("b:1", connectivity.TransientFailure)
	check("a ready, b failed", aLabels+" succeeded", aLabels+" open +1", bLabels+" failed")

	set("b:1", connectivity.Idle)
	set("b:1", connectivity.Connecting)
	set("b:1", connectivity.Ready)
	set("a:1", connectivity.Idle) // the server closed it
	check("b ready, a lost", bLabels+" succeeded", bLabels+" open +1", aLabels+" disconnected: unknown", aLabels+" open -1")

	// a connecting again when the configuration drops it: no attempt
	// measured. b, dropped too, was ready: a disconnection.
	set("a:1", connectivity.Connecting)
	update(edsOf("C", map[resources.LocalityID][]string{r1: {"c:1"}}))
	set("a:1", connectivity.Ready) // reported after its shutdown
	check("a and b dropped", bLabels+" disconnected: subchannel shutdown", bLabels+" open -1")

	// Closing the channel shuts down its ready connections.
	set("c:1", connectivity.Connecting)
	set("c:1", connectivity.Ready)
	rec.take()
	b.Close()
	check("closed", `goxds:///svc C {region="r1", zone="z1", sub_zone="s1"} disconnected: subchannel shutdown`,
		`goxds:///svc C {region="r1", zone="z1", sub_zone="s1"} open -1`)
}
