package grpcxds

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/cluster"
	dataplaneroute "github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// hashRecorder is a cluster picker that records the hash of each pick and
// keeps the RPC waiting.
type hashRecorder struct{ hashes []uint64 }

func (r *hashRecorder) Pick(_ any, hash uint64) (cluster.Result, error) {
	r.hashes = append(r.hashes, hash)
	return cluster.Result{}, cluster.ErrQueue
}

// An RPC's request hash is computed once, when it starts: a ring_hash
// route that hashes nothing gives it one random hash, kept at every pick
// while it waits (as grpc-go hashes once per RPC), not a new one per pick.
func TestRequestHashOncePerRPC(t *testing.T) {
	route := &resources.Route{Prefix: "/", Action: resources.RouteActionRoute, Cluster: "A", RuntimeFraction: -1}
	cfg := &channelConfig{gen: 1, snap: &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{route}}}}
	rc, err := cfg.selectRPC("/svc/M", nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	rec := &hashRecorder{}
	p := &routePicker{routes: cfg.snap.VirtualHost.Routes, clusters: cluster.PickerMapOf(map[string]cluster.Picker{"A": rec}), gen: 1, warned: new(atomic.Bool)}
	ctx := context.WithValue(context.Background(), selectionKey{}, rc.sel)
	for range 3 { // the RPC waits: picked again at each new picker
		if _, err := p.Pick(balancer.PickInfo{FullMethodName: "/svc/M", Ctx: ctx}); err != balancer.ErrNoSubConnAvailable {
			t.Fatalf("Pick: %v", err)
		}
	}
	if h := rec.hashes; len(h) != 3 || h[0] != rc.sel.hash || h[1] != h[0] || h[2] != h[0] {
		t.Errorf("hashes of 3 picks of one RPC: %v; want its one hash %d each time", h, rc.sel.hash)
	}
}

// A route that names no cluster (which validation does not let through)
// fails the RPC; the weighted draw would panic on it.
func TestRouteWithoutClusterFails(t *testing.T) {
	route := &resources.Route{Prefix: "/", Action: resources.RouteActionRoute, RuntimeFraction: -1}
	cfg := &channelConfig{gen: 1, nodeID: "n", snap: &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{route}}}}
	if _, err := cfg.selectRPC("/svc/M", nil, 7); status.Code(err) != codes.Unavailable {
		t.Errorf("selectRPC with a route naming no cluster: %v; want UNAVAILABLE", err)
	}
}

// A configuration that keeps the virtual host and listener (an update of
// endpoints) keeps the routing table of the one before, and the route
// policies it has worked out; another virtual host gets a table of its
// own.
func TestRoutingTableKeptAcrossEndpointUpdates(t *testing.T) {
	route := &resources.Route{Prefix: "/", Action: resources.RouteActionRoute, Cluster: "A", RuntimeFraction: -1}
	vh := &resources.VirtualHost{Routes: []*resources.Route{route}}
	var last atomic.Pointer[dataplaneroute.Table]
	tableOf := func(cfg *channelConfig) *dataplaneroute.Table {
		t.Helper()
		if err := cfg.selectInto(&selection{Context: context.Background(), mdRead: true}, "/svc/M", 7, &last); err != nil {
			t.Fatal(err)
		}
		return cfg.table.Load()
	}
	first := tableOf(&channelConfig{gen: 1, snap: &watchers.Snapshot{VirtualHost: vh}})
	if second := tableOf(&channelConfig{gen: 2, snap: &watchers.Snapshot{VirtualHost: vh}}); second != first {
		t.Error("a configuration of the same virtual host made a new routing table")
	}
	other := &resources.VirtualHost{Routes: []*resources.Route{route}}
	if third := tableOf(&channelConfig{gen: 3, snap: &watchers.Snapshot{VirtualHost: other}}); third == first || !third.For(other, nil) {
		t.Error("a configuration of another virtual host kept the old routing table")
	}
}
