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

// setTree is svc → svc-route → routes to a and b, with a cluster x and
// its endpoints that no route names; timeout is x's and a's connect
// timeout, prefix the path of the route to a: changes that keep the
// tree's shape.
func setTree(timeout time.Duration, prefix string) testutils.Resources {
	withTimeout := func(c *clusterv3.Cluster) *clusterv3.Cluster {
		c.ConnectTimeout = durationpb.New(timeout)
		return c
	}
	return testutils.Resources{
		Listeners: listeners(testutils.Listener("svc", "svc-route")),
		Routes: []*routev3.RouteConfiguration{routeConfig("svc-route", []string{"*"},
			route(prefix, "a"), route("/b", "b"))},
		Clusters: []*clusterv3.Cluster{
			withTimeout(testutils.Cluster("a", "")),
			testutils.Cluster("b", ""),
			withTimeout(testutils.Cluster("x", "")),
		},
		Endpoints: []*endpointv3.ClusterLoadAssignment{
			testutils.ClusterLoadAssignment("a", "127.0.0.1", 1),
			testutils.ClusterLoadAssignment("b", "127.0.0.1", 2),
			testutils.ClusterLoadAssignment("x", "127.0.0.1", 3),
		},
	}
}

// A change of the ClusterSet walks the tree once (the pass its nudge
// runs); the set cluster and its endpoints arriving afterwards join the
// snapshot without a walk, and so do the changes that keep the tree's
// shape, whether the cluster is the set's, the routes' or both.
func TestClusterSetWalks(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		e.update(setTree(time.Second, "/a"))
		set := new(watchers.ClusterSet)
		r := newRecorder(t)
		cancel, walked := watchers.WatchConfigTreeCounting(e.c, "svc", watchers.TreeOptions{Clusters: set}, r)
		t.Cleanup(cancel)
		s1 := r.nextUpdate()

		// The nudge's pass walks a, b and x; x and then its endpoints
		// arrive after it, since it subscribed x.
		start := walked()
		releaseX := set.Add("x")
		s2 := r.waitUpdate("cluster x with its endpoints", func(s *watchers.Snapshot) bool {
			cc := s.Clusters.Get("x")
			return cc != nil && cc.Endpoints != nil
		})
		checkConsistent(t, s2)
		if n := walked() - start; n != 3 {
			t.Errorf("adding x to the set walked %d clusters, want 3 (the nudge's pass alone)", n)
		}
		for _, name := range []string{"a", "b"} {
			if s2.Clusters.Get(name) != s1.Clusters.Get(name) {
				t.Errorf("cluster %s changed pointer when x joined", name)
			}
		}

		// x's settings, then the route configuration: patched.
		start = walked()
		e.update(setTree(2*time.Second, "/a"))
		s3 := r.waitUpdate("the changed clusters", func(s *watchers.Snapshot) bool {
			return s.Clusters.Get("x").Cluster != s2.Clusters.Get("x").Cluster &&
				s.Clusters.Get("a").Cluster != s2.Clusters.Get("a").Cluster
		})
		if got, want := s3.Clusters.Get("x").Endpoints, s2.Clusters.Get("x").Endpoints; got != want {
			t.Errorf("cluster x: endpoints %p, want the unchanged %p", got, want)
		}
		e.update(setTree(2*time.Second, "/a2"))
		s4 := r.waitUpdate("the new route configuration", func(s *watchers.Snapshot) bool {
			return s.RouteConfig != s3.RouteConfig
		})
		if n := walked() - start; n != 0 {
			t.Errorf("shape-keeping changes walked %d clusters, want 0", n)
		}
		if s4.Clusters.Get("x") != s3.Clusters.Get("x") {
			t.Error("cluster x changed with the route configuration")
		}

		// a, a route's cluster, joins the set too: the nudge's pass
		// walks b and x (a once, from its route) and finds nothing new.
		start = walked()
		releaseA := set.Add("a")
		barrier(t, e.c)
		if n := walked() - start; n != 3 {
			t.Errorf("adding a route's cluster to the set walked %d clusters, want 3", n)
		}
		r.noMore()
		// A change of a, now the routes' and the set's, is patched.
		start = walked()
		e.update(setTree(3*time.Second, "/a2"))
		r.waitUpdate("the changed clusters", func(s *watchers.Snapshot) bool {
			return s.Clusters.Get("x").Cluster != s4.Clusters.Get("x").Cluster &&
				s.Clusters.Get("a").Cluster != s4.Clusters.Get("a").Cluster
		})
		if n := walked() - start; n != 0 {
			t.Errorf("changing a and x walked %d clusters, want 0", n)
		}

		// Releasing a keeps it (a route names it); releasing x drops it.
		releaseA()
		barrier(t, e.c)
		r.noMore()
		releaseX()
		s5 := r.waitUpdate("cluster x gone", func(s *watchers.Snapshot) bool { return s.Clusters.Get("x") == nil })
		checkConsistent(t, s5)
		if s5.Clusters.Len() != 2 {
			t.Errorf("after x's release: %s, want clusters a and b", describe(s5))
		}
		e.subs.waitNames(t, cdsURL, "a", "b")
		e.subs.waitNames(t, edsURL, "a", "b")
	})
}

// A route's cluster needing endpoints a set cluster already waits for
// waits for them as well: the snapshot that brings the route's cluster has
// its endpoints. Were the need of the set cluster, which holds nothing
// back, left as it was, the route's cluster arriving would complete a
// snapshot without it.
func TestClusterSetSharedEndpoints(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		// s fetches the endpoints "shared", which the server does not
		// have yet.
		res := setTree(time.Second, "/a")
		res.Clusters = append(res.Clusters, testutils.Cluster("s", "shared"))
		e.update(res)
		set := new(watchers.ClusterSet)
		defer set.Add("s")()
		r, _ := e.watch("svc", watchers.TreeOptions{Clusters: set})
		r.nextUpdate()
		e.subs.waitSubscribed(t, edsURL, "shared")

		// A route now sends to c, which fetches "shared" too. Once the
		// tree holds the route and c, the endpoints come. The test's own
		// watches tell when both reached the client; on per-type streams
		// either may come first, and the tree's work on them is done at
		// the barrier, which drains the client's callbacks.
		gotC, gotRoute := make(chan struct{}), make(chan struct{})
		cancelC := client.Watch(e.c, resources.ClusterType, "c", client.WatcherFuncs[*resources.Cluster]{
			OnUpdate: func(*resources.Cluster) { close(gotC) },
		})
		defer cancelC()
		var routeSeen bool
		cancelRoute := client.Watch(e.c, resources.RouteConfigType, "svc-route", client.WatcherFuncs[*resources.RouteConfig]{
			OnUpdate: func(rc *resources.RouteConfig) {
				if !routeSeen && len(rc.VirtualHosts) == 1 && len(rc.VirtualHosts[0].Routes) == 3 {
					routeSeen = true
					close(gotRoute)
				}
			},
		})
		defer cancelRoute()
		res.Routes = []*routev3.RouteConfiguration{routeConfig("svc-route", []string{"*"},
			route("/a", "a"), route("/b", "b"), route("/c", "c"))}
		res.Clusters = append(res.Clusters, testutils.Cluster("c", "shared"))
		e.update(res)
		for what, got := range map[string]chan struct{}{"cluster c": gotC, "the route to c": gotRoute} {
			select {
			case <-got:
			case <-time.After(testTimeout):
				t.Fatalf("%s did not arrive", what)
			}
		}
		barrier(t, e.c)
		res.Endpoints = append(res.Endpoints, testutils.ClusterLoadAssignment("shared", "127.0.0.1", 7))
		e.update(res)

		s := r.nextUpdate()
		checkConsistent(t, s)
		for _, name := range []string{"c", "s"} {
			if cc := s.Clusters.Get(name); cc == nil || cc.Endpoints == nil {
				t.Errorf("the first snapshot after c's route: %s, want %s with the endpoints", describe(s), name)
			}
		}
	})
}

// An aggregate cluster of the set waits for its children like a route's,
// though its children's arrival does not hold the snapshot back: a child
// that the set names too arriving brings the aggregate with its leaves,
// not the child alone.
func TestClusterSetAggregate(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		// agg's child x is not on the server yet.
		res := setTree(time.Second, "/a")
		res.Clusters = append(res.Clusters[:2], testutils.AggregateCluster("agg", "x"))
		e.update(res)
		set := new(watchers.ClusterSet)
		defer set.Add("agg")()
		defer set.Add("x")()
		got := make(chan struct{})
		cancelAgg := client.Watch(e.c, resources.ClusterType, "agg", client.WatcherFuncs[*resources.Cluster]{
			OnUpdate: func(*resources.Cluster) { close(got) },
		})
		defer cancelAgg()
		r, _ := e.watch("svc", watchers.TreeOptions{Clusters: set})
		select {
		case <-got:
		case <-time.After(testTimeout):
			t.Fatal("cluster agg did not arrive")
		}
		barrier(t, e.c)
		s := r.waitUpdate("clusters a and b", func(s *watchers.Snapshot) bool { return s.Clusters.Len() == 2 })
		if s.Clusters.Get("agg") != nil {
			t.Fatalf("snapshot %s: agg without its child", describe(s))
		}

		e.update(setTree(time.Second, "/a"))
		s = r.waitUpdate("aggregate agg with its leaf x", func(s *watchers.Snapshot) bool {
			return s.Clusters.Get("agg") != nil
		})
		checkConsistent(t, s)
		if cc := s.Clusters.Get("agg"); len(cc.Leaves) != 1 || cc.Leaves[0] != "x" {
			t.Errorf("cluster agg: %s, want leaves [x]", describeCluster(cc))
		}
		if cc := s.Clusters.Get("x"); cc == nil || cc.Endpoints == nil {
			t.Errorf("snapshot %s: want x with its endpoints", describe(s))
		}
	})
}
