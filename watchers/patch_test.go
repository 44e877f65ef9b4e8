package watchers_test

import (
	"errors"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// A change of endpoints in a complete tree replaces the ClusterConfigs of
// exactly the clusters that fetch them (two clusters may share one EDS
// service name; a leaf of an aggregate is one of them) and keeps every
// other pointer, without a walk of the tree; once the tree changes shape,
// the next change of endpoints reaches the clusters of the new shape.
func TestEndpointsChangeReplacesOnlyItsUsers(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		cla := func(name string, port uint32) *endpointv3.ClusterLoadAssignment {
			return testutils.ClusterLoadAssignment(name, "127.0.0.1", port)
		}
		res := testutils.Resources{
			Listeners: listeners(testutils.Listener("svc", "svc-route")),
			Routes: []*routev3.RouteConfiguration{routeConfig("svc-route", []string{"*"},
				route("/a", "a"), route("/b", "b"), route("/c", "c"), route("/agg", "agg"))},
			Clusters: []*clusterv3.Cluster{
				testutils.Cluster("a", "shared"),
				testutils.Cluster("b", "shared"),
				testutils.Cluster("c", ""),
				testutils.AggregateCluster("agg", "c", "d"),
				testutils.Cluster("d", ""),
			},
			Endpoints: []*endpointv3.ClusterLoadAssignment{cla("shared", 1), cla("c", 2), cla("d", 3)},
		}
		e.update(res)
		r, _ := e.watch("svc", watchers.TreeOptions{})
		s1 := r.nextUpdate()
		port := func(s *watchers.Snapshot, cluster string) string {
			t.Helper()
			cc := s.Clusters.Get(cluster)
			if cc == nil || cc.Endpoints == nil {
				t.Fatalf("cluster %s has no endpoints in %s", cluster, describe(s))
			}
			return strings.TrimPrefix(cc.Endpoints.Localities[0].Endpoints[0].Addresses[0], "127.0.0.1:")
		}
		same := func(prev, next *watchers.Snapshot, clusters ...string) {
			t.Helper()
			if prev.Listener != next.Listener || prev.RouteConfig != next.RouteConfig || prev.VirtualHost != next.VirtualHost {
				t.Errorf("listener, route config or virtual host changed with endpoints only")
			}
			for _, name := range clusters {
				if prev.Clusters.Get(name) != next.Clusters.Get(name) {
					t.Errorf("ClusterConfig of %s is new, but its cluster and endpoints did not change", name)
				}
			}
		}

		// Shared endpoints: both their clusters change, nothing else.
		res.Endpoints[0] = cla("shared", 11)
		e.update(res)
		s2 := r.nextUpdate()
		if port(s2, "a") != "11" || port(s2, "b") != "11" {
			t.Errorf("after the change of shared: a on %s, b on %s, want 11", port(s2, "a"), port(s2, "b"))
		}
		same(s1, s2, "c", "d", "agg")

		// A leaf of the aggregate: the leaf changes, the aggregate's own
		// ClusterConfig (its leaves) does not.
		res.Endpoints[2] = cla("d", 13)
		e.update(res)
		s3 := r.nextUpdate()
		if port(s3, "d") != "13" {
			t.Errorf("d on %s, want 13", port(s3, "d"))
		}
		same(s2, s3, "a", "b", "c", "agg")
		prev := s3

		if v.name == "delta" {
			// Only delta can delete endpoints (SotW leaves EDS absence to
			// the does-not-exist timer): the users carry the error, then
			// recover.
			res.Endpoints = []*endpointv3.ClusterLoadAssignment{cla("c", 2), cla("d", 13)}
			e.update(res)
			s4 := r.nextUpdate()
			for _, name := range []string{"a", "b"} {
				if cc := s4.Clusters.Get(name); cc.Err == nil || !errors.Is(cc.Err, client.ErrResourceNotFound) || cc.Endpoints != nil {
					t.Errorf("after deleting shared, %s: Err %v, Endpoints %v; want ErrResourceNotFound and none", name, cc.Err, cc.Endpoints)
				}
			}
			same(s3, s4, "c", "d", "agg")
			res.Endpoints = append(res.Endpoints, cla("shared", 14))
			e.update(res)
			s5 := r.nextUpdate()
			if port(s5, "a") != "14" || s5.Clusters.Get("a").Err != nil || s5.Clusters.Get("b").Err != nil {
				t.Errorf("after restoring shared: %s", describe(s5))
			}
			same(s4, s5, "c", "d", "agg")
			prev = s5
		}

		// The tree changes shape: c moves to the shared endpoints. A later
		// change of those reaches c too.
		res.Clusters[2] = testutils.Cluster("c", "shared")
		e.update(res)
		s6 := r.waitUpdate("c on the shared endpoints", func(s *watchers.Snapshot) bool {
			return s.Clusters.Get("c").Cluster != prev.Clusters.Get("c").Cluster && s.Clusters.Get("c").Endpoints != nil &&
				s.Clusters.Get("c").Endpoints.Name == "shared"
		})
		for i, c := range res.Endpoints {
			if c.GetClusterName() == "shared" {
				res.Endpoints[i] = cla("shared", 15)
			}
		}
		e.update(res)
		s7 := r.nextUpdate()
		for _, name := range []string{"a", "b", "c"} {
			if got := port(s7, name); got != "15" {
				t.Errorf("after the last change of shared, %s on %s, want 15", name, got)
			}
		}
		same(s6, s7, "d", "agg")
		barrier(t, e.c)
		r.noMore()
	})
}
