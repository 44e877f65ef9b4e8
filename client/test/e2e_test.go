package test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// One behaviour suite against go-control-plane's stock server and caches,
// run on every variant users run: SotW and delta, over ADS and over one
// stream per type, each from the snapshot cache (without its ADS mode, the
// default here), from the snapshot cache in ADS mode (as an Envoy fleet's
// server runs it; ADS streams only, the mode concerns ADS), and from the
// linear cache; REST polling of go-control-plane's REST handler
// (testutils.RESTServer); and files (a FILESYSTEM server, whose "server"
// writes the files). Where the protocols must differ (SotW cannot delete a
// ClusterLoadAssignment), the test says so.

type variant struct {
	name   string
	p      protocol
	linear bool // go-control-plane's linear cache
	// adsCache: its snapshot cache in ADS mode, which answers a SotW request
	// naming resources only once it names all of its type: the suite's
	// trees are whole types, so each request names them all.
	adsCache bool
}

var variants = []variant{
	{name: "sotw", p: sotw},
	{name: "sotw-ads-cache", p: sotw, adsCache: true},
	{name: "sotw-linear", p: sotw, linear: true},
	{name: "delta", p: delta},
	{name: "delta-ads-cache", p: delta, adsCache: true},
	{name: "delta-linear", p: delta, linear: true},
	{name: "sotw-per-type", p: sotwPerType},
	{name: "sotw-per-type-linear", p: sotwPerType, linear: true},
	{name: "delta-per-type", p: deltaPerType},
	{name: "delta-per-type-linear", p: deltaPerType, linear: true},
	{name: "rest", p: rest},
	{name: "files", p: files},
}

// forEachVariant runs f as a parallel subtest per variant.
func forEachVariant(t *testing.T, f func(t *testing.T, v variant)) {
	forVariants(t, variants, f)
}

// variantsExcept is every variant but the named ones.
func variantsExcept(names ...string) []variant {
	var out []variant
	for _, v := range variants {
		if !slices.Contains(names, v.name) {
			out = append(out, v)
		}
	}
	return out
}

// forVariants runs f as a parallel subtest per variant of vs.
func forVariants(t *testing.T, vs []variant, f func(t *testing.T, v variant)) {
	t.Parallel()
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			f(t, v)
		})
	}
}

// e2eEnv is a client of a go-control-plane management server.
type e2eEnv struct {
	t    *testing.T
	v    variant
	opts testutils.ManagementServerOptions
	ms   *testutils.ManagementServer // nil for rest and files
	rs   *testutils.RESTServer       // rest only
	dir  string                      // files only: where the files are
	addr string                      // what the client's bootstrap names
	c    *client.Client
}

func newE2E(t *testing.T, v variant, cfg config, opts testutils.ManagementServerOptions, rs testutils.Resources) *e2eEnv {
	t.Helper()
	opts.Linear, opts.ADS = v.linear, v.adsCache
	e := &e2eEnv{t: t, v: v, opts: opts}
	e.start(rs)
	e.c = newClient(t, e.addr, v.p, cfg)
	return e
}

// start starts the server (at opts.Address, once known) serving rs. The
// server has rs before it serves: a client reconnecting to a restarted
// server must not find it empty (see ManagementServerOptions.Initial).
// It counts versions from "1" again, as go-control-plane's examples do, so
// the client meets changed resources at the version it already holds.
func (e *e2eEnv) start(rs testutils.Resources) {
	e.t.Helper()
	if e.v.p.rest || e.v.p.files {
		e.startSource(rs)
		return
	}
	opts := e.opts
	opts.Initial = map[string]testutils.Resources{nodeID: rs}
	ms, err := testutils.StartManagementServer(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(ms.Stop)
	e.ms = ms
	e.opts.Address = ms.Address()
	e.addr = ms.Address()
}

func (e *e2eEnv) update(rs testutils.Resources) {
	e.t.Helper()
	if e.v.p.rest || e.v.p.files {
		e.updateSource(rs)
		return
	}
	if err := e.ms.Update(testContext(e.t), nodeID, rs); err != nil {
		e.t.Fatal(err)
	}
}

// restart stops the server and starts a new one at its address serving rs.
func (e *e2eEnv) restart(rs testutils.Resources) {
	e.t.Helper()
	if e.v.p.rest || e.v.p.files {
		e.restartSource(rs)
		return
	}
	e.ms.Stop()
	e.start(rs)
}

// tree is the watchers of one LDS→RDS→CDS→EDS tree.
type tree struct {
	l *recorder[*resources.Listener]
	r *recorder[*resources.RouteConfig]
	c *recorder[*resources.Cluster]
	e *recorder[*resources.Endpoints]
}

// watchTree watches the listener "svc", its route "svc-route", the cluster
// and the endpoints "svc-cluster", as DefaultResources names them.
func watchTree(c *client.Client) tree {
	t := tree{newRecorder[*resources.Listener](), newRecorder[*resources.RouteConfig](),
		newRecorder[*resources.Cluster](), newRecorder[*resources.Endpoints]()}
	client.WatchListener(c, "svc", t.l)
	client.WatchRouteConfig(c, "svc-route", t.r)
	client.WatchCluster(c, "svc-cluster", t.c)
	client.WatchEndpoints(c, "svc-cluster", t.e)
	return t
}

func (tr tree) none(t *testing.T) {
	t.Helper()
	tr.l.none(t)
	tr.r.none(t)
	tr.c.none(t)
	tr.e.none(t)
}

func svc(ports ...uint32) testutils.Resources {
	return testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", Ports: ports})
}

// addresses lists the endpoint addresses of an assignment.
func addresses(e *resources.Endpoints) []string {
	var out []string
	for _, l := range e.Localities {
		for _, ep := range l.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	return out
}

func wantAddresses(t *testing.T, e *resources.Endpoints, want ...string) {
	t.Helper()
	if got := addresses(e); !slices.Equal(got, want) {
		t.Fatalf("endpoints %q are at %q, want %q", e.Name, got, want)
	}
}

func TestE2EWatchAllFourTypes(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := newE2E(t, v, config{}, testutils.ManagementServerOptions{}, svc(1001))
		tr := watchTree(e.c)
		if l := tr.l.wantUpdate(t, "svc"); l.RouteConfigName != "svc-route" {
			t.Errorf("listener routes to %q, want svc-route", l.RouteConfigName)
		}
		if r := tr.r.wantUpdate(t, "svc-route"); !slices.Equal(r.ClusterNames(), []string{"svc-cluster"}) {
			t.Errorf("route sends to %q, want svc-cluster", r.ClusterNames())
		}
		if c := tr.c.wantUpdate(t, "svc-cluster"); c.Kind != resources.ClusterKindEDS || c.EDSServiceName() != "svc-cluster" {
			t.Errorf("cluster is %v with EDS name %q, want EDS svc-cluster", c.Kind, c.EDSServiceName())
		}
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")
		for _, st := range e.c.Dump() {
			if st.Status != client.StatusACKed {
				t.Errorf("%s %s is %v, want ACKED", st.TypeURL, st.Name, st.Status)
			}
		}
	})
}

// An update reaches the watchers of what changed, and only those.
func TestE2EUpdate(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := newE2E(t, v, config{}, testutils.ManagementServerOptions{}, svc(1001))
		tr := watchTree(e.c)
		tr.l.wantUpdate(t, "svc")
		tr.r.wantUpdate(t, "svc-route")
		tr.c.wantUpdate(t, "svc-cluster")
		tr.e.wantUpdate(t, "svc-cluster")

		e.update(svc(1002, 1003))
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1002", "127.0.0.1:1003")
		rs := svc(1002, 1003)
		rs.Clusters[0] = testutils.Cluster("svc-cluster", "svc-eds")
		e.update(rs)
		if c := tr.c.wantUpdate(t, "svc-cluster"); c.EDSServiceName() != "svc-eds" {
			t.Fatalf("cluster EDS name %q, want svc-eds", c.EDSServiceName())
		}
		barrier(t, e.c)
		tr.none(t)
	})
}

// A name watched once its type has been answered is served at once, though
// nothing changed on the server: over REST, where go-control-plane answers
// a poll at the current version "not modified" whatever it names, the poll
// naming it goes without a version (transport.restAnswered). Not on
// sotw-ads-cache, which answers a SotW request only once it names every
// cluster (see variant.adsCache).
func TestE2EWatchNameOfAnsweredType(t *testing.T) {
	forVariants(t, variantsExcept("sotw-ads-cache"), func(t *testing.T, v variant) {
		rs := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{"a", "b"}})
		e := newE2E(t, v, config{}, testutils.ManagementServerOptions{}, rs)
		a := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "a", a)
		a.wantUpdate(t, "a")
		b := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "b", b)
		b.wantUpdate(t, "b")
		barrier(t, e.c)
		a.none(t)
	})
}

// failOnDataErrors marks a server fail_on_data_errors: what it deletes or
// what the client rejects is dropped, not kept (gRFC A88).
var failOnDataErrors = []string{bootstrap.FeatureFailOnDataErrors}

// A deleted Listener or Cluster is reported as not existing on every
// variant, with fail_on_data_errors. A deleted ClusterLoadAssignment is
// reported over delta only: SotW has no way to say so, and leaves it to the
// Cluster's deletion.
func TestE2EDelete(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := newE2E(t, v, config{features: failOnDataErrors}, testutils.ManagementServerOptions{}, svc(1001))
		tr := watchTree(e.c)
		tr.l.wantUpdate(t, "svc")
		tr.r.wantUpdate(t, "svc-route")
		tr.c.wantUpdate(t, "svc-cluster")
		tr.e.wantUpdate(t, "svc-cluster")

		rs := svc(1001)
		rs.Clusters, rs.Endpoints = nil, nil
		e.update(rs)
		tr.c.wantNotFound(t, "svc-cluster")
		if v.p.delta {
			tr.e.wantNotFound(t, "svc-cluster")
		}
		rs.Listeners = nil
		e.update(rs)
		tr.l.wantNotFound(t, "svc")
		barrier(t, e.c)
		tr.none(t)
		if st, _ := status(e.c, edsURL, "svc-cluster"); v.p.delta != (st.Status == client.StatusDoesNotExist) {
			t.Fatalf("endpoints are %v after their deletion over %s", st.Status, v.p.name)
		}

		// They may come back.
		e.update(svc(1001))
		tr.l.wantUpdate(t, "svc")
		tr.c.wantUpdate(t, "svc-cluster")
		if v.p.delta {
			tr.e.wantUpdate(t, "svc-cluster")
		}
	})
}

// Without fail_on_data_errors, gRFC A88: a deleted Listener or Cluster is
// kept, its watchers told by an ambient error (ErrResourceNotFound), the
// dump DOES_NOT_EXIST with the value; back unchanged, it is ACKED again
// without a new update. Endpoints removed over delta are deleted all the
// same (A88 speaks of LDS and CDS). Resource files are exempt: what is
// taken out of a file is deleted (TestE2EDelete/files).
func TestE2EDeleteKeptWithoutFailOnDataErrors(t *testing.T) {
	forVariants(t, variantsExcept("files"), func(t *testing.T, v variant) {
		e := newE2E(t, v, config{}, testutils.ManagementServerOptions{}, svc(1001))
		tr := watchTree(e.c)
		tr.l.wantUpdate(t, "svc")
		tr.r.wantUpdate(t, "svc-route")
		tr.c.wantUpdate(t, "svc-cluster")
		tr.e.wantUpdate(t, "svc-cluster")

		rs := svc(1001)
		rs.Clusters, rs.Endpoints = nil, nil
		e.update(rs)
		tr.c.wantError(t, "ambient-error", client.ErrResourceNotFound, "svc-cluster")
		if v.p.delta {
			tr.e.wantNotFound(t, "svc-cluster")
		}
		rs.Listeners = nil
		e.update(rs)
		tr.l.wantError(t, "ambient-error", client.ErrResourceNotFound, "svc")
		barrier(t, e.c)
		tr.none(t)
		for _, k := range []struct{ typeURL, name string }{{ldsURL, "svc"}, {cdsURL, "svc-cluster"}} {
			if st, _ := status(e.c, k.typeURL, k.name); st.Status != client.StatusDoesNotExist || st.Value == nil {
				t.Fatalf("%s after its deletion: %v, value %v; want DOES_NOT_EXIST with the value", k.name, st.Status, st.Value != nil)
			}
		}

		e.update(svc(1001))
		if v.p.delta {
			tr.e.wantUpdate(t, "svc-cluster")
		}
		waitFor(t, "the listener and cluster ACKED again", func() bool {
			l, _ := status(e.c, ldsURL, "svc")
			c, _ := status(e.c, cdsURL, "svc-cluster")
			return l.Status == client.StatusACKed && c.Status == client.StatusACKed
		})
		barrier(t, e.c)
		tr.l.none(t)
		tr.c.none(t)
	})
}

// A name the server does not have is reported missing by the timer (on
// delta, go-control-plane does not answer it at all), and delivered when it
// appears. Not on sotw-ads-cache: in ADS mode go-control-plane's snapshot
// cache drops a SotW request naming a resource it lacks without keeping a
// watch, so it never sends the resource once it has it, unless the client
// asks again (envoyproxy/go-control-plane#426).
func TestE2EDoesNotExist(t *testing.T) {
	forVariants(t, variantsExcept("sotw-ads-cache"), func(t *testing.T, v variant) {
		e := newE2E(t, v, config{expiry: expiry}, testutils.ManagementServerOptions{}, svc(1001))
		wl := newRecorder[*resources.Listener]()
		wc := newRecorder[*resources.Cluster]()
		client.WatchListener(e.c, "other", wl)
		client.WatchCluster(e.c, "other", wc)
		wl.wantNotFound(t, "other")
		wc.wantNotFound(t, "other")
		rs := svc(1001)
		rs.Listeners = append(rs.Listeners, testutils.Listener("other", "svc-route"))
		rs.Clusters = append(rs.Clusters, testutils.Cluster("other", "svc-cluster"))
		e.update(rs)
		wl.wantUpdate(t, "other")
		wc.wantUpdate(t, "other")
	})
}

// The server restarts with changed resources: the client reconnects,
// resubscribes, and converges on the new state.
func TestE2EServerRestartWithChangedResources(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := newE2E(t, v, config{features: failOnDataErrors}, testutils.ManagementServerOptions{}, svc(1001)) // deletions drop (gRFC A88)
		tr := watchTree(e.c)
		tr.l.wantUpdate(t, "svc")
		tr.r.wantUpdate(t, "svc-route")
		tr.c.wantUpdate(t, "svc-cluster")
		tr.e.wantUpdate(t, "svc-cluster")
		other := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "other", other)

		// The route now sends to "other", the old cluster is gone, and the
		// endpoints moved.
		rs := svc(2002)
		rs.Routes[0] = testutils.RouteConfig("svc-route", "*", "other")
		rs.Clusters[0] = testutils.Cluster("other", "svc-cluster")
		e.restart(rs)

		if r := tr.r.wantUpdatePastOutage(t, "svc-route"); !slices.Equal(r.ClusterNames(), []string{"other"}) {
			t.Fatalf("route sends to %q after the restart, want other", r.ClusterNames())
		}
		if ev := tr.c.nextPastOutage(t); ev.kind != "resource-error" || !isNotFound(ev.err) {
			t.Fatalf("svc-cluster got %v after the restart, want its deletion", ev)
		}
		other.wantUpdatePastOutage(t, "other")
		wantAddresses(t, tr.e.wantUpdatePastOutage(t, "svc-cluster"), "127.0.0.1:2002")
		// The listener did not change: it is not delivered again.
		barrier(t, e.c)
		tr.l.nonePastOutage(t)
	})
}

// A wildcard watch gets every listener, or every cluster, then the ones
// added, and hears of the ones deleted. Alone, it goes out in the legacy
// form, which every server understands.
func TestE2EWildcard(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		rs := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{"a", "b"}})
		e := newE2E(t, v, config{features: failOnDataErrors}, testutils.ManagementServerOptions{}, rs) // deletions drop (gRFC A88)
		lw := newRecorder[*resources.Listener]()
		client.WatchListener(e.c, resources.Wildcard, lw)
		lw.wantUpdate(t, "svc")
		w := newRecorder[*resources.Cluster]()
		client.Watch(e.c, resources.ClusterType, "*", w)
		got := []string{w.next(t).value.Name, w.next(t).value.Name}
		if slices.Sort(got); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("wildcard watcher got %q, want a and b", got)
		}
		rs.Clusters = append(rs.Clusters[1:], testutils.Cluster("c", ""))
		e.update(rs)
		var added, deleted bool
		for !added || !deleted {
			switch ev := w.next(t); {
			case ev.kind == "update" && ev.value.Name == "c":
				added = true
			case ev.kind == "resource-error" && isNotFound(ev.err):
				var xe *client.Error
				if !errors.As(ev.err, &xe) || xe.Name != "a" {
					t.Fatalf("deletion of %v, want a", ev.err)
				}
				deleted = true
			default:
				t.Fatalf("wildcard watcher got %v, want c added and a deleted", ev)
			}
		}
		barrier(t, e.c)
		w.none(t) // b did not change
		lw.none(t)
	})
}

// A wildcard watch beside a named watch of the same type: "*" is named with
// the name, and the wildcard watcher still gets every cluster, loses none,
// and hears of the new ones. Not where go-control-plane's snapshot cache
// answers SotW (sotw, sotw-ads-cache, sotw-per-type, rest): it filters a
// SotW answer by the literal names requested, so "*" beside a name gets
// only that name (envoyproxy/go-control-plane#558). The transport's
// TestSotWWildcardForms holds the requests on the wire.
func TestE2EWildcardBesideNames(t *testing.T) {
	forVariants(t, variantsExcept("sotw", "sotw-ads-cache", "sotw-per-type", "rest"), func(t *testing.T, v variant) {
		rs := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{"a", "b"}})
		e := newE2E(t, v, config{}, testutils.ManagementServerOptions{}, rs)
		named := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, "a", named)
		named.wantUpdate(t, "a")
		w := newRecorder[*resources.Cluster]()
		client.WatchCluster(e.c, resources.Wildcard, w)
		got := []string{w.next(t).value.Name, w.next(t).value.Name}
		if slices.Sort(got); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("wildcard watcher got %q, want a and b", got)
		}
		rs.Clusters = append(rs.Clusters, testutils.Cluster("c", ""))
		e.update(rs)
		w.wantUpdate(t, "c")
		barrier(t, e.c)
		w.none(t) // neither a nor b was lost
		named.none(t)
	})
}

// 100 watchers of one name, started at once: one subscription, one value
// for each, and one unsubscription once all have gone.
func TestE2EConcurrentWatchersOfOneName(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := newE2E(t, v, config{}, testutils.ManagementServerOptions{}, svc(1001))
		const n = 100
		recs := make([]*recorder[*resources.Cluster], n)
		cancels := make([]func(), n)
		var wg sync.WaitGroup
		for i := range n {
			recs[i] = newRecorder[*resources.Cluster]()
			wg.Go(func() { cancels[i] = client.WatchCluster(e.c, "svc-cluster", recs[i]) })
		}
		wg.Wait()
		for _, r := range recs {
			r.wantUpdate(t, "svc-cluster")
		}
		barrier(t, e.c)
		for _, r := range recs {
			r.none(t)
		}
		if st, _ := status(e.c, cdsURL, "svc-cluster"); st.Watchers != n {
			t.Fatalf("%d watchers, want %d", st.Watchers, n)
		}
		for _, cancel := range cancels {
			wg.Go(cancel)
		}
		wg.Wait()
		barrier(t, e.c) // the entry goes once its unsubscription is flushed
		if d := e.c.Dump(); len(d) != 0 {
			t.Fatalf("cache holds %v after every watcher left", d)
		}
	})
}

// After a reconnect, unchanged resources are not delivered again on any
// variant; over delta they are not even sent again: the client's
// initial_resource_versions let the server skip them.
func TestE2EReconnectWithoutRedownload(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		sent := make(chan []string, 100)
		opts := testutils.ManagementServerOptions{
			OnDeltaResponse: func(_ int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
				var names []string
				for _, r := range resp.GetResources() {
					names = append(names, r.GetName())
				}
				sent <- names
			},
			OnStreamResponse: func(_ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
				names := make([]string, len(resp.GetResources()))
				sent <- names
			},
		}
		rs := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{"a", "b", "c"}, Ports: []uint32{1001}})
		e := newE2E(t, v, config{}, opts, rs)
		watched := map[string]*recorder[*resources.Cluster]{}
		for _, name := range []string{"a", "b", "c"} {
			watched[name] = newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, name, watched[name])
		}
		for name, w := range watched {
			w.wantUpdate(t, name)
		}
		drain(sent)

		// Same resources but cluster b, which changed.
		rs.Clusters[1] = testutils.LogicalDNSCluster("b", "b.example.com", 443)
		e.restart(rs)
		if c := watched["b"].wantUpdatePastOutage(t, "b"); c.Kind != resources.ClusterKindLogicalDNS {
			t.Fatalf("b is %v after the restart, want LOGICAL_DNS", c.Kind)
		}
		barrier(t, e.c)
		watched["a"].nonePastOutage(t)
		watched["c"].nonePastOutage(t)
		got := drain(sent)
		t.Logf("resources sent again after the reconnect: %d of 3 (1 changed)", len(got))
		if !v.p.delta {
			return // SotW has no way to skip them
		}
		// The server has answered the new stream's subscription: b, and
		// nothing else.
		if !slices.Equal(got, []string{"b"}) {
			t.Fatalf("after the reconnect the server sent %q, want only the changed [b]", got)
		}
	})
}

// drain returns the names sent so far, flattened.
func drain(sent chan []string) []string {
	var out []string
	for {
		select {
		case names := <-sent:
			out = append(out, names...)
		default:
			return out
		}
	}
}
