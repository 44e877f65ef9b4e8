package grpcxds

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"

	"github.com/goxds/xds/dataplane/cluster"
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
	src   *source
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
		cs:    newChannelState(&Builder{}),
	}
}

func (o *oneEndpointChange) apply(tb testing.TB, i int) {
	if o.src == nil { // the resolver's, one for its life
		o.src = &source{cs: o.cs, epoch: o.cs.epochNow(), logger: o.bal.logger}
	}
	st := configState(nil, &channelConfig{gen: uint64(i + 1), src: o.src, snap: o.snaps[i%2]})
	if err := o.bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: st}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkOneEndpointChange measures what one EDS change costs the
// channel at n clusters × m endpoints: the resolver state made from the
// snapshot (configState) and the balancer applying it.
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

// One cluster's endpoints changing costs the channel that cluster, not
// every cluster: the resolver state and the balancer's work for it must
// not grow with the configuration. Measured as the fastest of many
// updates (the least disturbed by a loaded machine) at 500 and at 20,000
// clusters: work per cluster would make the second 40 times the first.
func TestOneEndpointChangeCostsOneCluster(t *testing.T) {
	t.Parallel()
	fastest := func(n int) time.Duration {
		o := newOneEndpointChange(n, 1)
		defer o.bal.Close()
		o.apply(t, 0)
		best := time.Duration(1 << 62)
		for i := range 40 {
			start := time.Now()
			o.apply(t, i+1)
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := fastest(500), fastest(20000)
	t.Logf("one endpoint change: %v at 500 clusters, %v at 20,000", small, large)
	if large > 5*small+time.Millisecond {
		t.Errorf("one endpoint change: %v at 20,000 clusters, %v at 500; want the cost of the changed cluster, not of every cluster", large, small)
	}
}

// BenchmarkBalancerHeap measures what the balancer keeps for a
// configuration of n clusters × m endpoints whose SubConns are created
// (the channel's own SubConns, outside the balancer, are not counted):
// the live heap after a collection, per cluster and per endpoint, the
// snapshot itself excluded. With first-rpc no cluster has been called
// yet (ConnectOnFirstRPC): what an idle cluster costs.
func BenchmarkBalancerHeap(b *testing.B) {
	for _, c := range []struct {
		n, m     int
		firstRPC bool
	}{{10000, 3, false}, {1000, 100, false}, {10000, 3, true}, {100000, 3, true}} {
		name := fmt.Sprintf("%dx%d", c.n, c.m)
		if c.firstRPC {
			name += "-first-rpc" // every cluster idle: ConnectOnFirstRPC
		}
		b.Run(name, func(b *testing.B) {
			state := clustersStateOf(c.n, c.m)
			var kept uint64
			for range b.N {
				before := liveHeap()
				bal := newStuckBalancer(&stuckCC{}, realClock{}, time.Minute)
				bal.set.Configure(cluster.Config{FailoverTimeout: time.Minute, ConnectOnFirstRPC: c.firstRPC})
				if err := bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: state}); err != nil {
					b.Fatal(err)
				}
				kept += liveHeap() - before
				bal.Close()
			}
			kept /= uint64(b.N)
			b.ReportMetric(float64(kept)/float64(c.n), "B/cluster")
			b.ReportMetric(float64(kept)/float64(c.n*c.m), "B/endpoint")
		})
	}
}

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
