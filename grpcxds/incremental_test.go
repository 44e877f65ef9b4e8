package grpcxds

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// recordingCC is a ClientConn whose SubConns never connect, and which
// knows the addresses of the SubConns not shut down.
type recordingCC struct {
	stuckCC
	mu   sync.Mutex
	live map[string]bool
}

type recordingSC struct {
	balancer.SubConn
	cc   *recordingCC
	addr string
}

func (*recordingSC) Connect() {}
func (sc *recordingSC) Shutdown() {
	sc.cc.mu.Lock()
	defer sc.cc.mu.Unlock()
	delete(sc.cc.live, sc.addr)
}

func (cc *recordingCC) NewSubConn(addrs []resolver.Address, _ balancer.NewSubConnOptions) (balancer.SubConn, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.live[addrs[0].Addr] = true
	return &recordingSC{cc: cc, addr: addrs[0].Addr}, nil
}

func (cc *recordingCC) liveAddrs() []string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return slices.Sorted(maps.Keys(cc.live))
}

func edsConfig(name string, addrs ...string) *watchers.ClusterConfig {
	var eps []resources.Endpoint
	for _, a := range addrs {
		eps = append(eps, resources.Endpoint{Addresses: []string{a}, Weight: 1})
	}
	return &watchers.ClusterConfig{
		Name:      name,
		Cluster:   &resources.Cluster{Name: name, Kind: resources.ClusterKindEDS},
		Endpoints: &resources.Endpoints{Name: name, Localities: []resources.Locality{{Weight: 1, Endpoints: eps}}},
	}
}

// addrsOf returns the addresses of every priority of the balancer's
// cluster name, in order.
func addrsOf(b *xdsBalancer, name string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	info, _ := b.set.Info(name)
	for _, eps := range info.Priorities {
		for _, e := range eps {
			out = append(out, e.Addrs()[0])
		}
	}
	return out
}

// An update that keeps the routes looks only at the clusters whose
// ClusterConfig changed (ClusterMap.Changes), so what used to follow from
// looking at every cluster must follow from the change itself: an
// aggregate cluster is rebuilt when one of its leaves changes, the
// SubConn of an endpoint no cluster lists any more is shut down, and the
// in-flight counter of a leaf no cluster uses is forgotten while those in
// use are kept.
func TestUpdateOfOneClusterCostsItsUsers(t *testing.T) {
	t.Parallel()
	agg := &watchers.ClusterConfig{Name: "agg", Cluster: &resources.Cluster{Name: "agg", Kind: resources.ClusterKindAggregate}, Leaves: []string{"l1", "l2"}}
	vh := &resources.VirtualHost{Routes: []*resources.Route{
		{Action: resources.RouteActionRoute, Cluster: "agg"},
		{Action: resources.RouteActionRoute, Cluster: "plain"},
	}}
	snap := &watchers.Snapshot{VirtualHost: vh, Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{
		"agg": agg, "l1": edsConfig("l1", "10.0.0.1:80"), "l2": edsConfig("l2", "10.0.0.2:80"), "plain": edsConfig("plain", "10.0.0.3:80"),
	})}
	cc := &recordingCC{live: make(map[string]bool)}
	b := newStuckBalancer(&cc.stuckCC, &manualClock{now: time.Unix(1000, 0)}, time.Minute)
	b.cc = cc
	defer b.Close()
	apply := func(snap *watchers.Snapshot) {
		t.Helper()
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(snap)}}); err != nil {
			t.Fatal(err)
		}
	}
	apply(snap)
	if got, want := addrsOf(b, "agg"), []string{"10.0.0.1:80", "10.0.0.2:80"}; !slices.Equal(got, want) {
		t.Fatalf("aggregate cluster: endpoints %q, want %q", got, want)
	}
	// Only the first priority of each is wanted while it connects.
	if got, want := cc.liveAddrs(), []string{"10.0.0.1:80", "10.0.0.3:80"}; !slices.Equal(got, want) {
		t.Fatalf("SubConns %q, want %q", got, want)
	}
	b.mu.Lock()
	l2Counter := b.set.Counter("l2")
	b.mu.Unlock()

	// A leaf's endpoints change: the aggregate above it is rebuilt, and
	// the endpoint it no longer lists is shut down.
	snap = &watchers.Snapshot{VirtualHost: vh, Clusters: snap.Clusters.With("l1", edsConfig("l1", "10.0.0.9:80"))}
	apply(snap)
	if got, want := addrsOf(b, "agg"), []string{"10.0.0.9:80", "10.0.0.2:80"}; !slices.Equal(got, want) {
		t.Errorf("aggregate cluster after its leaf changed: endpoints %q, want %q", got, want)
	}
	if got, want := cc.liveAddrs(), []string{"10.0.0.3:80", "10.0.0.9:80"}; !slices.Equal(got, want) {
		t.Errorf("SubConns after the leaf changed: %q, want %q", got, want)
	}
	b.mu.Lock()
	kept := b.set.Pool().Lookup("10.0.0.1:80") != nil
	b.mu.Unlock()
	if kept {
		t.Error("the endpoint no cluster lists is still among the balancer's")
	}

	// The aggregate drops a leaf: its counter goes, the other's stays the
	// same counter (RPCs in flight are counted on it).
	snap = &watchers.Snapshot{VirtualHost: vh, Clusters: snap.Clusters.With("agg",
		&watchers.ClusterConfig{Name: "agg", Cluster: agg.Cluster, Leaves: []string{"l2"}})}
	apply(snap)
	if got, want := addrsOf(b, "agg"), []string{"10.0.0.2:80"}; !slices.Equal(got, want) {
		t.Errorf("aggregate cluster with one leaf: endpoints %q, want %q", got, want)
	}
	b.mu.Lock()
	l1, l2 := b.set.Counter("l1"), b.set.Counter("l2")
	b.mu.Unlock()
	if l1 != nil {
		t.Error("the in-flight counter of a leaf no cluster uses is kept")
	}
	if l2 == nil || l2 != l2Counter {
		t.Error("the in-flight counter of a leaf still in use was replaced")
	}
	// Its leaf changing no longer touches the aggregate.
	snap = &watchers.Snapshot{VirtualHost: vh, Clusters: snap.Clusters.With("l1", edsConfig("l1", "10.0.0.8:80"))}
	apply(snap)
	if got, want := addrsOf(b, "agg"), []string{"10.0.0.2:80"}; !slices.Equal(got, want) {
		t.Errorf("aggregate cluster after a former leaf changed: endpoints %q, want %q", got, want)
	}
}
