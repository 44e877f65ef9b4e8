package lbpolicy

import (
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// fakeConn stands for a transport's connection: it only has a name.
type fakeConn struct{ name string }

func (*fakeConn) Connect()  {}
func (*fakeConn) Shutdown() {}

// watchingConn is a fakeConn that carries out-of-band load reports: its
// watches go to watch.
type watchingConn struct {
	fakeConn
	watch func(name string, period time.Duration, w *EndpointWeight) func()
}

func (c *watchingConn) WatchLoad(period time.Duration, w *EndpointWeight) func() {
	return c.watch(c.name, period, w)
}

// fakeDialer makes fakeConns, or watchingConns if watch is set.
type fakeDialer struct {
	watch func(name string, period time.Duration, w *EndpointWeight) func()
}

func (d fakeDialer) NewConn(ep *endpoint.Endpoint) (endpoint.Conn, error) {
	if d.watch != nil {
		return &watchingConn{fakeConn{name: ep.Key()}, d.watch}, nil
	}
	return &fakeConn{name: ep.Key()}, nil
}
func (fakeDialer) Dropped(*endpoint.Endpoint) {}

// testLeaf is a leaf over endpoints of a pool of its own.
type testLeaf struct {
	*Leaf
	pool *endpoint.Pool
}

// leaf builds a leaf of one locality per localities entry (weights 1, 2,
// ...), each with endpoints of the given weights named "a", "b", ...,
// all connected and in state.
func leaf(state endpoint.State, localities ...[]uint32) *testLeaf {
	return leafWith(fakeDialer{}, state, localities...)
}

// leafWith is leaf with connections made by d.
func leafWith(d fakeDialer, state endpoint.State, localities ...[]uint32) *testLeaf {
	l := &testLeaf{Leaf: &Leaf{Policy: &resources.LBPolicy{MinRingSize: 1024, MaxRingSize: 8 << 20}},
		pool: endpoint.NewPool(d, nil)}
	n := 0
	for i, eps := range localities {
		loc := Locality{Weight: uint32(i + 1)}
		for _, w := range eps {
			ep, _ := l.pool.Get([]string{string(rune('a' + n))}, "")
			n++
			l.pool.Want(ep)
			l.pool.SetState(ep, ep.Conn(), state, nil)
			loc.Endpoints = append(loc.Endpoints, WeightedEndpoint{ep, w})
		}
		l.Localities = append(l.Localities, loc)
	}
	return l
}

// with sets l's policy (with the default ring sizes) and returns l.
func (l *testLeaf) with(policy resources.LBPolicy) *testLeaf {
	policy.MinRingSize, policy.MaxRingSize = 1024, 8<<20
	l.Policy = &policy
	return l
}

// ep returns endpoint i of locality loc.
func (l *testLeaf) ep(loc, i int) *endpoint.Endpoint { return l.Localities[loc].Endpoints[i].Endpoint }

// set reports state s for the endpoint, as its transport would.
func (l *testLeaf) set(ep *endpoint.Endpoint, s endpoint.State) {
	l.pool.SetState(ep, ep.Conn(), s, nil)
}

func readyPicker(t *testing.T, l *testLeaf) Picker {
	t.Helper()
	p := l.Picker()
	if p == nil {
		t.Fatal("no picker for a leaf with ready endpoints")
	}
	return p
}

// picks makes n picks and counts them by endpoint name; a pick that
// counted a request in flight is finished at once.
func picks(t *testing.T, p Picker, n int) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		res, err := p.Pick(0)
		if err != nil {
			t.Fatal(err)
		}
		if name := connName(res.Conn); name != res.Endpoint.Key() {
			t.Fatalf("picked %s with the connection of %s", res.Endpoint.Key(), name)
		}
		if res.Counted {
			res.Endpoint.CallFinished()
		}
		got[res.Endpoint.Key()]++
	}
	return got
}

func within(got, want, slack int) bool { return got >= want-slack && got <= want+slack }

// fakeClock is a clock whose time tests set, and whose timers fire when
// advance passes them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool { was := !t.stopped; t.stopped = true; return was }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// advance moves the time on by d, and runs the timers due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now) {
			due = append(due, t)
		} else if !t.stopped {
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, t := range due {
		t.stopped = true
		t.f()
	}
}

// connName is the name of a fakeConn or watchingConn.
func connName(c endpoint.Conn) string {
	if w, ok := c.(*watchingConn); ok {
		return w.name
	}
	return c.(*fakeConn).name
}
