package watchers_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// gRFC A95: a tree whose assignment takes its localities' endpoints from
// LbEndpointCollection resources, against go-control-plane's stock
// server. It serves collections over delta only: its SotW responses name
// a resource by the message's own name, which an LbEndpointCollection
// lacks (see testutils.Resources.EndpointCollections).

const collURL = resources.EndpointCollectionTypeURL

// deltaServerVariants are the server variants speaking delta ADS. Not
// delta per type: there is no per-type service of LbEndpointCollection (a
// client on per-type streams is told the server cannot serve it, and the
// localities stay without endpoints).
func deltaServerVariants() []variant {
	var out []variant
	for _, v := range serverVariants {
		if strings.Contains(v.name, "delta") && v.apiType == testutils.APITypeDelta {
			out = append(out, v)
		}
	}
	return out
}

// newA95Env is newEnv with a client that has A95 on (as
// GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK=true does).
func newA95Env(t *testing.T, v variant, a95 bool) *env {
	t.Helper()
	subs := newSubsLog()
	ms, err := testutils.StartManagementServer(subs.hooks(testutils.ManagementServerOptions{Linear: v.linear, ADS: v.adsCache}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), APIType: v.apiType, NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.EndpointFallback = a95
	c, err := client.New(cfg, client.Options{WatchExpiry: longExpiry, TransportOptions: fastTransport, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &env{t: t, v: v, ms: ms, subs: subs, c: c}
}

// ledsTree is L → R → C, whose assignment has locality "a" from the
// collection coll-a and, if withB, locality "b" from coll-b.
func ledsTree(withB bool, colls map[string]*endpointv3.LbEndpointCollection) testutils.Resources {
	rs := simpleTree("L", "R", "C")
	locs := []testutils.CollectionLocality{{Locality: testutils.Locality{Region: "a"}, Collection: "coll-a"}}
	if withB {
		locs = append(locs, testutils.CollectionLocality{Locality: testutils.Locality{Region: "b"}, Collection: "coll-b"})
	}
	rs.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.EndpointsFromCollections("C", locs...)}
	rs.EndpointCollections = colls
	return rs
}

// localityAddrs gives, per locality region of cluster C, its addresses.
func localityAddrs(t *testing.T, s *watchers.Snapshot) map[string][]string {
	t.Helper()
	cc := s.Clusters.Get("C")
	if cc == nil || cc.Err != nil || cc.Endpoints == nil {
		t.Fatalf("cluster C: %+v, want its endpoints", cc)
	}
	out := make(map[string][]string)
	for _, l := range cc.Endpoints.Localities {
		out[l.ID.Region] = []string{}
		for _, ep := range l.Endpoints {
			out[l.ID.Region] = append(out[l.ID.Region], ep.Addresses...)
		}
	}
	return out
}

func wantLocalities(t *testing.T, s *watchers.Snapshot, want map[string][]string) {
	t.Helper()
	got := localityAddrs(t, s)
	if len(got) != len(want) {
		t.Fatalf("localities %v, want %v", got, want)
	}
	for region, addrs := range want {
		if !slices.Equal(got[region], addrs) {
			t.Fatalf("localities %v, want %v", got, want)
		}
	}
}

// The tree watches the collections its assignment names, and its
// snapshots carry the assignment with them in their localities: a change
// of a collection is a new snapshot, and so are a locality dropped from the
// assignment (its collection is no longer watched) and a collection
// deleted (its locality is left without endpoints, and the tree says
// why).
func TestTreeEndpointCollections(t *testing.T) {
	forVariants(t, deltaServerVariants(), func(t *testing.T, v variant) {
		e := newA95Env(t, v, true)
		e.update(ledsTree(true, map[string]*endpointv3.LbEndpointCollection{
			"coll-a": testutils.EndpointCollection("127.0.0.1", 1001, 1002),
			"coll-b": testutils.EndpointCollection("127.0.0.1", 2001),
		}))
		r, _ := e.watch("L", watchers.TreeOptions{})
		s := r.nextUpdate()
		wantLocalities(t, s, map[string][]string{"a": {"127.0.0.1:1001", "127.0.0.1:1002"}, "b": {"127.0.0.1:2001"}})
		if got := s.Clusters.Get("C").Endpoints.Localities[1].EndpointCollection; got != "coll-b" {
			t.Errorf("locality b says it came from %q, want coll-b", got)
		}
		if text := strings.Join(s.Lines(), "\n"); !strings.Contains(text, `collection="coll-b"`) {
			t.Errorf("the snapshot's text does not name locality b's collection:\n%s", text)
		}

		e.update(ledsTree(true, map[string]*endpointv3.LbEndpointCollection{
			"coll-a": testutils.EndpointCollection("127.0.0.1", 1001, 1002),
			"coll-b": testutils.EndpointCollection("127.0.0.1", 2002),
		}))
		wantLocalities(t, r.nextUpdate(), map[string][]string{"a": {"127.0.0.1:1001", "127.0.0.1:1002"}, "b": {"127.0.0.1:2002"}})

		e.update(ledsTree(false, map[string]*endpointv3.LbEndpointCollection{
			"coll-a": testutils.EndpointCollection("127.0.0.1", 1001, 1002),
			"coll-b": testutils.EndpointCollection("127.0.0.1", 2002),
		}))
		wantLocalities(t, r.nextUpdate(), map[string][]string{"a": {"127.0.0.1:1001", "127.0.0.1:1002"}})
		e.subs.waitNames(t, collURL, "coll-a")

		e.update(ledsTree(false, nil))
		s = r.waitUpdate("locality a without endpoints", func(s *watchers.Snapshot) bool {
			return len(localityAddrs(t, s)["a"]) == 0
		})
		wantLocalities(t, s, map[string][]string{"a": {}})
		var sawWhy bool
		for _, ev := range r.all() {
			if ev.ambErr != nil && errorsIsNotFound(ev.ambErr) && strings.Contains(ev.ambErr.Error(), "coll-a") {
				sawWhy = true
			}
		}
		if !sawWhy {
			t.Errorf("events %v: want an ambient error saying coll-a does not exist", r.all())
		}
	})
}

// A snapshot waits for every collection of its assignment: the tree
// delivers nothing while one is missing, and its first snapshot once it
// comes.
func TestTreeWaitsForEndpointCollections(t *testing.T) {
	forVariants(t, deltaServerVariants(), func(t *testing.T, v variant) {
		e := newA95Env(t, v, true)
		e.update(ledsTree(true, map[string]*endpointv3.LbEndpointCollection{
			"coll-a": testutils.EndpointCollection("127.0.0.1", 1001),
		}))
		// A watch of coll-a of the test's own: once it has the
		// collection, the tree's watch of it was told in the same step,
		// and the barrier below lets that callback run.
		got := make(chan struct{}, 1)
		cancel := client.WatchEndpointCollection(e.c, "coll-a", client.WatcherFuncs[*resources.EndpointCollection]{
			OnUpdate: func(*resources.EndpointCollection) { got <- struct{}{} },
		})
		defer cancel()
		r, _ := e.watch("L", watchers.TreeOptions{})
		e.subs.waitNames(t, collURL, "coll-a", "coll-b")
		select {
		case <-got:
		case <-timeAfterTest():
			t.Fatal("coll-a never came")
		}
		barrier(t, e.c)
		r.noMore()

		e.update(ledsTree(true, map[string]*endpointv3.LbEndpointCollection{
			"coll-a": testutils.EndpointCollection("127.0.0.1", 1001),
			"coll-b": testutils.EndpointCollection("127.0.0.1", 2001),
		}))
		wantLocalities(t, r.nextUpdate(), map[string][]string{"a": {"127.0.0.1:1001"}, "b": {"127.0.0.1:2001"}})
	})
}

// With A95 off, leds_cluster_locality_config is ignored: the localities
// have their lb_endpoints (none here), and no collection is asked for.
func TestTreeEndpointCollectionsNeedA95(t *testing.T) {
	forVariants(t, deltaServerVariants()[:1], func(t *testing.T, v variant) {
		e := newA95Env(t, v, false)
		e.update(ledsTree(false, map[string]*endpointv3.LbEndpointCollection{
			"coll-a": testutils.EndpointCollection("127.0.0.1", 1001),
		}))
		r, _ := e.watch("L", watchers.TreeOptions{})
		wantLocalities(t, r.nextUpdate(), map[string][]string{"a": {}})
		barrier(t, e.c)
		if names := e.subs.names(collURL); len(names) != 0 {
			t.Fatalf("subscribed to collections %q with A95 off", names)
		}
	})
}

func errorsIsNotFound(err error) bool { return errors.Is(err, client.ErrResourceNotFound) }

func timeAfterTest() <-chan time.Time { return time.After(testTimeout) }

// The case gRFC A95 is for: the assignment comes from an authority that
// falls back only when a resource is missing (the top-level servers
// here), its locality's endpoints from a collection of an authority with
// fallback_on_reachability_only. When the primary, which serves both,
// dies with everything cached, the tree keeps the primary's assignment
// and takes the locality's endpoints from the fallback, which keeps them
// fresh.
func TestTreeEndpointFallback(t *testing.T) {
	const (
		auth = "endpoints.example.com"
		coll = "xdstp://" + auth + "/envoy.config.endpoint.v3.LbEndpointCollection/C/a"
	)
	serve := func(port uint32) *testutils.ManagementServer {
		ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ms.Stop)
		rs := simpleTree("L", "R", "C")
		rs.Endpoints = []*endpointv3.ClusterLoadAssignment{testutils.EndpointsFromCollections("C",
			testutils.CollectionLocality{Locality: testutils.Locality{Region: "a"}, Collection: coll})}
		rs.EndpointCollections = map[string]*endpointv3.LbEndpointCollection{coll: testutils.EndpointCollection("127.0.0.1", port)}
		if err := ms.Update(t.Context(), nodeID, rs); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	primary, fallback := serve(1001), serve(2001)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: primary.Address(),
		APIType:   testutils.APITypeDelta,
		NodeID:    nodeID,
		Authorities: map[string]testutils.BootstrapAuthority{auth: {
			Servers: []testutils.BootstrapServer{
				{URI: primary.Address(), APIType: testutils.APITypeDelta},
				{URI: fallback.Address(), APIType: testutils.APITypeDelta},
			},
			FallbackOnReachabilityOnly: true,
		}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.EndpointFallback = true
	c, err := client.New(cfg, client.Options{WatchExpiry: longExpiry, TransportOptions: fastTransport, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r := newRecorder(t)
	t.Cleanup(watchers.WatchConfigTree(c, "L", watchers.TreeOptions{}, r))
	first := r.nextUpdate()
	wantLocalities(t, first, map[string][]string{"a": {"127.0.0.1:1001"}})

	primary.Stop()
	s := r.waitUpdate("the fallback's endpoints", func(s *watchers.Snapshot) bool {
		return slices.Equal(localityAddrs(t, s)["a"], []string{"127.0.0.1:2001"})
	})
	if s.Listener != first.Listener || s.RouteConfig != first.RouteConfig || s.Clusters.Get("C").Cluster != first.Clusters.Get("C").Cluster {
		t.Error("the listener, route or cluster changed: the top-level servers, with everything cached, must not fall back")
	}
	for _, st := range c.Dump() {
		want := primary.Address()
		if st.TypeURL == collURL {
			want = fallback.Address()
		}
		if st.Server != want {
			t.Errorf("%s %q is from %s, want %s", st.TypeURL, st.Name, st.Server, want)
		}
	}
}
