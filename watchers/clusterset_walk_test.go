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
		// tree holds c (the test's own watch of c is told after the
		// tree's, on the same goroutine), the endpoints come.
		got := make(chan struct{})
		cancelC := client.Watch(e.c, resources.ClusterType, "c", client.WatcherFuncs[*resources.Cluster]{
			OnUpdate: func(*resources.Cluster) { close(got) },
		})
		defer cancelC()
		res.Routes = []*routev3.RouteConfiguration{routeConfig("svc-route", []string{"*"},
			route("/a", "a"), route("/b", "b"), route("/c", "c"))}
		res.Clusters = append(res.Clusters, testutils.Cluster("c", "shared"))
		e.update(res)
		select {
		case <-got:
		case <-time.After(testTimeout):
			t.Fatal("cluster c did not arrive")
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
