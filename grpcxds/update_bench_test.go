package grpcxds

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// BenchmarkOneEndpointChange measures what one EDS change costs the
// channel at n clusters: the resolver state made from the snapshot
// (stateOf) and the balancer applying it. Snapshots alternate between two
// that differ in one cluster's endpoint, sharing every other
// ClusterConfig, as the config tree makes them.
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			base := clustersState(n)
			snapA, _ := SnapshotFromState(base)
			m := make(map[string]*watchers.ClusterConfig, n)
			for name, cc := range snapA.Clusters.All() {
				m[name] = cc
			}
			c0 := *m["c0"]
			eps := *c0.Endpoints
			eps.Localities = []resources.Locality{{Weight: 1, Endpoints: []resources.Endpoint{{Addresses: []string{"10.255.0.1:80"}, Weight: 1}}}}
			c0.Endpoints = &eps
			m["c0"] = &c0
			snapB := &watchers.Snapshot{VirtualHost: snapA.VirtualHost, Clusters: watchers.NewClusterMap(m)}
			snaps := []*watchers.Snapshot{snapA, snapB}

			bal := newStuckBalancer(&stuckCC{}, realClock{}, time.Minute)
			defer bal.Close()
			cs := &channelState{}
			var cache endpointCache
			apply := func(i int) {
				st := stateOf(snaps[i%2], nil, bal.logger, nil, cs, uint64(i+1), &cache)
				if err := bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: st}); err != nil {
					b.Fatal(err)
				}
			}
			apply(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				apply(i + 1)
			}
		})
	}
}
