package outlier

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
)

// manualClock is a clock whose timers fire when the test advances it, in
// deadline order, on the test's goroutine.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c       *manualClock
	at      time.Time
	f       func()
	stopped bool // or fired
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) lbpolicy.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// pending returns the deadlines of the timers not fired or stopped.
func (c *manualClock) pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, t := range c.timers {
		if !t.stopped {
			out = append(out, t.at.Sub(c.now))
		}
	}
	return out
}

// advance moves the time on by d and runs the timers due, outside the
// clock's lock: a timer arms the next.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, rest []*manualTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *manualTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}

type fakeConn struct{}

func (fakeConn) Connect()  {}
func (fakeConn) Shutdown() {}

type fakeDialer struct{}

func (fakeDialer) NewConn(*endpoint.Endpoint) (endpoint.Conn, error) { return fakeConn{}, nil }
func (fakeDialer) Dropped(*endpoint.Endpoint)                        {}

// endpoints returns n endpoints named "a", "b", ..., and a locality of
// them.
func endpoints(n int) ([]*endpoint.Endpoint, []lbpolicy.Locality) {
	pool := endpoint.NewPool(fakeDialer{}, nil)
	var eps []*endpoint.Endpoint
	l := lbpolicy.Locality{Weight: 1}
	for i := range n {
		ep, _ := pool.Get([]string{string(rune('a' + i))}, "")
		eps = append(eps, ep)
		l.Endpoints = append(l.Endpoints, lbpolicy.WeightedEndpoint{Endpoint: ep, Weight: 1})
	}
	return eps, []lbpolicy.Locality{l}
}

// harness is a detector over n endpoints of one locality, on a manual
// clock, whose owner's lock is mu.
type harness struct {
	t   *testing.T
	d   *Detector
	clk *manualClock
	eps []*endpoint.Endpoint
	loc []lbpolicy.Locality
	mu  sync.Mutex
	// runs counts the intervals ended; changes those that changed an
	// ejection.
	runs, changes int
}

func newHarness(t *testing.T, n int, cfg Config) *harness {
	return newMeasuredHarness(t, n, cfg, nil, "")
}

// newMeasuredHarness is newHarness with a detector that reports to m, as
// outliers of backendService.
func newMeasuredHarness(t *testing.T, n int, cfg Config, m Metrics, backendService string) *harness {
	h := &harness{t: t, clk: &manualClock{now: time.Unix(1000, 0)}}
	h.eps, h.loc = endpoints(n)
	h.d = New(h.clk, func(f func() bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.runs++
		if f() {
			h.changes++
		}
	}, m, backendService)
	h.mu.Lock()
	h.d.Update(cfg, h.loc)
	h.mu.Unlock()
	t.Cleanup(func() {
		h.mu.Lock()
		h.d.Stop()
		h.mu.Unlock()
	})
	return h
}

// calls records ok successes and failed failures on each endpoint, by
// index.
func (h *harness) calls(outcomes ...[2]int) {
	for i, o := range outcomes {
		for range o[0] {
			h.d.Record(h.eps[i], true)
		}
		for range o[1] {
			h.d.Record(h.eps[i], false)
		}
	}
}

// end advances the clock by dt, which must end exactly one interval, and
// reports whether that interval changed an ejection.
func (h *harness) end(dt time.Duration) bool {
	h.t.Helper()
	h.mu.Lock()
	runs, changes := h.runs, h.changes
	h.mu.Unlock()
	h.clk.advance(dt)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runs != runs+1 {
		h.t.Fatalf("advancing %v ended %d intervals, want 1", dt, h.runs-runs)
	}
	return h.changes > changes
}

// ejected reports whether endpoint i is ejected, under the owner's lock.
func (h *harness) ejected(i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.d.Ejected(h.eps[i])
}

// nEjected counts the endpoints ejected.
func (h *harness) nEjected() int {
	n := 0
	for i := range h.eps {
		if h.ejected(i) {
			n++
		}
	}
	return n
}
