package watchers_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// aggTree is svc → svc-route, one route per routeClusters entry, with the
// given clusters; every EDS cluster among them gets one endpoint.
func aggTree(routeClusters []string, clusters ...*clusterv3.Cluster) testutils.Resources {
	var routes []*routev3.Route
	for i, c := range routeClusters {
		routes = append(routes, route(fmt.Sprintf("/%d", i), c))
	}
	res := testutils.Resources{
		Listeners: listeners(testutils.Listener("svc", "svc-route")),
		Routes:    []*routev3.RouteConfiguration{routeConfig("svc-route", []string{"*"}, routes...)},
		Clusters:  clusters,
	}
	for _, c := range clusters {
		if c.GetType() == clusterv3.Cluster_EDS && c.GetClusterType() == nil {
			res.Endpoints = append(res.Endpoints, testutils.ClusterLoadAssignment(c.GetName(), "127.0.0.1", 8080))
		}
	}
	return res
}

// chain returns aggregate clusters c1 → c2 → ... → c(n-1) and the EDS
// cluster cn: a tree n clusters deep.
func chain(n int) []*clusterv3.Cluster {
	var out []*clusterv3.Cluster
	for i := 1; i < n; i++ {
		out = append(out, testutils.AggregateCluster(fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", i+1)))
	}
	return append(out, testutils.Cluster(fmt.Sprintf("c%d", n), ""))
}

func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func TestAggregateClusters(t *testing.T) {
	tests := []struct {
		name  string
		res   testutils.Resources
		check func(t *testing.T, s *watchers.Snapshot)
		// wantCDS are the clusters the server must see subscribed.
		wantCDS []string
	}{{
		name: "cycle",
		res: aggTree([]string{"A"},
			testutils.AggregateCluster("A", "B"),
			testutils.AggregateCluster("B", "leaf", "A"),
			testutils.Cluster("leaf", "")),
		check: func(t *testing.T, s *watchers.Snapshot) {
			for _, n := range []string{"A", "B"} {
				if err := s.Clusters.Get(n).Err; !errors.Is(err, watchers.ErrAggregateCycle) {
					t.Errorf("%s.Err = %v, want ErrAggregateCycle", n, err)
				}
			}
			if err := s.Clusters.Get("A").Err; err != nil && !strings.Contains(err.Error(), "A → B → A") {
				t.Errorf("A.Err = %v, want it to show the cycle A → B → A", err)
			}
			if s.Clusters.Get("A").Cluster == nil {
				t.Error("A.Cluster is nil; the cluster itself is fine")
			}
		},
		wantCDS: []string{"A", "B", "leaf"},
	}, {
		name: "diamond keeps priority order, each leaf once",
		res: aggTree([]string{"top"},
			testutils.AggregateCluster("top", "left", "right"),
			testutils.AggregateCluster("left", "d1", "d2"),
			testutils.AggregateCluster("right", "d2", "dns", "d1"),
			testutils.Cluster("d1", ""),
			testutils.Cluster("d2", ""),
			testutils.LogicalDNSCluster("dns", "dns.example.com", 53)),
		check: func(t *testing.T, s *watchers.Snapshot) {
			for n, want := range map[string][]string{
				"top":   {"d1", "d2", "dns"},
				"left":  {"d1", "d2"},
				"right": {"d2", "dns", "d1"},
			} {
				if got := s.Clusters.Get(n).Leaves; !slices.Equal(got, want) {
					t.Errorf("%s.Leaves = %v, want %v", n, got, want)
				}
			}
		},
		wantCDS: []string{"top", "left", "right", "d1", "d2", "dns"},
	}, {
		name: "depth 16 is allowed",
		res:  aggTree([]string{"c1"}, chain(16)...),
		check: func(t *testing.T, s *watchers.Snapshot) {
			if cc := s.Clusters.Get("c1"); cc.Err != nil || !slices.Equal(cc.Leaves, []string{"c16"}) {
				t.Errorf("c1: Leaves %v, Err %v; want [c16] and no error", cc.Leaves, cc.Err)
			}
			if s.Clusters.Len() != 16 {
				t.Errorf("snapshot has %d clusters, want 16: %v", s.Clusters.Len(), clusterNames(s))
			}
		},
		wantCDS: names("c", 1, 16),
	}, {
		name: "depth 17 is an error, and c17 is not watched",
		res:  aggTree([]string{"c1"}, chain(17)...),
		check: func(t *testing.T, s *watchers.Snapshot) {
			if err := s.Clusters.Get("c1").Err; !errors.Is(err, watchers.ErrAggregateTooDeep) {
				t.Errorf("c1.Err = %v, want ErrAggregateTooDeep", err)
			}
			if s.Clusters.Len() != 1 {
				t.Errorf("snapshot has clusters %v, want only c1", clusterNames(s))
			}
		},
		wantCDS: names("c", 1, 16),
	}, {
		name: "depth counts from each route",
		// c1..c17 is too deep from c1 but not from c2, which a second
		// route names: c2 and everything below it are usable.
		res: aggTree([]string{"c1", "c2"}, chain(17)...),
		check: func(t *testing.T, s *watchers.Snapshot) {
			if err := s.Clusters.Get("c1").Err; !errors.Is(err, watchers.ErrAggregateTooDeep) {
				t.Errorf("c1.Err = %v, want ErrAggregateTooDeep", err)
			}
			if cc := s.Clusters.Get("c2"); cc.Err != nil || !slices.Equal(cc.Leaves, []string{"c17"}) {
				t.Errorf("c2: Leaves %v, Err %v; want [c17] and no error", cc.Leaves, cc.Err)
			}
		},
		wantCDS: names("c", 1, 17),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachServerVariant(t, func(t *testing.T, v variant) {
				e := newEnv(t, v, longExpiry)
				e.update(tc.res)
				r, _ := e.watch("svc", watchers.TreeOptions{})
				s := r.nextUpdate()
				tc.check(t, s)
				e.subs.waitNames(t, cdsURL, tc.wantCDS...)
				barrier(t, e.c)
				r.noMore()
			})
		})
	}
}

// An aggregate cluster whose leaf's endpoints change gets a new snapshot
// in which only that leaf's ClusterConfig is new.
func TestAggregateLeafChange(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		res := aggTree([]string{"agg"},
			testutils.AggregateCluster("agg", "a", "b"),
			testutils.Cluster("a", ""),
			testutils.Cluster("b", ""))
		e.update(res)
		r, _ := e.watch("svc", watchers.TreeOptions{})
		s1 := r.nextUpdate()

		res.Endpoints = []*endpointv3.ClusterLoadAssignment{
			testutils.ClusterLoadAssignment("a", "127.0.0.1", 8080),
			testutils.ClusterLoadAssignment("b", "127.0.0.9", 9),
		}
		e.update(res)
		s2 := r.nextUpdate()
		if s2.Clusters.Get("agg") != s1.Clusters.Get("agg") || s2.Clusters.Get("a") != s1.Clusters.Get("a") {
			t.Error("unchanged ClusterConfigs got new pointers")
		}
		if got := describeCluster(s2.Clusters.Get("b")); got != "b:eds(b)[127.0.0.9:9]" {
			t.Errorf("b is %s", got)
		}
	})
}
