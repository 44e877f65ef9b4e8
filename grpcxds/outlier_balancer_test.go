package grpcxds

import (
	"errors"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// Outlier detection runs on the balancer's clock, as its other timers
// do: through the balancer, a backend failing its RPCs is ejected when
// the interval ends on that clock and the picker published passes it
// over; it stays out for base_ejection_time, not an interval less, and
// returns with a picker published then. Every step happens on the test's
// goroutine, at the fake time the test sets.
func TestOutlierDetectionOnBalancerClock(t *testing.T) {
	t.Parallel()
	clk := &manualClock{now: time.Unix(1000, 0)}
	cc := newLazyCC()
	b := newStuckBalancer(&cc.stuckCC, clk, time.Minute)
	b.cc = cc
	defer b.Close()
	var eps []resources.Endpoint
	for _, addr := range []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"} {
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
					MaxEjectionPercent:             wrapperspb.UInt32(50),
					EnforcingSuccessRate:           wrapperspb.UInt32(0),
					EnforcingFailurePercentage:     wrapperspb.UInt32(100),
					FailurePercentageThreshold:     wrapperspb.UInt32(50),
					FailurePercentageMinimumHosts:  wrapperspb.UInt32(3),
					FailurePercentageRequestVolume: wrapperspb.UInt32(3),
				}},
			Endpoints: &resources.Endpoints{Name: "c", Localities: []resources.Locality{{Weight: 1, Endpoints: eps}}},
		}}),
	}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(snap)}}); err != nil {
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
		if sc == nil {
			t.Fatal("a SubConn of the cluster not made")
		}
		sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	}
	bad := scs[0].addr
	// rpcs makes n RPCs with the latest picker published, failing those
	// that go to bad while fail holds, and counts them by address.
	state := latestState(t, cc, "the backends were ready")
	rpcs := func(n int, fail bool) map[string]int {
		t.Helper()
		got := make(map[string]int)
		for range n {
			res, err := pickHeld(t, state, "c")
			if err != nil {
				t.Fatal(err)
			}
			addr := res.SubConn.(*lazySC).addr
			got[addr]++
			var di balancer.DoneInfo
			if fail && addr == bad {
				di.Err = errors.New("boom")
			}
			res.Done(di)
		}
		return got
	}
	if got := rpcs(30, true); got[bad] != 10 {
		t.Fatalf("round robin over three ready backends: %v", got)
	}
	clk.advance(time.Second)
	state = latestState(t, cc, "the interval in which bad failed every RPC ended")
	if got := rpcs(30, false); got[bad] != 0 {
		t.Fatalf("bad, failing every RPC, still picked after the interval: %v", got)
	}
	clk.advance(28 * time.Second)
	clk.advance(time.Second)
	if s, ok := tryState(cc); ok {
		t.Fatalf("a picker published 29s into bad's 30s ejection: %v", s.ConnectivityState)
	}
	if got := rpcs(30, false); got[bad] != 0 {
		t.Fatalf("bad picked 29s into its 30s ejection: %v", got)
	}
	clk.advance(time.Second)
	state = latestState(t, cc, "bad's base_ejection_time passed")
	if got := rpcs(30, false); got[bad] != 10 {
		t.Fatalf("bad not back after its ejection: %v", got)
	}
}

// tryState takes the next state published, if there is one.
func tryState(cc *lazyCC) (balancer.State, bool) {
	select {
	case s := <-cc.states:
		return s, true
	default:
		return balancer.State{}, false
	}
}

// latestState returns the last state published since the last one
// taken, failing the test if none was: when.
func latestState(t *testing.T, cc *lazyCC, when string) balancer.State {
	t.Helper()
	s, ok := tryState(cc)
	if !ok {
		t.Fatalf("no picker published when %s", when)
	}
	for {
		next, ok := tryState(cc)
		if !ok {
			return s
		}
		s = next
	}
}
