package cluster

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// testHost is a Host with no transport behind it: its lock is a mutex,
// its connections fakeConns, and every event ends as a transport's
// would, settling the Set and finishing it.
type testHost struct {
	fakeDialer
	mu  sync.Mutex
	set *Set
}

func (h *testHost) Do(f func()) {
	h.mu.Lock()
	f()
	h.set.Settle()
	h.set.Pickers()
	d := h.set.Finish()
	h.mu.Unlock()
	d.Run()
}
func (*testHost) Security(*watchers.ClusterConfig) (any, error) { return nil, nil }
func (*testHost) Endpoint(pool *endpoint.Pool, spec EndpointSpec) *endpoint.Endpoint {
	ep, _ := pool.Get(spec.Addrs, "")
	return ep
}
func (*testHost) StartDNS(*Resolution)                   {}
func (*testHost) Log(slog.Level, string, ...any)         {}
func (*testHost) Pinned(string) bool                     { return false }
func (*testHost) HeaderHash(req any, name string) uint64 { return testHeaderHash(req, name) }

// testClock runs its timers when the test advances it.
type testClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*testTimer
}

type testTimer struct {
	at   time.Time
	f    func()
	done bool
}

func (t *testTimer) Stop() bool { was := !t.done; t.done = true; return was }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) AfterFunc(d time.Duration, f func()) lbpolicy.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &testTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// advance moves the time on by d and runs the timers due, with no lock
// held: they take the host's.
func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*testTimer
	for _, t := range c.timers {
		if !t.done && !t.at.After(c.now) {
			t.done = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// A Set needs no transport: over a host of its own, a cluster waits for
// its first priority while it connects, fails over to the second at the
// failover timeout (gRFC A56), and picks there once that one is ready.
func TestSetFailoverWithoutTransport(t *testing.T) {
	clk := &testClock{now: time.Unix(1000, 0)}
	h := &testHost{}
	s := NewSet(h, clk, Config{FailoverTimeout: time.Second})
	h.set = s
	eps := func(addr string) []resources.Endpoint {
		return []resources.Endpoint{{Addresses: []string{addr}, Weight: 1, HealthStatus: resources.HealthStatusHealthy}}
	}
	snap := &watchers.Snapshot{
		VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "c"}}},
		Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{"c": {
			Name:    "c",
			Cluster: &resources.Cluster{Name: "c", Kind: resources.ClusterKindEDS, MaxRequests: 1024, LBPolicy: resources.LBPolicy{Kind: resources.LBRoundRobin}},
			Endpoints: &resources.Endpoints{Name: "c", Localities: []resources.Locality{
				{Weight: 1, Priority: 0, Endpoints: eps("a")},
				{Weight: 1, Priority: 1, Endpoints: eps("b")},
			}},
		}}),
	}
	h.Do(func() { s.Update(snap, map[string]struct{}{"c": {}}) })
	pick := func() (Result, error) {
		h.mu.Lock()
		p := s.Pickers().Get("c")
		h.mu.Unlock()
		return p.Pick(nil, 0)
	}
	h.mu.Lock()
	a, b := s.Pool().Lookup("a"), s.Pool().Lookup("b")
	h.mu.Unlock()
	if a == nil || b == nil {
		t.Fatal("the cluster's endpoints are not in the pool")
	}
	h.Do(func() { s.Pool().SetState(a, a.Conn(), endpoint.Connecting, nil) })
	if _, err := pick(); err != ErrQueue {
		t.Fatalf("pick with priority 0 connecting: %v, want ErrQueue", err)
	}
	if b.Wanted() != 0 {
		t.Error("priority 1 wanted before priority 0's failover timeout")
	}
	clk.advance(time.Second + failoverSlack(time.Second))
	if b.Wanted() != 1 || a.Wanted() != 1 {
		t.Fatalf("after the failover timeout: a wanted %d, b %d; want both", a.Wanted(), b.Wanted())
	}
	h.Do(func() { s.Pool().SetState(b, b.Conn(), endpoint.Ready, nil) })
	res, err := pick()
	if err != nil || res.Endpoint != b {
		t.Fatalf("pick after the failover, b ready: %v, %v; want b", res.Endpoint, err)
	}
	res.Done.Finish(nil, nil)
	h.mu.Lock()
	state := s.State()
	d := s.Close()
	h.mu.Unlock()
	d.Run()
	s.StopWaking()
	if state != endpoint.Ready {
		t.Errorf("Set state %v with its cluster using a ready priority, want READY", state)
	}
}

// The roots of a virtual host are the clusters its forwarding routes name,
// weighted ones included, once each; redirects, direct responses and
// plugin routes name none.
func TestRouteClusters(t *testing.T) {
	vh := &resources.VirtualHost{Routes: []*resources.Route{
		{Action: resources.RouteActionRoute, Cluster: "a"},
		{Action: resources.RouteActionRoute, WeightedClusters: []resources.WeightedCluster{{Name: "b", Weight: 1}, {Name: "a", Weight: 1}}},
		{Action: resources.RouteActionRoute, ClusterSpecifierPlugin: "rls"},
		{Action: resources.RouteActionNonForwarding, Cluster: "c"},
	}}
	got := RouteClusters(vh)
	if len(got) != 2 {
		t.Fatalf("RouteClusters = %v; want a and b", got)
	}
	for _, name := range []string{"a", "b"} {
		if _, ok := got[name]; !ok {
			t.Fatalf("RouteClusters = %v; want a and b", got)
		}
	}
	if got := RouteClusters(nil); got == nil || len(got) != 0 {
		t.Fatalf("RouteClusters(nil) = %v; want an empty map", got)
	}
}
