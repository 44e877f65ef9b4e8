package grpcxds

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// oneEndpointChange is a channel fed, in turn, two snapshots of n clusters
// of m endpoints that differ in one cluster's endpoints, the second made
// from the first as the config tree makes it (ClusterMap.With: every other
// ClusterConfig and every untouched shard shared). apply(i) hands the
// channel the i'th: the resolver state made of the snapshot, and the
// balancer applying it.
type oneEndpointChange struct {
	snaps []*watchers.Snapshot
	bal   *xdsBalancer
	cs    *channelState
}

func newOneEndpointChange(n, m int) *oneEndpointChange {
	snapA, _ := SnapshotFromState(clustersStateOf(n, m))
	c0 := *snapA.Clusters.Get("c0")
	eps := *c0.Endpoints
	eps.Localities = []resources.Locality{{Weight: 1, Endpoints: []resources.Endpoint{{Addresses: []string{"10.255.0.1:80"}, Weight: 1}}}}
	c0.Endpoints = &eps
	snapB := &watchers.Snapshot{VirtualHost: snapA.VirtualHost, Clusters: snapA.Clusters.With("c0", &c0)}
	return &oneEndpointChange{
		snaps: []*watchers.Snapshot{snapA, snapB},
		bal:   newStuckBalancer(&stuckCC{}, realClock{}, time.Minute),
		cs:    &channelState{},
	}
}

func (o *oneEndpointChange) apply(tb testing.TB, i int) {
	st := stateOf(o.snaps[i%2], nil, o.bal.logger, nil, o.cs, uint64(i+1))
	if err := o.bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: st}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkOneEndpointChange measures what one EDS change costs the
// channel at n clusters × m endpoints: the resolver state made from the
// snapshot (stateOf) and the balancer applying it.
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, c := range []struct{ n, m int }{{1000, 3}, {10000, 3}, {1000, 100}} {
		b.Run(fmt.Sprintf("%dx%d", c.n, c.m), func(b *testing.B) {
			o := newOneEndpointChange(c.n, c.m)
			defer o.bal.Close()
			o.apply(b, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				o.apply(b, i+1)
			}
		})
	}
}
