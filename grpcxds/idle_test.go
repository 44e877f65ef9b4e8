package grpcxds

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// lazyCC is a ClientConn that records the SubConns made and connected, by
// address, and hands each published state to the test.
type lazyCC struct {
	stuckCC
	mu        sync.Mutex
	made      map[string]*lazySC
	connected map[string]int
	states    chan balancer.State
}

type lazySC struct {
	balancer.SubConn
	cc       *lazyCC
	addr     string
	listener func(balancer.SubConnState)
	shut     atomic.Bool
}

func (sc *lazySC) Connect() {
	sc.cc.mu.Lock()
	defer sc.cc.mu.Unlock()
	sc.cc.connected[sc.addr]++
}
func (sc *lazySC) Shutdown() { sc.shut.Store(true) }

func newLazyCC() *lazyCC {
	return &lazyCC{made: make(map[string]*lazySC), connected: make(map[string]int), states: make(chan balancer.State, 100)}
}

func (cc *lazyCC) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	sc := &lazySC{cc: cc, addr: addrs[0].Addr, listener: opts.StateListener}
	if old := cc.made[sc.addr]; old != nil && !old.shut.Load() {
		return nil, fmt.Errorf("a second SubConn to %s", sc.addr)
	}
	cc.made[sc.addr] = sc
	return sc, nil
}

func (cc *lazyCC) UpdateState(s balancer.State) { cc.states <- s }

// madeAndConnected returns the addresses of the SubConns made and connected so far.
func (cc *lazyCC) madeAndConnected() (made, connected []string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for a := range cc.made {
		made = append(made, a)
	}
	for a := range cc.connected {
		connected = append(connected, a)
	}
	return made, connected
}

// next returns the next state published, failing the test after a
// deadline.
func (cc *lazyCC) next(t *testing.T) balancer.State {
	t.Helper()
	select {
	case s := <-cc.states:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no picker published within 10s")
		return balancer.State{}
	}
}

// pickCluster picks, with the published picker, in the cluster of the
// given name, for an RPC that ends at once.
func pickCluster(t *testing.T, s balancer.State, name string) (balancer.PickResult, error) {
	t.Helper()
	return pickEnded(clusterPicker(t, s, name))
}

// pickHeld is pickCluster for an RPC that runs until the caller calls
// res.Done.
func pickHeld(t *testing.T, s balancer.State, name string) (balancer.PickResult, error) {
	t.Helper()
	return pickIn(clusterPicker(t, s, name), balancer.PickInfo{}, 0)
}

// clusterPicker is the published route picker's picker of the named
// cluster. It fails the test with t.Fatal, so it is for the test's own
// goroutine: a goroutine the test starts picks with pickEnded.
func clusterPicker(t *testing.T, s balancer.State, name string) cluster.Picker {
	t.Helper()
	rp, ok := s.Picker.(*routePicker)
	if !ok {
		t.Fatalf("published picker %T, want the route picker", s.Picker)
	}
	cp := rp.clusters.Get(name)
	if cp == nil {
		t.Fatalf("the route picker has no cluster %s", name)
	}
	return cp
}

// pickEnded picks in cp for an RPC that ends at once; unlike pickCluster
// it does not fail the test, so a goroutine the test starts may call it.
func pickEnded(cp cluster.Picker) (balancer.PickResult, error) {
	res, err := pickIn(cp, balancer.PickInfo{}, 0)
	if err == nil && res.Done != nil {
		res.Done(balancer.DoneInfo{})
	}
	return res, err
}

func newLazyBalancer(cc *lazyCC, clk clock) *xdsBalancer {
	b := newStuckBalancer(&cc.stuckCC, clk, time.Second)
	b.cc = cc
	b.set.Configure(cluster.Config{FailoverTimeout: time.Second, ConnectOnFirstRPC: true})
	return b
}

// newSleepyBalancer is a balancer whose clusters connect on first RPC and
// sleep after a minute unused, on a manual clock.
func newSleepyBalancer() (*xdsBalancer, *lazyCC, *manualClock) {
	clk := &manualClock{now: time.Unix(1000, 0)}
	cc := newLazyCC()
	b := newLazyBalancer(cc, clk)
	b.set.Configure(cluster.Config{FailoverTimeout: time.Second, ConnectOnFirstRPC: true, ClusterIdleTimeout: time.Minute})
	return b, cc, clk
}

// With ConnectOnFirstRPC no SubConn is made until a pick in a cluster;
// then exactly that cluster's endpoints are made and connected, however
// many picks race for it, its failover timer runs, and its RPCs go
// through once an endpoint is ready. The other clusters stay idle.
func TestIdleClusterWakesOnFirstPick(t *testing.T) {
	t.Parallel()
	const n, m = 50, 3
	cc := newLazyCC()
	b := newLazyBalancer(cc, &manualClock{now: time.Unix(1000, 0)})
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersStateOf(n, m)}); err != nil {
		t.Fatal(err)
	}
	s := cc.next(t)
	if s.ConnectivityState != connectivity.Idle {
		t.Errorf("channel state %v with no cluster used, want IDLE", s.ConnectivityState)
	}
	if made, _ := cc.madeAndConnected(); len(made) != 0 {
		t.Fatalf("%d SubConns made before any pick, want none: %v", len(made), made)
	}
	b.mu.Lock()
	st := b.set.Stats()
	timers, conns, built := st.FailoverEntries, b.set.Pool().Len(), st.Built
	b.mu.Unlock()
	if timers != 0 || conns != 0 || built != 0 {
		t.Errorf("idle clusters hold %d failover timers, %d endpoints, %d with priorities; want nothing built", timers, conns, built)
	}

	// Twenty RPCs pick cluster c7 at once: each is queued, and one wake
	// follows.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	c7 := clusterPicker(t, s, "c7")
	for range 20 {
		wg.Go(func() {
			if _, err := pickEnded(c7); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
				errs <- fmt.Errorf("pick in an idle cluster: %v, want ErrNoSubConnAvailable (queued)", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s = cc.next(t)
	if s.ConnectivityState != connectivity.Connecting {
		t.Errorf("channel state %v after c7 woke, want CONNECTING", s.ConnectivityState)
	}
	made, connected := cc.madeAndConnected()
	want := map[string]bool{"10.0.0.21:80": true, "10.0.0.22:80": true, "10.0.0.23:80": true} // c7's, k = 7*3+j
	if len(made) != m || len(connected) != m {
		t.Fatalf("after picks in c7: SubConns made %v, connected %v; want c7's %d endpoints", made, connected, m)
	}
	for _, a := range made {
		if !want[a] {
			t.Errorf("SubConn made to %s, not an endpoint of c7", a)
		}
	}
	b.mu.Lock()
	timers = b.set.Stats().FailoverEntries
	b.mu.Unlock()
	if timers != 1 {
		t.Errorf("%d failover timers armed once c7 woke, want 1", timers)
	}
	if _, err := pickCluster(t, s, "c7"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("pick in c7 while connecting: %v, want queued", err)
	}
	if _, err := pickCluster(t, s, "c8"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("pick in idle c8: %v, want queued", err)
	}
	cc.next(t) // c8 woke
	cc.mu.Lock()
	sc := cc.made["10.0.0.22:80"]
	cc.mu.Unlock()
	sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	s = cc.next(t)
	if s.ConnectivityState != connectivity.Ready {
		t.Errorf("channel state %v with an endpoint of c7 ready, want READY", s.ConnectivityState)
	}
	res, err := pickCluster(t, s, "c7")
	if err != nil || res.SubConn != sc {
		t.Errorf("pick in c7 with one endpoint ready: %v, %v; want that endpoint", res.SubConn, err)
	}
	if made, _ := cc.madeAndConnected(); len(made) != 2*m {
		t.Errorf("%d SubConns made after picks in c7 and c8, want %d", len(made), 2*m)
	}
}

// A woken cluster stays awake through updates: endpoints it gains are
// connected at once. A cluster the routes drop and name again starts idle
// again, and a cluster in error fails its RPCs rather than waiting.
func TestIdleClusterAcrossUpdates(t *testing.T) {
	t.Parallel()
	cc := newLazyCC()
	b := newLazyBalancer(cc, &manualClock{now: time.Unix(1000, 0)})
	defer b.Close()
	state := clustersStateOf(3, 1)
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: state}); err != nil {
		t.Fatal(err)
	}
	s := cc.next(t)
	if _, err := pickCluster(t, s, "c1"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("first pick in c1: %v, want queued", err)
	}
	cc.next(t)

	// c1 gains an endpoint; c2 is dropped from the routes.
	snap, _ := SnapshotFromState(state)
	c1 := *snap.Clusters.Get("c1")
	eps := *c1.Endpoints
	eps.Localities = []resources.Locality{{Weight: 1, Endpoints: append(slices.Clone(eps.Localities[0].Endpoints),
		resources.Endpoint{Addresses: []string{"10.9.9.9:80"}, Weight: 1})}}
	c1.Endpoints = &eps
	vh := &resources.VirtualHost{Routes: snap.VirtualHost.Routes[:2]}
	next := &watchers.Snapshot{VirtualHost: vh, Clusters: snap.Clusters.With("c1", &c1)}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(next)}}); err != nil {
		t.Fatal(err)
	}
	s = cc.next(t)
	cc.mu.Lock()
	gained := cc.connected["10.9.9.9:80"]
	cc.mu.Unlock()
	if gained != 1 {
		t.Errorf("the endpoint woken c1 gained was connected %d times, want once, at once", gained)
	}
	if _, err := pickCluster(t, s, "c0"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("pick in idle c0: %v, want queued", err)
	}
	cc.next(t)

	// c2 named again: idle, nothing made for it.
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: state}); err != nil {
		t.Fatal(err)
	}
	cc.next(t)
	b.mu.Lock()
	info, _ := b.set.Info("c2")
	idle := info.Idle
	b.mu.Unlock()
	if !idle {
		t.Error("c2, dropped and named again, is not idle")
	}
	cc.mu.Lock()
	_, madeC2 := cc.made["10.0.0.2:80"]
	cc.mu.Unlock()
	if madeC2 {
		t.Error("a SubConn was made to c2's endpoint, never picked")
	}

	// A cluster in error: its RPCs fail with the error, idle or not.
	bad := *snap.Clusters.Get("c2")
	bad.Err = errors.New("cluster c2 does not exist")
	bad.Cluster, bad.Endpoints = nil, nil
	errSnap := &watchers.Snapshot{VirtualHost: snap.VirtualHost, Clusters: snap.Clusters.With("c2", &bad)}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(errSnap)}}); err != nil {
		t.Fatal(err)
	}
	s = cc.next(t)
	if _, err := pickCluster(t, s, "c2"); err == nil || errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("pick in c2 in error: %v, want the cluster's error", err)
	}
	// The same error again leaves c2's picker as it was (a new snapshot
	// with the virtual host, so every cluster is looked at); the error
	// gone, c2 is idle.
	before := s.Picker.(*routePicker).clusters.Get("c2")
	again := &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: snap.VirtualHost.Routes}, Clusters: errSnap.Clusters}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(again)}}); err != nil {
		t.Fatal(err)
	}
	s = cc.next(t)
	if after := s.Picker.(*routePicker).clusters.Get("c2"); after != before {
		t.Errorf("the same error again gave c2 a new picker: %v, was %v", after, before)
	}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: state}); err != nil {
		t.Fatal(err)
	}
	s = cc.next(t)
	if _, err := pickCluster(t, s, "c2"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("pick in c2, its error gone: %v, want queued (idle)", err)
	}
}

// With ClusterIdleTimeout, a cluster no RPC picked between two sweeps goes
// idle: its SubConn is shut down, a late report of the old SubConn is
// ignored, and its next RPC connects it again with a new one. A cluster
// in use stays awake, and with every cluster idle the sweep stops.
func TestIdleClusterSleepsWhenUnused(t *testing.T) {
	t.Parallel()
	b, cc, clk := newSleepyBalancer()
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersStateOf(3, 1)}); err != nil {
		t.Fatal(err)
	}
	s := cc.next(t)
	wake := func(name string) balancer.State {
		t.Helper()
		if _, err := pickCluster(t, s, name); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
			t.Fatalf("first pick in %s: %v, want queued", name, err)
		}
		return cc.next(t)
	}
	ready := func(addr string) balancer.State {
		t.Helper()
		cc.mu.Lock()
		sc := cc.made[addr]
		cc.mu.Unlock()
		sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
		return cc.next(t)
	}
	s = wake("c0")
	s = wake("c1")
	s = ready("10.0.0.0:80")
	s = ready("10.0.0.1:80")
	cc.mu.Lock()
	oldC1 := cc.made["10.0.0.1:80"]
	cc.mu.Unlock()

	// The first sweep spares both: the RPCs that woke them count.
	clk.advance(time.Minute)
	select {
	case st := <-cc.states:
		t.Fatalf("the first sweep published a picker (%v): both clusters were used", st.ConnectivityState)
	default:
	}
	if _, err := pickCluster(t, s, "c0"); err != nil {
		t.Fatalf("pick in ready c0: %v", err)
	}
	clk.advance(time.Minute) // c1 unused since the last sweep
	s = cc.next(t)
	if !oldC1.shut.Load() {
		t.Error("c1 went idle, but its SubConn was not shut down")
	}
	if made, _ := cc.madeAndConnected(); len(made) != 2 {
		t.Errorf("SubConns made %v, want c0's and c1's", made)
	}
	cc.mu.Lock()
	c0 := cc.made["10.0.0.0:80"]
	cc.mu.Unlock()
	if c0.shut.Load() {
		t.Error("c0, in use, had its SubConn shut down")
	}
	b.mu.Lock()
	conns := b.set.Pool().Len()
	b.mu.Unlock()
	if conns != 1 {
		t.Errorf("the balancer holds %d endpoints with c1 asleep, want c0's alone", conns)
	}
	if s.ConnectivityState != connectivity.Ready {
		t.Errorf("channel state %v with c0 ready and c1 idle, want READY", s.ConnectivityState)
	}
	if _, err := pickCluster(t, s, "c1"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("pick in c1 gone idle: %v, want queued", err)
	}
	s = cc.next(t) // c1 woke: a new SubConn
	cc.mu.Lock()
	newC1 := cc.made["10.0.0.1:80"]
	connects := cc.connected["10.0.0.1:80"]
	cc.mu.Unlock()
	if newC1 == oldC1 || connects != 2 {
		t.Fatalf("c1 woke again with SubConn %p (old %p), connected %d times; want a new one, connected", newC1, oldC1, connects)
	}
	// The old SubConn reports late: not taken for the new one.
	oldC1.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	select {
	case s = <-cc.states: // published at once, if at all: the listener runs the balancer's update
	default:
	}
	if _, err := pickCluster(t, s, "c1"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("pick in c1 after its old SubConn reported READY: %v, want queued (the new one is connecting)", err)
	}
	s = ready("10.0.0.1:80")
	if res, err := pickCluster(t, s, "c1"); err != nil || res.SubConn != newC1 {
		t.Errorf("pick in c1 with its new SubConn ready: %v, %v", res.SubConn, err)
	}

	// Unused, both sleep within two sweeps, and the sweep stops.
	clk.advance(time.Minute)
	clk.advance(time.Minute)
	b.mu.Lock()
	i0, _ := b.set.Info("c0")
	i1, _ := b.set.Info("c1")
	idle0, idle1, sweeping := i0.Idle, i1.Idle, b.set.Stats().IdleSweep
	b.mu.Unlock()
	if !idle0 || !idle1 || sweeping {
		t.Errorf("after two unused sweeps: c0 idle %v, c1 idle %v, sweep armed %v; want both idle, no sweep", idle0, idle1, sweeping)
	}
}

// An endpoint a sleeping cluster wanted that another cluster lists at a
// priority it does not use keeps its place in that cluster, but loses its
// SubConn; the cluster that needs it again makes a new one.
func TestIdleClusterReleasesSharedEndpoint(t *testing.T) {
	t.Parallel()
	b, cc, clk := newSleepyBalancer()
	defer b.Close()
	const x, y = "10.1.0.1:80", "10.1.0.2:80"
	ep := func(addr string) []resources.Endpoint {
		return []resources.Endpoint{{Addresses: []string{addr}, Weight: 1}}
	}
	cluster := func(name string, locs ...resources.Locality) *watchers.ClusterConfig {
		return &watchers.ClusterConfig{
			Name:      name,
			Cluster:   &resources.Cluster{Name: name, Kind: resources.ClusterKindEDS, MaxRequests: 1024},
			Endpoints: &resources.Endpoints{Name: name, Localities: locs},
		}
	}
	snap := &watchers.Snapshot{
		VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{
			{Action: resources.RouteActionRoute, Cluster: "c0"},
			{Action: resources.RouteActionRoute, Cluster: "c1"},
		}},
		Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{
			// c0: x, and y at a lower priority; c1: y.
			"c0": cluster("c0", resources.Locality{Weight: 1, Endpoints: ep(x)}, resources.Locality{Weight: 1, Priority: 1, Endpoints: ep(y)}),
			"c1": cluster("c1", resources.Locality{Weight: 1, Endpoints: ep(y)}),
		}),
	}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(snap)}}); err != nil {
		t.Fatal(err)
	}
	s := cc.next(t)
	for _, name := range []string{"c0", "c1"} {
		if _, err := pickCluster(t, s, name); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
			t.Fatalf("first pick in %s: %v, want queued", name, err)
		}
		s = cc.next(t)
	}
	cc.mu.Lock()
	scX, scY := cc.made[x], cc.made[y]
	cc.mu.Unlock()
	scX.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	s = cc.next(t)
	if res, err := pickCluster(t, s, "c0"); err != nil || res.SubConn != scX {
		t.Fatalf("pick in c0 with x ready: %v, %v", res.SubConn, err)
	}
	clk.advance(time.Minute) // both used: spared
	if res, err := pickCluster(t, s, "c0"); err != nil || res.SubConn != scX {
		t.Fatalf("pick in c0 with x ready: %v, %v", res.SubConn, err)
	}
	clk.advance(time.Minute) // c1 unused: asleep
	cc.next(t)
	if !scY.shut.Load() {
		t.Error("y, wanted by c1 alone, kept its SubConn after c1 slept")
	}
	if scX.shut.Load() {
		t.Error("x, in use by c0, lost its SubConn")
	}
	b.mu.Lock()
	listed := b.set.Pool().Lookup(y) != nil
	b.mu.Unlock()
	if !listed {
		t.Error("y, listed by c0, was forgotten")
	}
	// x fails: c0 moves to y, with a new SubConn.
	scX.listener(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errors.New("refused")})
	cc.next(t)
	cc.mu.Lock()
	newY := cc.made[y]
	cc.mu.Unlock()
	if newY == scY || newY.shut.Load() {
		t.Errorf("c0 failing over to y: SubConn %p (released one %p); want a new one", newY, scY)
	}
}

// RPCs to many idle clusters at once wake them together: one goroutine,
// one picker published for all that were asked for while it waited.
func TestIdleClustersWakeTogether(t *testing.T) {
	t.Parallel()
	const n = 20
	cc := newLazyCC()
	b := newLazyBalancer(cc, &manualClock{now: time.Unix(1000, 0)})
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersStateOf(n, 1)}); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		records []slog.Record
		added   = make(chan struct{}, 1)
	)
	b.mu.Lock()
	b.logger = slog.New(recordingHandler{msg: "clusters connecting on their first RPC", mu: &mu, records: &records, added: added})
	b.mu.Unlock()
	s := cc.next(t)
	b.mu.Lock() // the waking goroutine waits for it: every pick below is queued first
	for i := range n {
		if _, err := pickCluster(t, s, fmt.Sprintf("c%d", i)); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
			b.mu.Unlock()
			t.Fatalf("first pick in c%d: %v, want queued", i, err)
		}
	}
	b.mu.Unlock()
	s = cc.next(t)
	if made, connected := cc.madeAndConnected(); len(made) != n || len(connected) != n {
		t.Errorf("after picks in %d idle clusters: %d SubConns made, %d connected; want %d, in one wake", n, len(made), len(connected), n)
	}
	select {
	case st := <-cc.states:
		t.Errorf("a second picker (%v) published: the wakes were not one batch", st.ConnectivityState)
	default:
	}
	if s.ConnectivityState != connectivity.Connecting {
		t.Errorf("channel state %v, want CONNECTING", s.ConnectivityState)
	}
	// Written once the balancer's lock is released, after the picker.
	select {
	case <-added:
	case <-time.After(10 * time.Second):
		t.Fatal("no log line for the wake within 10s")
	}
	mu.Lock()
	defer mu.Unlock()
	records[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "count" && a.Value.Int64() != n {
			t.Errorf("the wake's log line counts %v clusters, want %d", a.Value, n)
		}
		return true
	})
}

// A pick racing Close starts nothing: no goroutine outlives the balancer.
func TestIdlePickAfterClose(t *testing.T) {
	t.Parallel()
	cc := newLazyCC()
	b := newLazyBalancer(cc, &manualClock{now: time.Unix(1000, 0)})
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersStateOf(2, 1)}); err != nil {
		t.Fatal(err)
	}
	s := cc.next(t)
	b.Close()
	if _, err := pickCluster(t, s, "c0"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Errorf("pick after Close: %v, want queued", err)
	}
	b.mu.Lock()
	st := b.set.Stats()
	b.mu.Unlock()
	waking, queued := st.Waking, st.WakesQueued
	if waking || queued != 0 {
		t.Errorf("a pick after Close started waking (%v) or queued %d clusters", waking, queued)
	}
}

// An RPC still running keeps its cluster awake however long it lasts (a
// stream picks once); once it ends, the cluster sleeps at the next sweep.
func TestIdleClusterAwakeWhileRPCRuns(t *testing.T) {
	t.Parallel()
	b, cc, clk := newSleepyBalancer()
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersStateOf(1, 1)}); err != nil {
		t.Fatal(err)
	}
	s := cc.next(t)
	if _, err := pickCluster(t, s, "c0"); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("first pick in c0: %v, want queued", err)
	}
	cc.next(t)
	cc.mu.Lock()
	sc := cc.made["10.0.0.0:80"]
	cc.mu.Unlock()
	sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	s = cc.next(t)
	res, err := pickHeld(t, s, "c0") // a stream: Done when it ends
	if err != nil {
		t.Fatal(err)
	}
	asleep := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		info, _ := b.set.Info("c0")
		return info.Idle
	}
	for range 5 {
		clk.advance(time.Minute)
	}
	if asleep() || sc.shut.Load() {
		t.Fatal("c0 slept with an RPC still running on it")
	}
	res.Done(balancer.DoneInfo{})
	clk.advance(time.Minute)
	if !asleep() || !sc.shut.Load() {
		t.Error("c0 did not sleep at the sweep after its last RPC ended")
	}
}
