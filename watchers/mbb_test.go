package watchers_test

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// withEDS adds EDS clusters named like their endpoints, one endpoint each
// on 127.0.0.1:8080, as simpleTree makes them.
func withEDS(res testutils.Resources, names ...string) testutils.Resources {
	for _, n := range names {
		res.Clusters = append(res.Clusters, testutils.Cluster(n, n)) // as simpleTree
		res.Endpoints = append(res.Endpoints, testutils.ClusterLoadAssignment(n, "127.0.0.1", 8080))
	}
	return res
}

func eds(name string) string { return name + ":eds(" + name + ")[127.0.0.1:8080]" }

// Make-before-break: each change of the tree's shape leads to exactly one
// new snapshot, the complete new tree, never a mix; and the server sees
// the new parts subscribed before the old ones are dropped.
func TestMakeBeforeBreak(t *testing.T) {
	inline := func(rcName, cluster string) *listenerv3.Listener {
		return testutils.ListenerInlineRoute("svc", routeConfig(rcName, []string{"*"}, route("/", cluster)))
	}
	tests := []struct {
		name  string
		steps []testutils.Resources
		want  []string // the one snapshot after each step
	}{{
		name: "route switches cluster",
		steps: []testutils.Resources{
			withEDS(simpleTree("svc", "svc-route", "a"), "b"),
			withEDS(simpleTree("svc", "svc-route", "b"), "a"),
		},
		want: []string{"svc/svc-route " + eds("a"), "svc/svc-route " + eds("b")},
	}, {
		name: "weighted route gains a branch",
		steps: []testutils.Resources{
			withEDS(simpleTree("svc", "svc-route", "a"), "b"),
			simpleTree("svc", "svc-route", "a", "b"),
		},
		want: []string{"svc/svc-route " + eds("a"), "svc/svc-route " + eds("a") + " " + eds("b")},
	}, {
		name: "listener switches route config",
		steps: []testutils.Resources{
			withRoutes(withEDS(simpleTree("svc", "r1", "a"), "b"), testutils.RouteConfig("r2", "*", "b")),
			withRoutes(withEDS(simpleTree("svc", "r2", "b"), "a"), testutils.RouteConfig("r1", "*", "a")),
		},
		want: []string{"svc/r1 " + eds("a"), "svc/r2 " + eds("b")},
	}, {
		name: "RDS to inline and back",
		steps: []testutils.Resources{
			simpleTree("svc", "svc-route", "a"),
			withListener(simpleTree("svc", "svc-route", "a"), inline("inline", "a")),
			simpleTree("svc", "svc-route", "a"),
		},
		want: []string{"svc/svc-route " + eds("a"), "svc/inline " + eds("a"), "svc/svc-route " + eds("a")},
	}, {
		name: "inline to RDS with another cluster",
		steps: []testutils.Resources{
			withEDS(testutils.Resources{Listeners: listeners(inline("inline", "a"))}, "a", "b"),
			withEDS(simpleTree("svc", "svc-route", "b"), "a"),
		},
		want: []string{"svc/inline " + eds("a"), "svc/svc-route " + eds("b")},
	}, {
		name: "cluster switches endpoints",
		steps: []testutils.Resources{
			clusterWithService("a", "a1", "a2"),
			clusterWithService("a", "a2", "a1"),
		},
		want: []string{"svc/svc-route a:eds(a1)[127.0.0.1:1]", "svc/svc-route a:eds(a2)[127.0.0.1:2]"},
	}, {
		name: "aggregate switches children",
		steps: []testutils.Resources{
			withAggregate(withEDS(simpleTree("svc", "svc-route", "agg"), "x", "y"), "agg", "x"),
			withAggregate(withEDS(simpleTree("svc", "svc-route", "agg"), "x", "y"), "agg", "y"),
		},
		want: []string{"svc/svc-route agg:agg[x] " + eds("x"), "svc/svc-route agg:agg[y] " + eds("y")},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachServerVariant(t, func(t *testing.T, v variant) {
				e := newEnv(t, v, longExpiry)
				r, _ := e.watch("svc", watchers.TreeOptions{Authority: "svc"})
				var prev *watchers.Snapshot
				for i, res := range tc.steps {
					mark := e.subs.mark()
					e.update(res)
					s := r.nextUpdate()
					if got := describe(s); got != tc.want[i] {
						t.Fatalf("step %d: first snapshot %s, want %s", i, got, tc.want[i])
					}
					if prev != nil {
						checkMakeBeforeBreak(t, e.subs, mark, prev, s)
					}
					prev = s
				}
				barrier(t, e.c)
				r.noMore()
			})
		})
	}
}

// checkMakeBeforeBreak waits until the server sees exactly the names cur
// uses, and checks that every name cur added was subscribed before any
// name it dropped was unsubscribed.
func checkMakeBeforeBreak(t *testing.T, subs *subsLog, mark int, prev, cur *watchers.Snapshot) {
	t.Helper()
	before, after := usedNames(prev), usedNames(cur)
	for _, typ := range allTypes {
		subs.waitNames(t, typ, after[typ]...)
	}
	ops := subs.opsSince(mark)
	lastAdd, firstRemove := -1, len(ops)
	for i, op := range ops {
		switch {
		case op.add && slices.Contains(after[op.typeURL], op.name) && !slices.Contains(before[op.typeURL], op.name):
			lastAdd = i
		case !op.add && slices.Contains(before[op.typeURL], op.name) && !slices.Contains(after[op.typeURL], op.name):
			firstRemove = min(firstRemove, i)
		}
	}
	if lastAdd > firstRemove {
		t.Errorf("break before make: the server saw %v", ops)
	}
}

// usedNames lists, per type URL, the resources a snapshot is made of.
func usedNames(s *watchers.Snapshot) map[string][]string {
	out := map[string][]string{ldsURL: {s.Listener.Name}}
	if s.Listener.RouteConfigName != "" {
		out[rdsURL] = []string{s.Listener.RouteConfigName}
	}
	for _, name := range clusterNames(s) {
		out[cdsURL] = append(out[cdsURL], name)
		if cc := s.Clusters.Get(name); cc.Cluster != nil && cc.Cluster.Kind == resources.ClusterKindEDS {
			out[edsURL] = append(out[edsURL], cc.Cluster.EDSServiceName())
		}
	}
	return out
}

func withRoutes(res testutils.Resources, rcs ...*routev3.RouteConfiguration) testutils.Resources {
	res.Routes = append(res.Routes, rcs...)
	return res
}

func withListener(res testutils.Resources, l *listenerv3.Listener) testutils.Resources {
	res.Listeners = listeners(l)
	return res
}

// withAggregate replaces the cluster named name by an aggregate cluster.
func withAggregate(res testutils.Resources, name string, children ...string) testutils.Resources {
	res.Clusters = slices.DeleteFunc(slices.Clone(res.Clusters), func(c *clusterv3.Cluster) bool { return c.GetName() == name })
	res.Clusters = append(res.Clusters, testutils.AggregateCluster(name, children...))
	res.Endpoints = slices.DeleteFunc(slices.Clone(res.Endpoints), func(c *endpointv3.ClusterLoadAssignment) bool { return c.GetClusterName() == name })
	return res
}

// clusterWithService is svc → svc-route → cluster, whose endpoints come
// under service; every named service has one endpoint, on port 1, 2, ...
// by its index.
func clusterWithService(cluster, service string, others ...string) testutils.Resources {
	res := testutils.Resources{
		Listeners: listeners(testutils.Listener("svc", "svc-route")),
		Routes:    []*routev3.RouteConfiguration{testutils.RouteConfig("svc-route", "*", cluster)},
		Clusters:  []*clusterv3.Cluster{testutils.Cluster(cluster, service)},
	}
	all := append([]string{service}, others...)
	slices.Sort(all)
	for i, s := range all {
		res.Endpoints = append(res.Endpoints, testutils.ClusterLoadAssignment(s, "127.0.0.1", uint32(i+1)))
	}
	return res
}
