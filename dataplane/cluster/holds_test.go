package cluster

import (
	"maps"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// recordingSub is a Subscriber that counts the Adds of each name not yet
// released, as a config tree's ClusterSet would follow them.
type recordingSub struct{ live map[string]int }

func (r *recordingSub) Add(name string) func() {
	if r.live == nil {
		r.live = make(map[string]int)
	}
	r.live[name]++
	released := false
	return func() {
		if released {
			return
		}
		released = true
		if r.live[name]--; r.live[name] == 0 {
			delete(r.live, name)
		}
	}
}

// holdsHost is a testHost whose Pinned is its Holds' Held, as a
// transport's is.
type holdsHost struct {
	testHost
	holds Holds
}

func (h *holdsHost) Pinned(name string) bool { return h.holds.Held(name) }

// holdsEnv is a Set over a holdsHost, with a route to cluster "r".
type holdsEnv struct {
	t    *testing.T
	h    *holdsHost
	s    *Set
	vh   *resources.VirtualHost
	snap *watchers.Snapshot
}

func newHoldsEnv(t *testing.T, cfg Config) *holdsEnv {
	h := &holdsHost{}
	s := NewSet(h, &testClock{now: time.Unix(1000, 0)}, cfg)
	h.set = s
	e := &holdsEnv{t: t, h: h, s: s,
		vh: &resources.VirtualHost{Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "r"}}}}
	t.Cleanup(func() {
		h.mu.Lock()
		h.holds.Close()
		d := s.Close()
		h.mu.Unlock()
		d.Run()
		s.StopWaking()
	})
	return e
}

// edsConfig is an EDS cluster with one endpoint at addr.
func edsConfig(name, addr string) *watchers.ClusterConfig {
	return &watchers.ClusterConfig{
		Name:    name,
		Cluster: &resources.Cluster{Name: name, Kind: resources.ClusterKindEDS, MaxRequests: 1024, LBPolicy: resources.LBPolicy{Kind: resources.LBRoundRobin}},
		Endpoints: &resources.Endpoints{Name: name, Localities: []resources.Locality{{Weight: 1, Endpoints: []resources.Endpoint{
			{Addresses: []string{addr}, Weight: 1, HealthStatus: resources.HealthStatusHealthy},
		}}}},
	}
}

// apply has the Set take a snapshot of the clusters given (name →
// address), through Holds.Update, with the routes of the last.
func (e *holdsEnv) apply(clusters map[string]string) {
	cfgs := make(map[string]*watchers.ClusterConfig, len(clusters))
	for name, addr := range clusters {
		cfgs[name] = edsConfig(name, addr)
	}
	prev := e.snap
	e.snap = &watchers.Snapshot{VirtualHost: e.vh, Clusters: watchers.NewClusterMap(cfgs)}
	e.h.Do(func() { e.h.holds.Update(e.s, e.snap, prev != nil && prev.VirtualHost == e.vh) })
}

// do runs f under the host's lock, and settles the Set and publishes the
// holds' states after, as a transport's event does.
func (e *holdsEnv) do(f func()) {
	e.h.Do(func() {
		f()
		e.s.Settle()
		e.h.holds.Publish(e.s)
	})
}

// built returns the address of the named cluster's endpoint, "" if the
// Set has no such cluster.
func (e *holdsEnv) built(name string) string {
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	info, ok := e.s.Info(name)
	if !ok || len(info.Priorities) == 0 || len(info.Priorities[0]) == 0 {
		return ""
	}
	return info.Priorities[0][0].Key()
}

// A held cluster is followed from its first hold to its last release; the
// snapshot that brings it, with the same routes, builds it, and a hold of
// a cluster the snapshot has builds it at once; a release counts once
// however often it is called; the last release drops the cluster but for
// a route's.
func TestHoldsAddAndRelease(t *testing.T) {
	e := newHoldsEnv(t, Config{FailoverTimeout: time.Second})
	sub := &recordingSub{}
	e.apply(map[string]string{"r": "10.0.0.1:80"})
	var t1, t2, r1 *Hold
	e.do(func() {
		e.h.holds.Subscribe(sub)
		t1 = e.h.holds.Add(e.s, "T")
	})
	if got, want := sub.live, map[string]int{"T": 1}; !maps.Equal(got, want) {
		t.Fatalf("followed after holding T: %v, want %v", got, want)
	}
	if got := e.built("T"); got != "" {
		t.Fatalf("T built before a snapshot has it: %q", got)
	}
	// The same routes: the fast path, but T is new among the roots.
	e.apply(map[string]string{"r": "10.0.0.1:80", "T": "10.0.0.2:80"})
	if got, want := e.built("T"), "10.0.0.2:80"; got != want {
		t.Fatalf("held T once the snapshot brought it: endpoint %q, want %q", got, want)
	}
	e.apply(map[string]string{"r": "10.0.0.1:80", "T": "10.0.0.3:80"})
	if got, want := e.built("T"), "10.0.0.3:80"; got != want {
		t.Errorf("held T after its endpoints changed: endpoint %q, want %q", got, want)
	}
	// A second hold of T, then T2 held when the snapshot has it already.
	e.do(func() { t2 = e.h.holds.Add(e.s, "T") })
	if got, want := sub.live, map[string]int{"T": 1}; !maps.Equal(got, want) {
		t.Errorf("followed after holding T twice: %v, want %v (one per cluster)", got, want)
	}
	// The first hold released twice: the second release changes nothing.
	var first, again bool
	e.do(func() { first, again = e.h.holds.Release(e.s, t1), e.h.holds.Release(e.s, t1) })
	if !first || again {
		t.Errorf("Release of a hold, twice: %v then %v, want true then false", first, again)
	}
	if got, want := e.built("T"), "10.0.0.3:80"; got != want || !e.h.holds.Held("T") || sub.live["T"] != 1 {
		t.Fatalf("T with one of its two holds released (once twice): endpoint %q, held %v, followed %d; want %q, held, followed",
			got, e.h.holds.Held("T"), sub.live["T"], want)
	}
	// A hold of the route's cluster, released: r stays.
	e.do(func() { r1 = e.h.holds.Add(e.s, "r") })
	e.do(func() { e.h.holds.Release(e.s, r1) })
	if got, want := e.built("r"), "10.0.0.1:80"; got != want {
		t.Errorf("route cluster r after its hold was released: endpoint %q, want %q", got, want)
	}
	// T's last hold: T goes at once, and is no longer followed.
	e.do(func() { e.h.holds.Release(e.s, t2) })
	if got := e.built("T"); got != "" || e.h.holds.Held("T") || len(sub.live) != 0 {
		t.Fatalf("T after its last release: endpoint %q, held %v, followed %v; want none", got, e.h.holds.Held("T"), sub.live)
	}
	// The snapshot that still has T (the tree drops it on its next pass)
	// does not bring it back.
	e.apply(map[string]string{"r": "10.0.0.4:80", "T": "10.0.0.3:80"})
	if got := e.built("T"); got != "" {
		t.Errorf("T released, in the next snapshot: endpoint %q, want none", got)
	}
	if got, want := e.built("r"), "10.0.0.4:80"; got != want {
		t.Errorf("route cluster r: endpoint %q, want %q", got, want)
	}
}

// A held cluster is pinned: under ConnectOnFirstRPC, one a snapshot
// brings is awake, where a route's starts idle.
func TestHoldsPinned(t *testing.T) {
	e := newHoldsEnv(t, Config{FailoverTimeout: time.Second, ConnectOnFirstRPC: true})
	e.do(func() { e.h.holds.Add(e.s, "T") })
	e.apply(map[string]string{"r": "10.0.0.1:80", "T": "10.0.0.2:80"})
	e.h.mu.Lock()
	r, _ := e.s.Info("r")
	tt, ok := e.s.Info("T")
	e.h.mu.Unlock()
	if !ok || tt.Idle || !r.Idle {
		t.Errorf("with ConnectOnFirstRPC: held T built %v, idle %v; route's r idle %v; want T built awake, r idle", ok, tt.Idle, r.Idle)
	}
}

// Failing says which held clusters are in TRANSIENT_FAILURE as of the
// last Publish; a held cluster the snapshot has not brought is not, nor
// is a cluster not held. Publish allocates nothing while that is the same.
func TestHoldsFailing(t *testing.T) {
	e := newHoldsEnv(t, Config{FailoverTimeout: time.Second})
	e.do(func() {
		e.h.holds.Add(e.s, "T")
		e.h.holds.Add(e.s, "U") // never brought
	})
	e.apply(map[string]string{"r": "10.0.0.1:80", "T": "10.0.0.2:80"})
	setState := func(addr string, st endpoint.State) {
		e.do(func() {
			ep := e.s.Pool().Lookup(addr)
			e.s.Pool().SetState(ep, ep.Conn(), st, nil)
		})
	}
	if e.h.holds.Failing("T") || e.h.holds.Failing("U") {
		t.Fatal("a held cluster connecting, and one not brought, reported failing")
	}
	setState("10.0.0.2:80", endpoint.TransientFailure)
	setState("10.0.0.1:80", endpoint.TransientFailure)
	if !e.h.holds.Failing("T") {
		t.Error("held T in TRANSIENT_FAILURE not reported failing")
	}
	if e.h.holds.Failing("r") || e.h.holds.Failing("U") {
		t.Error("route cluster r (not held) or U (not brought) reported failing")
	}
	e.h.mu.Lock()
	allocs := testing.AllocsPerRun(10, func() { e.h.holds.Publish(e.s) })
	e.h.mu.Unlock()
	if allocs != 0 {
		t.Errorf("Publish with nothing changed: %v allocations, want 0", allocs)
	}
	setState("10.0.0.2:80", endpoint.Ready)
	if e.h.holds.Failing("T") {
		t.Error("held T ready again, still reported failing")
	}
}

// A new Subscriber (a new config tree) follows every held cluster, once,
// and the one before is let go of them; the same one again changes
// nothing.
func TestHoldsSubscribeReplaced(t *testing.T) {
	e := newHoldsEnv(t, Config{FailoverTimeout: time.Second})
	old, next := &recordingSub{}, &recordingSub{}
	e.do(func() {
		e.h.holds.Add(e.s, "T")
		e.h.holds.Add(e.s, "T")
		e.h.holds.Add(e.s, "U")
		e.h.holds.Subscribe(old) // a tree the holds came before
	})
	if got, want := old.live, map[string]int{"T": 1, "U": 1}; !maps.Equal(got, want) {
		t.Fatalf("followed by the first subscriber: %v, want %v", got, want)
	}
	e.do(func() { e.h.holds.Subscribe(old) })
	if got, want := old.live, map[string]int{"T": 1, "U": 1}; !maps.Equal(got, want) {
		t.Fatalf("followed after the same subscriber again: %v, want %v", got, want)
	}
	e.do(func() { e.h.holds.Subscribe(next) })
	if got, want := next.live, map[string]int{"T": 1, "U": 1}; len(old.live) != 0 || !maps.Equal(got, want) {
		t.Fatalf("after a new subscriber: the old follows %v, the new %v; want none, %v", old.live, got, want)
	}
	e.do(func() { e.h.holds.Subscribe(nil) })
	if len(next.live) != 0 {
		t.Errorf("with no subscriber, the last still follows %v", next.live)
	}
}

// Close lets the Subscriber go of every held cluster; after it a hold
// holds nothing, a release does nothing, and nothing is failing.
func TestHoldsClose(t *testing.T) {
	e := newHoldsEnv(t, Config{FailoverTimeout: time.Second})
	sub := &recordingSub{}
	var held *Hold
	e.do(func() {
		e.h.holds.Subscribe(sub)
		held = e.h.holds.Add(e.s, "T")
	})
	e.apply(map[string]string{"r": "10.0.0.1:80", "T": "10.0.0.2:80"})
	e.do(func() {
		ep := e.s.Pool().Lookup("10.0.0.2:80")
		e.s.Pool().SetState(ep, ep.Conn(), endpoint.TransientFailure, nil)
	})
	if !e.h.holds.Failing("T") {
		t.Fatal("held T in TRANSIENT_FAILURE not reported failing")
	}
	e.h.mu.Lock()
	e.h.holds.Close()
	released := e.h.holds.Release(e.s, held)
	late := e.h.holds.Add(e.s, "V")
	lateReleased := e.h.holds.Release(e.s, late)
	heldT, heldV := e.h.holds.Held("T"), e.h.holds.Held("V")
	e.h.mu.Unlock()
	if len(sub.live) != 0 {
		t.Errorf("after Close the subscriber follows %v, want nothing", sub.live)
	}
	if released || lateReleased || heldT || heldV {
		t.Errorf("after Close: release of a hold %v, hold and release %v, T held %v, V held %v; want all false",
			released, lateReleased, heldT, heldV)
	}
	if e.h.holds.Failing("T") {
		t.Error("after Close, T still reported failing")
	}
}
