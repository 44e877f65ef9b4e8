package grpcxds

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// pickDoneWorld is a route picker over one cluster of three SubConns, and
// the selection of an RPC routed by it.
func pickDoneWorld(t *testing.T) (*routePicker, func(wantTrailer bool) (*selection, balancer.PickInfo)) {
	t.Helper()
	rt := &resources.Route{Prefix: "/", Action: resources.RouteActionRoute, Cluster: "A", RuntimeFraction: -1}
	cfg := &channelConfig{gen: 1, snap: &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{rt}}}}
	rp := &routePicker{routes: cfg.snap.VirtualHost.Routes, clusters: cluster.PickerMapOf(map[string]cluster.Picker{"A": newBenchPicker(3)}),
		gen: 1, warned: new(atomic.Bool)}
	return rp, func(wantTrailer bool) (*selection, balancer.PickInfo) {
		rc, err := cfg.selectRPC("/svc/M", nil, 7)
		if err != nil {
			t.Fatal(err)
		}
		rc.sel.wantTrailer = wantTrailer
		return rc.sel, balancer.PickInfo{FullMethodName: "/svc/M", Ctx: rc.sel}
	}
}

// A pick's Done is made once and reused (pickDone): a pick and its Done
// allocate nothing, and a reused Done hands an attempt's trailer to its own
// RPC only, never to the RPC it was picked for before.
func TestPickDoneAllocatesNothing(t *testing.T) {
	rp, rpc := pickDoneWorld(t)
	pickAndEnd := func(info balancer.PickInfo, trailer metadata.MD) {
		res, err := rp.Pick(info)
		if err != nil {
			t.Fatal(err)
		}
		res.Done(balancer.DoneInfo{Trailer: trailer})
	}

	retried, retriedInfo := rpc(true)
	plain, plainInfo := rpc(false)
	first, second := metadata.Pairs(pushbackHeader, "10"), metadata.Pairs(pushbackHeader, "20")
	pickAndEnd(retriedInfo, first)
	if got := retried.trailer.Get(pushbackHeader); len(got) != 1 || got[0] != "10" {
		t.Fatalf("an attempt under a retry policy: trailer %v handed to its RPC, want %v", retried.trailer, first)
	}
	// The same pickDone, most likely (the pool is per P): it must have
	// forgotten the retried RPC.
	pickAndEnd(plainInfo, second)
	if got := retried.trailer.Get(pushbackHeader); len(got) != 1 || got[0] != "10" {
		t.Errorf("another RPC's attempt ended: the retried RPC's trailer is now %v, want %v", retried.trailer, first)
	}
	if plain.trailer != nil {
		t.Errorf("an RPC without a retry policy was handed its trailer %v; it wants none", plain.trailer)
	}

	for _, tc := range []struct {
		name string
		info balancer.PickInfo
	}{{"retry policy", retriedInfo}, {"no retry policy", plainInfo}} {
		// testing.AllocsPerRun runs on one P, whose pool keeps the
		// pickDone; the race detector's sync.Pool drops a quarter of what
		// it is given, which the average (an integer) does not show.
		if allocs := testing.AllocsPerRun(100, func() { pickAndEnd(tc.info, nil) }); allocs != 0 {
			t.Errorf("%s: a pick and its Done made %v allocations, want 0", tc.name, allocs)
		}
	}
}

// A pick of an RPC without the goxds interceptors (no selection) has a
// Done all the same, which allocates nothing either.
func TestPickDoneWithoutInterceptors(t *testing.T) {
	rp, _ := pickDoneWorld(t)
	info := balancer.PickInfo{FullMethodName: "/svc/M", Ctx: context.Background()}
	pick := func() {
		res, err := rp.Pick(info)
		if err != nil {
			t.Fatal(err)
		}
		if res.Done == nil {
			t.Fatal("a pick without the interceptors has no Done: the cluster never hears of the RPC's end")
		}
		res.Done(balancer.DoneInfo{})
	}
	pick()
	if allocs := testing.AllocsPerRun(100, pick); allocs != 0 {
		t.Errorf("a pick and its Done made %v allocations, want 0", allocs)
	}
}
