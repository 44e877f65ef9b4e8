package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// BenchmarkWatch10kInCallback: one callback starts 10,000 endpoint watches,
// as the config tree does when the route configuration names 10,000 clusters
// or when their clusters arrive: what the client's watch registry costs per
// watch (lock, cache entry, watcher record, pending subscription), the
// callback alone timed. Unlike BenchmarkWatch10kNames, no flush runs
// between the watches: it waits for the callback, as in the tree.
func BenchmarkWatch10kInCallback(b *testing.B) {
	names := make([]string, benchClusters)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
	}
	trigger := clusterAnys(1, "")
	var w nopEndpointsWatcher
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		bc := &benchClient{b: b, handler: make(chan transport.Handler, 1)}
		c, err := client.New(&bootstrap.Config{
			Servers: []bootstrap.ServerConfig{{ServerURI: "bench.invalid:443",
				ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}}, APIType: bootstrap.APITypeAggregatedGRPC}},
			Node: bootstrap.Node{ID: "bench"},
		}, client.Options{TransportBuilder: bc, WatchExpiry: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		bc.c = c // closed below, not by b.Cleanup: a client per round
		client.WatchCluster(bc.c, "cluster-00000", client.WatcherFuncs[*resources.Cluster]{
			OnUpdate: func(*resources.Cluster) {
				b.StartTimer()
				for _, name := range names {
					client.WatchEndpoints(bc.c, name, &w)
				}
				b.StopTimer()
			},
		})
		bc.apply(&transport.Response{TypeURL: resources.ClusterTypeURL, Version: "1", Resources: trigger})
		bc.c.Close()
		b.StartTimer()
	}
}

// nopEndpointsWatcher ignores its events; a pointer, so that passing it
// as a Watcher allocates nothing, as the tree's watches do not.
type nopEndpointsWatcher struct{}

func (*nopEndpointsWatcher) Update(*resources.Endpoints) {}
func (*nopEndpointsWatcher) ResourceError(error)         {}
func (*nopEndpointsWatcher) AmbientError(error)          {}
