package watchers_test

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// walkTree is a tree of every kind of cluster, each named by a route: an
// EDS cluster, a LOGICAL_DNS cluster, and an aggregate of an EDS cluster.
// timeout sets the connect timeout of a, dns and agg, host the DNS
// cluster's host, prefix the path of the first route: changes that leave
// the tree's shape alone.
func walkTree(timeout time.Duration, host, prefix string) testutils.Resources {
	withTimeout := func(c *clusterv3.Cluster) *clusterv3.Cluster {
		c.ConnectTimeout = durationpb.New(timeout)
		return c
	}
	return testutils.Resources{
		Listeners: listeners(testutils.Listener("svc", "svc-route")),
		Routes: []*routev3.RouteConfiguration{routeConfig("svc-route", []string{"*"},
			route(prefix, "a"), route("/dns", "dns"), route("/agg", "agg"), route("/a-again", "a"))},
		Clusters: []*clusterv3.Cluster{
			withTimeout(testutils.Cluster("a", "")),
			withTimeout(testutils.LogicalDNSCluster("dns", host, 53)),
			withTimeout(testutils.AggregateCluster("agg", "c")),
			testutils.Cluster("c", ""),
		},
		Endpoints: []*endpointv3.ClusterLoadAssignment{
			testutils.ClusterLoadAssignment("a", "127.0.0.1", 1),
			testutils.ClusterLoadAssignment("c", "127.0.0.1", 2),
		},
	}
}

// Clusters arriving after the route configuration are resolved as they
// arrive: the first snapshot of a tree of leaf clusters walks each cluster
// once, when the route configuration names it, not once more when the last
// endpoints arrive.
func TestFirstSnapshotWalksEachClusterOnce(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		names := []string{"a", "b", "c", "d"}
		e.update(simpleTree("svc", "svc-route", names...))
		r := newRecorder(t)
		cancel, walked := watchers.WatchConfigTreeCounting(e.c, "svc", watchers.TreeOptions{}, r)
		t.Cleanup(cancel)
		s := r.nextUpdate()
		if s.Clusters.Len() != len(names) {
			t.Fatalf("first snapshot: %s, want clusters %v", describe(s), names)
		}
		if n := walked(); n != len(names) {
			t.Errorf("the first snapshot walked %d clusters, want %d (each once)", n, len(names))
		}
	})
}

// A change of clusters that leaves the tree's shape alone (an EDS
// cluster's settings, a LOGICAL_DNS cluster's address, an aggregate
// cluster's own settings) replaces the ClusterConfigs of those clusters
// and walks nothing; so does a route configuration whose routes name the
// same clusters. Every ClusterConfig that did not change keeps its
// pointer. Before the tree patched such changes, each walked every
// cluster.
func TestShapeKeepingChangesWalkNothing(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		e.update(walkTree(time.Second, "dns-1.example.com", "/a"))
		r := newRecorder(t)
		cancel, walked := watchers.WatchConfigTreeCounting(e.c, "svc", watchers.TreeOptions{}, r)
		t.Cleanup(cancel)
		s1 := r.nextUpdate()

		start := walked()
		e.update(walkTree(2*time.Second, "dns-2.example.com", "/a"))
		s2 := r.waitUpdate("the three changed clusters", func(s *watchers.Snapshot) bool {
			return s.Clusters.Get("a").Cluster != s1.Clusters.Get("a").Cluster &&
				s.Clusters.Get("dns").DNSAddress == "dns-2.example.com:53" &&
				s.Clusters.Get("agg").Cluster != s1.Clusters.Get("agg").Cluster
		})
		if n := walked() - start; n != 0 {
			t.Errorf("changing three clusters walked %d clusters, want 0", n)
		}
		a1, a2 := s1.Clusters.Get("a"), s2.Clusters.Get("a")
		if a2.Endpoints != a1.Endpoints || a2.Err != nil {
			t.Errorf("cluster a: endpoints %p, err %v; want the unchanged endpoints %p", a2.Endpoints, a2.Err, a1.Endpoints)
		}
		if agg := s2.Clusters.Get("agg"); len(agg.Leaves) != 1 || agg.Leaves[0] != "c" || agg.Err != nil {
			t.Errorf("cluster agg: %s, want leaves [c]", describeCluster(agg))
		}
		if s2.Clusters.Get("c") != s1.Clusters.Get("c") {
			t.Error("cluster c changed pointer, though nothing of it changed")
		}
		if s2.RouteConfig != s1.RouteConfig || s2.Listener != s1.Listener {
			t.Error("the listener or route configuration changed pointer, though neither changed")
		}

		start = walked()
		e.update(walkTree(2*time.Second, "dns-2.example.com", "/b"))
		s3 := r.waitUpdate("the new route configuration", func(s *watchers.Snapshot) bool {
			return s.RouteConfig != s2.RouteConfig
		})
		if n := walked() - start; n != 0 {
			t.Errorf("a route configuration naming the same clusters walked %d clusters, want 0", n)
		}
		if s3.Clusters.Len() != s2.Clusters.Len() {
			t.Errorf("%d clusters after the route change, want %d", s3.Clusters.Len(), s2.Clusters.Len())
		}
		for name, cc := range s2.Clusters.All() {
			if s3.Clusters.Get(name) != cc {
				t.Errorf("cluster %s changed pointer with the route configuration", name)
			}
		}
		if got := s3.VirtualHost.Routes[0].Prefix; got != "/b" {
			t.Errorf("first route's prefix %q, want /b", got)
		}
	})
}

// While the tree waits for some clusters' endpoints, a cluster it already
// resolved changes (same kind, new address): the first snapshot, which the
// arrival of the missing endpoints completes without walking the tree,
// has the cluster's latest version.
func TestClusterChangingWhileTheTreeWaits(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		tree := func(host string, withEndpoints bool) testutils.Resources {
			res := testutils.Resources{
				Listeners: listeners(testutils.Listener("svc", "svc-route")),
				Routes: []*routev3.RouteConfiguration{routeConfig("svc-route", []string{"*"},
					route("/dns", "dns"), route("/b", "b"))},
				Clusters: []*clusterv3.Cluster{testutils.LogicalDNSCluster("dns", host, 53), testutils.Cluster("b", "")},
			}
			if withEndpoints {
				res.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment("b", "127.0.0.1", 1)}
			}
			return res
		}
		e.update(tree("dns-1.example.com", false))
		r := newRecorder(t)
		cancel, walked := watchers.WatchConfigTreeCounting(e.c, "svc", watchers.TreeOptions{}, r)
		t.Cleanup(cancel)
		preWatch(t, e.c, resources.ClusterType, "dns", "b")

		// Once a watcher of the same client has the new address, so has
		// the tree: callbacks for one response run before the next is read.
		seen := make(chan struct{})
		stop := client.Watch(e.c, resources.ClusterType, "dns", client.WatcherFuncs[*resources.Cluster]{OnUpdate: func(c *resources.Cluster) {
			if c.DNSHost == "dns-2.example.com" {
				close(seen)
			}
		}})
		t.Cleanup(stop)
		e.update(tree("dns-2.example.com", false))
		select {
		case <-seen:
		case <-time.After(testTimeout):
			t.Fatal("the new address of cluster dns did not arrive")
		}

		e.update(tree("dns-2.example.com", true))
		s := r.nextUpdate()
		if got := s.Clusters.Get("dns").DNSAddress; got != "dns-2.example.com:53" {
			t.Errorf("first snapshot: cluster dns at %q, want dns-2.example.com:53; %s", got, describe(s))
		}
		if cc := s.Clusters.Get("b"); cc == nil || cc.Endpoints == nil {
			t.Errorf("first snapshot: cluster b without endpoints; %s", describe(s))
		}
		if n := walked(); n != 2 {
			t.Errorf("the first snapshot walked %d clusters, want 2 (each once)", n)
		}
	})
}
