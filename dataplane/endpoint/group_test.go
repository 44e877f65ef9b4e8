package endpoint

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// testLimit is a StreamLimit the test sets.
type testLimit struct {
	v     atomic.Uint32
	known atomic.Bool
}

func (l *testLimit) Get() (uint32, bool) { return l.v.Load(), l.known.Load() }

// limitOf is a known limit of n streams.
func limitOf(n uint32) *testLimit {
	l := &testLimit{}
	l.v.Store(n)
	l.known.Store(true)
	return l
}

// testGroup is a Group of named connections and the transport's side of
// it: it counts the attempts the group asked for.
type testGroup struct {
	*Group[string]
	t     *testing.T
	asked atomic.Int32
}

// newTestGroup is the group of an endpoint allowed max connections, whose
// own connection "own" has a limit of lim streams and is in state s.
func newTestGroup(t *testing.T, lim StreamLimit, s State, max int) *testGroup {
	tg := &testGroup{t: t}
	tg.Group = NewGroup("own", lim, s, func() { tg.asked.Add(1) })
	tg.SetMax(max)
	return tg
}

// pick picks, and fails the test unless the outcome is want: a
// connection's name, "queue" or "none".
func (tg *testGroup) pick(step, want string) *Member[string] {
	tg.t.Helper()
	m, queue := tg.Pick()
	got := "none"
	switch {
	case queue:
		got = "queue"
	case m != nil:
		got = m.Conn
	}
	if got != want {
		tg.t.Fatalf("%s: picked %s, want %s", step, got, want)
	}
	return m
}

// attempts fails the test unless the group asked for n attempts so far.
func (tg *testGroup) attempts(step string, n int32) {
	tg.t.Helper()
	if got := tg.asked.Load(); got != n {
		tg.t.Fatalf("%s: %d attempts asked for, want %d", step, got, n)
	}
}

// add runs the attempt the group asked for as the transport does when the
// group says to add a connection: a new one named name, of limit lim.
func (tg *testGroup) add(step, name string, lim StreamLimit) *Member[string] {
	tg.t.Helper()
	idle, add := tg.Attempt()
	if idle != nil || !add {
		tg.t.Fatalf("%s: Attempt: idle %v, add %v; want a new connection", step, idle, add)
	}
	m := NewMember(name, lim)
	tg.Add(m)
	return m
}

// A request goes to the oldest ready connection with a stream free, the
// oldest being the one ready first, not the one made first; a stream
// given back is taken again by the next request.
func TestGroupPicksOldestWithStreamFree(t *testing.T) {
	g := newTestGroup(t, limitOf(2), Ready, 3)
	g.pick("own's first stream", "own")
	g.pick("own's second stream", "own")
	g.pick("own full", "queue")
	b := g.add("attempt", "b", limitOf(1))
	g.pick("b connecting", "queue")
	g.asked.Store(0)
	if _, wake := g.SetState(b, TransientFailure); !wake {
		t.Fatal("b failed with picks queued: no release")
	}
	g.SetState(b, Idle) // backoff over
	g.pick("b idle: an attempt", "queue")
	if idle, add := g.Attempt(); idle != b || add {
		t.Fatalf("Attempt with b idle: %v, %v; want b connected again", idle, add)
	}
	c := g.add("another attempt", "c", limitOf(1))
	g.SetState(c, Ready)
	g.SetState(b, Ready)
	g.pick("c ready before b", "c")
	g.pick("c full", "b")
	if g.Release(g.First()) {
		t.Fatal("Release woke picks, none queued since the last release")
	}
	g.pick("own has a stream again", "own")
	if n := g.First().InFlight(); n != 2 {
		t.Errorf("own: %d in flight, want 2", n)
	}
}

// A request finding every stream taken queues only while a connection is
// being made or can be: one attempt at a time (a second request asks for
// none, nor one between the attempt's start and the connection's
// addition); once the endpoint has all it is allowed, requests go to the
// connection with the most streams to spare, the oldest of equals.
func TestGroupQueuesOnlyDuringAttempt(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Ready, 2)
	g.pick("own's stream", "own")
	g.pick("own full", "queue")
	g.attempts("own full", 1)
	g.pick("own full again", "queue")
	g.attempts("one attempt at a time", 1)
	idle, add := g.Attempt()
	if idle != nil || !add {
		t.Fatalf("Attempt: %v, %v; want a new connection", idle, add)
	}
	g.pick("attempt started, connection not yet added", "queue")
	g.attempts("attempt started, connection not yet added", 1)
	b := NewMember("b", StreamLimit(limitOf(1)))
	g.Add(b)
	g.pick("b connecting", "queue")
	g.attempts("b connecting", 1)
	if drop, wake := g.SetState(b, Ready); drop || !wake {
		t.Fatalf("b ready with picks queued: drop %v, wake %v; want a release", drop, wake)
	}
	g.pick("b ready", "b")
	g.pick("both full, at the limit", "own")
	g.attempts("at the limit", 1)
	if g.Woken() {
		t.Error("a request sent to a full connection was counted queued")
	}
	// Equal spare streams: the oldest; more spare: that one.
	g.Release(g.First())
	g.Release(g.First())
	g.pick("own has one free", "own")
	g.First().inflight.Add(1) // own over its limit: -1 spare
	g.pick("b has the most to spare", "b")
}

// A failed attempt puts the group in backoff, as any failed connection
// attempt: requests go to the open connections, no attempt is asked for,
// until the failed connection is idle again; then the next attempt
// connects it again rather than making another.
func TestGroupBackoff(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Ready, 3)
	g.pick("own's stream", "own")
	g.pick("own full", "queue")
	b := g.add("attempt", "b", limitOf(1))
	g.SetState(b, Connecting)
	if _, wake := g.SetState(b, TransientFailure); !wake {
		t.Fatal("b failed with picks queued: no release")
	}
	g.pick("b in backoff", "own")
	g.attempts("b in backoff", 1)
	if g.State(Ready) != Ready {
		t.Errorf("own ready, b failed: endpoint %v, want READY", g.State(Ready))
	}
	g.SetState(b, Idle)
	if g.Len() != 2 {
		t.Errorf("b idle after its backoff: %d connections, want 2 (kept to be connected again)", g.Len())
	}
	g.pick("backoff over", "queue")
	g.attempts("backoff over", 2)
	if idle, add := g.Attempt(); idle != b || add {
		t.Fatalf("Attempt: %v, %v; want b connected again", idle, add)
	}
	g.pick("b connecting again", "queue")
	g.attempts("b connecting again", 2)
}

// An extra connection lost while the endpoint has more than it is allowed
// now goes; one lost within the setting stays, to be connected again; the
// endpoint's own connection is never let go. Lowering the setting closes
// nothing.
func TestGroupDropsExtraOverLimit(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Ready, 3)
	g.pick("own's stream", "own")
	g.pick("own full", "queue")
	b := g.add("attempt", "b", limitOf(1))
	g.SetState(b, Ready)
	g.pick("b", "b")
	g.pick("b full", "queue")
	c := g.add("attempt", "c", limitOf(1))
	g.SetState(c, Ready)
	g.SetMax(1)
	if g.Len() != 3 {
		t.Fatalf("lowered to 1: %d connections, want 3 (none closed)", g.Len())
	}
	if drop, _ := g.SetState(b, Idle); !drop {
		t.Error("b lost with 3 connections of 1 allowed: not dropped")
	}
	if drop, _ := g.SetState(g.First(), Idle); drop {
		t.Error("own connection lost: dropped")
	}
	if g.Len() != 2 {
		t.Errorf("after b's loss: %d connections, want 2", g.Len())
	}
	if drop, wake := g.SetState(b, Ready); drop || wake {
		t.Errorf("a report of b, dropped: drop %v, wake %v; want it ignored", drop, wake)
	}
	g.pick("c still carries requests", "c")
	g.SetMax(2)
	if drop, _ := g.SetState(c, Idle); drop {
		t.Error("c lost with 2 connections of 2 allowed: dropped")
	}
}

// The endpoint is ready while any of its connections is (gRFC A105), its
// own connection's state otherwise: an extra connection connecting or
// failing never makes it CONNECTING or TRANSIENT_FAILURE.
func TestGroupState(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Ready, 2)
	g.pick("own's stream", "own")
	g.pick("own full", "queue")
	b := g.add("attempt", "b", limitOf(1))
	steps := []struct {
		name     string
		m        *Member[string]
		s        State
		own      State // the own connection's state as the transport has it
		endpoint State
	}{
		{"b connecting", b, Connecting, Ready, Ready},
		{"b failed", b, TransientFailure, Ready, Ready},
		{"own lost, b in backoff", g.First(), Idle, Idle, Idle},
		{"own connecting", g.First(), Connecting, Connecting, Connecting},
		{"b idle", b, Idle, Connecting, Connecting},
		{"own failed", g.First(), TransientFailure, TransientFailure, TransientFailure},
		{"b connecting", b, Connecting, TransientFailure, TransientFailure},
		{"b ready, own failing", b, Ready, TransientFailure, Ready},
		{"own idle", g.First(), Idle, Idle, Ready},
		{"b lost", b, Idle, Idle, Idle},
	}
	for _, s := range steps {
		g.SetState(s.m, s.s)
		if got := g.State(s.own); got != s.endpoint {
			t.Errorf("%s: endpoint %v, want %v", s.name, got, s.endpoint)
		}
	}
}

// Picks queued are released once: by the first stream freed, connection
// state change or Woken (a server raised its limit) after they queued,
// and not again until another queues; a ready connection lost has the
// transport pick again whatever it holds, queued or not (a request may
// have picked the connection just before it was lost).
func TestGroupReleaseWakes(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Ready, 2)
	own := g.pick("own's stream", "own")
	if g.Woken() {
		t.Fatal("Woken with nothing queued")
	}
	g.pick("own full", "queue")
	g.pick("own full", "queue")
	if !g.Release(own) {
		t.Fatal("a stream freed with picks queued: no release")
	}
	if g.Release(g.pick("the stream freed", "own")) {
		t.Error("a second stream freed: released again with nothing queued since")
	}
	g.pick("own taken", "own")
	g.pick("own full", "queue")
	if !g.Woken() || g.Woken() {
		t.Error("Woken after a queued pick: want true once")
	}
	g.pick("own full", "queue")
	b := g.add("attempt", "b", limitOf(1))
	if _, wake := g.SetState(b, Connecting); wake {
		t.Error("b reported connecting, as it was: released")
	}
	if _, wake := g.SetState(b, Ready); !wake {
		t.Error("b ready with a pick queued: no release")
	}
	if _, wake := g.SetState(b, Idle); !wake {
		t.Error("b, ready, lost: no new pick (a request may have picked it just before)")
	}
	if _, wake := g.SetState(b, Connecting); wake {
		t.Error("b connecting again with nothing queued: released")
	}
	if _, wake := g.SetState(b, TransientFailure); wake {
		t.Error("b failed, not ready since, nothing queued: released")
	}
}

// A connection whose server's limit is unknown (unread, or not announced
// yet) never looks full: the endpoint keeps to it and asks for no other.
func TestGroupUnknownLimitNeverFull(t *testing.T) {
	g := newTestGroup(t, &testLimit{}, Ready, 3)
	for range 100 {
		g.pick("unknown limit", "own")
	}
	g.attempts("unknown limit", 0)
}

// With QueueAtLimit, a request with no stream free queues when no
// connection can be added too.
func TestGroupQueueAtLimit(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Ready, 1)
	g.QueueAtLimit = true
	g.pick("own's stream", "own")
	g.pick("at the limit", "queue")
	g.attempts("at the limit", 0)
}

// No connection ready (a picker older than the endpoint's state): no
// connection, no queueing, for the transport to pick again.
func TestGroupNoneReady(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Connecting, 2)
	g.pick("own connecting", "none")
	g.attempts("own connecting", 0)
}

// Shutdown takes the extra connections out, for the transport to shut
// them down; their later reports are ignored and the endpoint's state is
// its own connection's.
func TestGroupShutdown(t *testing.T) {
	g := newTestGroup(t, limitOf(1), Ready, 2)
	g.pick("own's stream", "own")
	g.pick("own full", "queue")
	b := g.add("attempt", "b", limitOf(1))
	g.SetState(b, Ready)
	extras := g.Shutdown()
	if len(extras) != 1 || extras[0] != b || g.Len() != 1 {
		t.Fatalf("Shutdown: extras %v, %d left; want b, 1", extras, g.Len())
	}
	if drop, wake := g.SetState(b, Idle); drop || wake {
		t.Errorf("b's report after Shutdown: drop %v, wake %v; want it ignored", drop, wake)
	}
	if s := g.State(Idle); s != Idle {
		t.Errorf("after Shutdown: endpoint %v, want its own connection's IDLE", s)
	}
}

// Requests picking at once never take more streams of a connection than
// its server allows (the gRFC: "if two RPCs are initiated at the same time
// and one stream is available in a connection, both RPCs must not choose
// the same connection"): with an attempt under way, those that find no
// stream free queue.
func TestGroupConcurrentPicksKeepLimit(t *testing.T) {
	const limit = 3
	g := newTestGroup(t, limitOf(limit), Ready, 2) // the attempt asked for never runs
	var holding atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				m, queue := g.Pick()
				if queue {
					continue
				}
				if m == nil {
					t.Error("a connection ready: none picked")
					return
				}
				if n := holding.Add(1); n > limit {
					t.Errorf("%d requests hold a stream of a connection of %d", n, limit)
				}
				runtime.Gosched() // hold it a while, as a request does
				holding.Add(-1)
				g.Release(m)
			}
		}()
	}
	wg.Wait()
	if n := g.First().InFlight(); n != 0 {
		t.Errorf("%d in flight after every request ended, want 0", n)
	}
}
