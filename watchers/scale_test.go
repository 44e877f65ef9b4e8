package watchers_test

import (
	"fmt"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// maxChangeRequests is how many requests may change the subscriptions of
// one type for one change of the tree: the client sends what the callbacks
// for one response subscribe as one request per type, so 1 is expected;
// a little slack allows for a response split by the server.
const maxChangeRequests = 3

// A route configuration naming 1,000 clusters: the tree subscribes to the
// 1,000 clusters and then the 1,000 endpoints in a handful of requests,
// unsubscribes 990 of each as few when the route drops them, and releases
// everything when cancelled.
func TestThousandClusters(t *testing.T) {
	const n, kept = 1000, 10
	forEachServerVariant(t, func(t *testing.T, v variant) {
		e := newEnv(t, v, longExpiry)
		var all []string
		for i := range n {
			all = append(all, fmt.Sprintf("cluster-%04d", i))
		}
		res := simpleTree("svc", "svc-route", all...)
		e.update(res)

		start := time.Now()
		r, cancel := e.watch("svc", watchers.TreeOptions{})
		s := r.nextUpdate()
		took := time.Since(start)
		if s.Clusters.Len() != n {
			t.Fatalf("snapshot has %d clusters, want %d", s.Clusters.Len(), n)
		}
		for name, cc := range s.Clusters.All() {
			if cc.Err != nil || cc.Endpoints == nil {
				t.Fatalf("cluster %s: Err %v, Endpoints %v", name, cc.Err, cc.Endpoints)
			}
		}
		e.subs.waitNames(t, cdsURL, all...)
		e.subs.waitNames(t, edsURL, all...)
		cdsReqs, cdsSubs := e.subs.counts(cdsURL)
		edsReqs, edsSubs := e.subs.counts(edsURL)
		t.Logf("%s: full tree of %d clusters in %v; CDS: %d requests, %d changing subscriptions; EDS: %d requests, %d changing subscriptions",
			v.name, n, took.Round(time.Millisecond), cdsReqs, cdsSubs, edsReqs, edsSubs)
		if cdsSubs > maxChangeRequests || edsSubs > maxChangeRequests {
			t.Errorf("subscribing took %d CDS and %d EDS requests, want at most %d each", cdsSubs, edsSubs, maxChangeRequests)
		}

		// The route keeps 10 clusters; the server keeps all of them.
		var weights []testutils.ClusterWeight
		for _, name := range all[:kept] {
			weights = append(weights, testutils.ClusterWeight{Name: name, Weight: 1})
		}
		res.Routes = []*routev3.RouteConfiguration{testutils.WeightedRouteConfig("svc-route", "*", weights...)}
		e.update(res)
		s2 := r.nextUpdate()
		if s2.Clusters.Len() != kept {
			t.Fatalf("after shrinking: %d clusters, want %d", s2.Clusters.Len(), kept)
		}
		for _, name := range all[:kept] {
			if s2.Clusters.Get(name) != s.Clusters.Get(name) {
				t.Errorf("cluster %s did not change but its ClusterConfig is new", name)
			}
		}
		e.subs.waitNames(t, cdsURL, all[:kept]...)
		e.subs.waitNames(t, edsURL, all[:kept]...)
		_, cdsAfter := e.subs.counts(cdsURL)
		_, edsAfter := e.subs.counts(edsURL)
		t.Logf("%s: dropping %d clusters took %d CDS and %d EDS requests", v.name, n-kept, cdsAfter-cdsSubs, edsAfter-edsSubs)
		if cdsAfter-cdsSubs > maxChangeRequests || edsAfter-edsSubs > maxChangeRequests {
			t.Errorf("unsubscribing took %d CDS and %d EDS requests, want at most %d each", cdsAfter-cdsSubs, edsAfter-edsSubs, maxChangeRequests)
		}

		// Back to 1,000, then cancelled from the test's goroutine, outside
		// any client callback. The client cannot batch unsubscriptions
		// made there as it batches those made in callbacks, so this is
		// counted, not bounded.
		res.Routes = simpleTree("svc", "svc-route", all...).Routes
		e.update(res)
		if s3 := r.nextUpdate(); s3.Clusters.Len() != n {
			t.Fatalf("after growing back: %d clusters, want %d", s3.Clusters.Len(), n)
		}
		e.subs.waitNames(t, edsURL, all...)
		_, cdsGrown := e.subs.counts(cdsURL)
		_, edsGrown := e.subs.counts(edsURL)
		cancel()
		for _, typ := range allTypes {
			e.subs.waitNames(t, typ)
		}
		_, cdsEnd := e.subs.counts(cdsURL)
		_, edsEnd := e.subs.counts(edsURL)
		t.Logf("%s: growing back took %d CDS and %d EDS requests; cancelling %d and %d",
			v.name, cdsGrown-cdsAfter, edsGrown-edsAfter, cdsEnd-cdsGrown, edsEnd-edsGrown)
		barrier(t, e.c)
		r.noMore()
	})
}
