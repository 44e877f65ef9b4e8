package cluster

import (
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// countingConn counts the Connects of an endpoint's connection, by the
// endpoint's key.
type countingConn struct {
	key    string
	counts map[string]int
}

func (c *countingConn) Connect()  { c.counts[c.key]++ }
func (c *countingConn) Shutdown() { c.counts["shutdown "+c.key]++ }

// countingHost is a testHost whose connections count their Connects
// (read under its lock).
type countingHost struct {
	testHost
	counts map[string]int
}

func (h *countingHost) NewConn(ep *endpoint.Endpoint) (endpoint.Conn, error) {
	return &countingConn{key: ep.Key(), counts: h.counts}, nil
}

// pickFirstSet is a Set over a countingHost with one pick_first cluster
// "c": endpoints a and b in priority 0, z in priority 1.
func pickFirstSet(t *testing.T) (*countingHost, *Set) {
	t.Helper()
	h := &countingHost{counts: make(map[string]int)}
	s := NewSet(h, &testClock{now: time.Unix(1000, 0)}, Config{FailoverTimeout: time.Second})
	h.set = s
	ep := func(addr string, prio uint32) resources.Locality {
		return resources.Locality{Weight: 1, Priority: prio, Endpoints: []resources.Endpoint{{Addresses: []string{addr}, Weight: 1, HealthStatus: resources.HealthStatusHealthy}}}
	}
	a, b := ep("a", 0), ep("b", 0)
	a.Endpoints = append(a.Endpoints, b.Endpoints...)
	snap := &watchers.Snapshot{
		VirtualHost: &resources.VirtualHost{Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "c"}}},
		Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{"c": {
			Name:      "c",
			Cluster:   &resources.Cluster{Name: "c", Kind: resources.ClusterKindEDS, MaxRequests: 1024, LBPolicy: resources.LBPolicy{Kind: resources.LBPickFirst}},
			Endpoints: &resources.Endpoints{Name: "c", Localities: []resources.Locality{a, ep("z", 1)}},
		}}),
	}
	h.Do(func() { s.Update(snap, map[string]struct{}{"c": {}}) })
	t.Cleanup(func() {
		h.mu.Lock()
		d := s.Close()
		h.mu.Unlock()
		d.Run()
		s.StopWaking()
	})
	return h, s
}

// state returns the cluster's state, the Set's, and the endpoints' wanted
// counts and connects, by name, under the host's lock.
func (h *countingHost) snapshot(s *Set) (cl, set endpoint.State, wanted, connects map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl, _ = s.ClusterState("c")
	wanted, connects = make(map[string]int), make(map[string]int)
	for _, name := range []string{"a", "b", "z"} {
		if ep := s.Pool().Lookup(name); ep != nil {
			wanted[name] = ep.Wanted()
		}
		connects[name] = h.counts[name]
	}
	return cl, s.State(), wanted, connects
}

// pick picks in cluster c with the picker in force.
func (h *countingHost) pick(s *Set) (Result, error) {
	h.mu.Lock()
	p := s.Pickers().Get("c")
	h.mu.Unlock()
	return p.Pick(nil, 0)
}

// setState reports s for the named endpoint, as its transport would.
func (h *countingHost) setState(s *Set, name string, st endpoint.State) {
	h.Do(func() {
		ep := s.Pool().Lookup(name)
		s.Pool().SetState(ep, ep.Conn(), st, nil)
	})
}

// A pick_first cluster whose chosen endpoint loses its connection is idle
// (gRFC A62, and A56 uses an idle priority as a ready one): nothing is
// connected again, no failover starts, and the Set is IDLE; the next pick
// queues its request and has the leaf start a new pass from the first
// endpoint, which connects it.
func TestPickFirstLossIdlesUntilPick(t *testing.T) {
	h, s := pickFirstSet(t)
	h.setState(s, "a", endpoint.Ready)
	if res, err := h.pick(s); err != nil || res.Endpoint.Key() != "a" {
		t.Fatalf("pick with a ready: %v, %v; want a", res.Endpoint, err)
	}
	_, _, _, before := h.snapshot(s)
	h.setState(s, "a", endpoint.Idle)
	cl, set, wanted, connects := h.snapshot(s)
	if cl != endpoint.Idle || set != endpoint.Idle {
		t.Errorf("a lost: cluster %v, Set %v; want IDLE, IDLE", cl, set)
	}
	if wanted["a"]+wanted["b"]+wanted["z"] != 0 || connects["a"] != before["a"] || connects["b"] != 0 || connects["z"] != 0 {
		t.Errorf("a lost: wanted %v, connects %v (a had %d before); want none wanted, none connected", wanted, connects, before["a"])
	}
	if _, err := h.pick(s); err != ErrQueue {
		t.Fatalf("pick with c idle: %v, want ErrQueue", err)
	}
	s.waker.done.Wait() // the pick's wake
	cl, _, wanted, connects = h.snapshot(s)
	if cl != endpoint.Connecting || wanted["a"] != 1 || wanted["b"]+wanted["z"] != 0 || connects["a"] != before["a"]+1 {
		t.Errorf("after a pick: cluster %v, wanted %v, connects %v; want CONNECTING, a wanted and connected again", cl, wanted, connects)
	}
	h.setState(s, "a", endpoint.Ready)
	if res, err := h.pick(s); err != nil || res.Endpoint.Key() != "a" {
		t.Fatalf("pick with a ready again: %v, %v; want a", res.Endpoint, err)
	}
}

// The transport's ExitIdle (gRPC's ClientConn.Connect) starts the new
// pass of an idle pick_first cluster as a pick would.
func TestPickFirstExitIdle(t *testing.T) {
	h, s := pickFirstSet(t)
	h.setState(s, "a", endpoint.Ready)
	h.setState(s, "a", endpoint.Idle)
	if cl, _, _, _ := h.snapshot(s); cl != endpoint.Idle {
		t.Fatalf("a lost: cluster %v, want IDLE", cl)
	}
	h.Do(s.ExitIdle)
	if cl, _, wanted, _ := h.snapshot(s); cl != endpoint.Connecting || wanted["a"] != 1 {
		t.Errorf("after ExitIdle: cluster %v, wanted %v; want CONNECTING, a wanted", cl, wanted)
	}
}
