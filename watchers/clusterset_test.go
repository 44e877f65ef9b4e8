package watchers_test

import (
	"slices"
	"testing"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// A ClusterSet adds clusters that no route names to the tree: their
// clusters and endpoints are subscribed, the snapshot carries them once
// they have arrived (one still arriving holds nothing back), and once
// released they leave the snapshot and the subscriptions.
func TestClusterSet(t *testing.T) {
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		res := simpleTree("L", "R", "a")
		res.Clusters = append(res.Clusters, testutils.Cluster("x", ""))
		res.Endpoints = append(res.Endpoints, testutils.ClusterLoadAssignment("x", "127.0.0.1", 9))
		e.update(res)

		set := new(watchers.ClusterSet)
		before := set.Add("a") // already a route's: no new subscription
		// The server has no "ghost": it would be known missing only
		// after longExpiry, far past the test's deadline.
		ghost := set.Add("ghost")
		defer ghost()
		r, _ := e.watch("L", watchers.TreeOptions{Clusters: set})
		r.waitUpdate("cluster a", func(s *watchers.Snapshot) bool { return s.Clusters.Get("a") != nil })

		release := set.Add("x")
		s := r.waitUpdate("cluster x with its endpoints", func(s *watchers.Snapshot) bool {
			cc := s.Clusters.Get("x")
			return cc != nil && cc.Endpoints != nil
		})
		checkConsistent(t, s)
		if got := clusterNames(s); !slices.Equal(got, []string{"a", "x"}) {
			t.Errorf("clusters = %v, want [a x]", got)
		}
		e.subs.waitSubscribed(t, cdsURL, "a", "x", "ghost")
		e.subs.waitSubscribed(t, edsURL, "x")

		second := set.Add("x")
		release()
		release() // idempotent: x is still held once
		barrier(t, e.c)
		second()
		r.waitUpdate("cluster x gone", func(s *watchers.Snapshot) bool { return s.Clusters.Get("x") == nil })
		e.subs.waitNames(t, cdsURL, "a", "ghost")
		// a is still a route's: releasing it from the set changes nothing.
		before()
		barrier(t, e.c)
		r.noMore()
	})
}
