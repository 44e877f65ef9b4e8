package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// entryOf reads an entry's internals; tests that need to see a timer use it.
func (h *harness) entryOf(typeURL, name string) *entry {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.caches[typeURL].entries[name]
}

func (h *harness) dneRunning(typeURL, name string) bool {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	e := h.c.caches[typeURL].entries[name]
	return e != nil && e.dneTimer != nil
}

func TestDoesNotExistTimerStartsWhenSentAndFires(t *testing.T) {
	h := newHarness(t, nil, Options{WatchExpiry: 50 * time.Millisecond})
	w := h.watchAll(wholeWorldType, "L1")
	if h.dneRunning(resources.ListenerTypeURL, "L1") {
		t.Fatal("timer started before the name was on a live stream")
	}
	start := time.Now()
	h.sent(resources.ListenerTypeURL, "L1")
	if !h.dneRunning(resources.ListenerTypeURL, "L1") {
		t.Fatal("timer not started when the name was sent")
	}
	w["L1"].wantError(t, "resource-error", ErrResourceNotFound)
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("fired after %v, before the 50ms expiry", el)
	}
	if st, _ := h.status(resources.ListenerTypeURL, "L1"); st.Status != StatusDoesNotExist {
		t.Fatalf("status %v, want DOES_NOT_EXIST", st.Status)
	}
	// It may still appear later, and is then delivered.
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "a")
}

func TestDoesNotExistTimerStopsOnArrival(t *testing.T) {
	h := newHarness(t, nil, Options{WatchExpiry: time.Hour})
	h.watchAll(wholeWorldType, "L1")
	h.sent(resources.ListenerTypeURL, "L1")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	if h.dneRunning(resources.ListenerTypeURL, "L1") {
		t.Fatal("timer still running after the resource arrived")
	}
	// Sending the name again (every SotW request does) starts no timer for a
	// cached resource.
	h.sent(resources.ListenerTypeURL, "L1")
	if h.dneRunning(resources.ListenerTypeURL, "L1") {
		t.Fatal("timer started for a cached resource")
	}
}

func TestDoesNotExistTimerSuspendedWhileStreamDown(t *testing.T) {
	h := newHarness(t, nil, Options{WatchExpiry: 50 * time.Millisecond})
	w := h.watchAll(wholeWorldType, "L1")
	h.sent(resources.ListenerTypeURL, "L1")
	h.transport().fail(errors.New("connection reset"))
	if h.dneRunning(resources.ListenerTypeURL, "L1") {
		t.Fatal("timer still running while the stream is down")
	}
	w["L1"].wantError(t, "resource-error", ErrServerUnavailable)
	if st, _ := h.status(resources.ListenerTypeURL, "L1"); st.Status != StatusRequested {
		t.Fatalf("status %v, want still REQUESTED", st.Status)
	}
	// Resubscribed on the new stream, the timer starts afresh and fires.
	h.sent(resources.ListenerTypeURL, "L1")
	w["L1"].wantError(t, "resource-error", ErrResourceNotFound)
}

// A stream that ends after responses is routine and told to nobody; a
// stream that fails without one makes the server unhealthy (gRFC A57), which
// watchers hear once, keeping their data.
func TestStreamErrorIsAmbientAndToldOnce(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	h.transport().fail(errors.New("healthy stream reset"))
	h.sync()
	w["L1"].none(t)
	h.transport().fail(errors.New("connection refused 1"))
	h.transport().fail(errors.New("connection refused 2"))
	w["L1"].wantError(t, "ambient-error", ErrServerUnavailable)
	h.sync()
	w["L1"].none(t)
	if st, _ := h.status(resources.ListenerTypeURL, "L1"); st.Value == nil {
		t.Fatal("value lost on stream error")
	}
	// A new watcher while the server is down gets the cached value.
	nw := newRecorder()
	Watch(h.c, wholeWorldType, "L1", nw)
	nw.wantUpdate(t, "L1", "a")
	// After the server answers again, a new outage is told again.
	if err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	h.transport().fail(errors.New("healthy stream reset"))
	h.transport().fail(errors.New("connection refused 3"))
	w["L1"].wantError(t, "ambient-error", ErrServerUnavailable)
}

func TestNewWatcherWhileServerUnreachable(t *testing.T) {
	h := newHarness(t, nil, Options{})
	h.watchAll(wholeWorldType, "L1")
	h.transport().fail(errors.New("connection refused"))
	w := newRecorder()
	Watch(h.c, wholeWorldType, "L2", w)
	w.wantError(t, "resource-error", ErrServerUnavailable)
}

func TestTTLExpiryRemovesResource(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1")
	if err := h.sotw(resources.ListenerTypeURL, "1", mustAny(wrapped("L1", "v1", 50*time.Millisecond, lis("L1", "a")))); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantUpdate(t, "L1", "a")
	// Expiry works with the server gone: that is what TTLs are for.
	h.transport().fail(errors.New("stream reset"))
	h.transport().fail(errors.New("server gone"))
	w["L1"].wantError(t, "ambient-error", ErrServerUnavailable)
	xe := w["L1"].wantError(t, "resource-error", ErrResourceNotFound)
	if xe.Name != "L1" {
		t.Fatalf("expiry reported for %q", xe.Name)
	}
	if st, _ := h.status(resources.ListenerTypeURL, "L1"); st.Status != StatusDoesNotExist || st.Value != nil {
		t.Fatalf("status %v, want DOES_NOT_EXIST with no value", st.Status)
	}
}

func TestTTLRemovedWhenResentWithoutOne(t *testing.T) {
	h := newHarness(t, nil, Options{})
	h.watchAll(wholeWorldType, "L1")
	if err := h.sotw(resources.ListenerTypeURL, "1", mustAny(wrapped("L1", "v1", time.Hour, lis("L1", "a")))); err != nil {
		t.Fatal(err)
	}
	if h.entryOf(resources.ListenerTypeURL, "L1").rare().ttlTimer == nil {
		t.Fatal("no TTL timer for a resource with a ttl")
	}
	if err := h.sotw(resources.ListenerTypeURL, "2", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	if h.entryOf(resources.ListenerTypeURL, "L1").rare().ttlTimer != nil {
		t.Fatal("TTL timer kept for a resource resent without a ttl")
	}
}

func TestHeartbeatRefreshesTTLOnly(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1")
	if err := h.delta(resources.ListenerTypeURL, nil, wrapped("L1", "v1", time.Hour, lis("L1", "a"))); err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	genBefore := h.entryOf(resources.ListenerTypeURL, "L1").rare().ttlGen
	before := decodes.Load()
	if err := h.delta(resources.ListenerTypeURL, nil, wrapped("L1", "v1", time.Hour, nil)); err != nil {
		t.Fatalf("heartbeat NACKed: %v", err)
	}
	w["L1"].none(t)
	if decodes.Load() != before {
		t.Fatal("a heartbeat was decoded")
	}
	if e := h.entryOf(resources.ListenerTypeURL, "L1"); e.rare().ttlGen == genBefore || e.rare().ttlTimer == nil {
		t.Fatal("heartbeat did not restart the TTL timer")
	}
	// A body-less resource for another version is not a heartbeat.
	if err := h.delta(resources.ListenerTypeURL, nil, wrapped("L1", "v2", time.Hour, nil)); err == nil {
		t.Fatal("a heartbeat for a version the client does not hold was ACKed")
	}
	// A heartbeat's TTL replaces the old one: a 50ms TTL expires soon.
	if err := h.delta(resources.ListenerTypeURL, nil, wrapped("L1", "v1", 50*time.Millisecond, nil)); err != nil {
		t.Fatal(err)
	}
	w["L1"].wantError(t, "resource-error", ErrResourceNotFound)
}

// A SotW response of heartbeats only is a TTL refresh, not the state of the
// world: the Listeners it does not mention are not deleted.
func TestSotWHeartbeatOnlyResponseDeletesNothing(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1", "L2")
	err := h.sotw(resources.ListenerTypeURL, "1", mustAny(wrapped("L1", "1", time.Hour, lis("L1", "a"))), lis("L2", "a"))
	if err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	w["L2"].next(t)
	if err := h.sotw(resources.ListenerTypeURL, "1", mustAny(wrapped("L1", "1", time.Hour, nil))); err != nil {
		t.Fatalf("heartbeat NACKed: %v", err)
	}
	w["L1"].none(t)
	w["L2"].none(t)
	if st, _ := h.status(resources.ListenerTypeURL, "L2"); st.Status != StatusACKed {
		t.Fatalf("L2 status %v after a heartbeat-only response, want ACKED", st.Status)
	}
}

// The does-not-exist timers of names sent together are one clock timer:
// a request of 10,000 names armed 10,000 timers, and their expiry ran
// 10,000 callbacks, each taking the client's lock. A name that leaves the
// batch (its watch cancelled) is skipped when it fires; a batch left empty
// stops its clock timer.
func TestDoesNotExistTimersOfOneRequestAreOneTimer(t *testing.T) {
	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, nil, Options{WatchExpiry: 15 * time.Second, Clock: clk})
	const n = 1000
	names := make([]string, n)
	recs := make([]*recorder, n)
	cancels := make([]func(), n)
	for i := range names {
		names[i], recs[i] = fmt.Sprintf("L%04d", i), newRecorder()
		cancels[i] = Watch(h.c, wholeWorldType, names[i], recs[i])
	}
	h.sync()
	h.sent(resources.ListenerTypeURL, names...)
	if got := clk.Pending(); got != 1 {
		t.Fatalf("%d clock timers pending after one request of %d names, want 1", got, n)
	}
	cancels[0]()
	h.sync()
	clk.Advance(15 * time.Second)
	for i := 1; i < n; i++ {
		recs[i].wantError(t, "resource-error", ErrResourceNotFound)
	}
	h.sync()
	recs[0].none(t)
	if got := clk.Pending(); got != 0 {
		t.Fatalf("%d clock timers pending after expiry, want 0", got)
	}

	// A batch all of whose names arrive stops its clock timer.
	more := []string{"M1", "M2"}
	for _, name := range more {
		Watch(h.c, wholeWorldType, name, newRecorder())
	}
	h.sync()
	h.sent(resources.ListenerTypeURL, more...)
	if got := clk.Pending(); got != 1 {
		t.Fatalf("%d clock timers pending, want 1", got)
	}
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("M1", "a")); err != nil {
		t.Fatal(err)
	}
	if got := clk.Pending(); got != 1 {
		t.Fatalf("%d clock timers pending with M2 still awaited, want 1", got)
	}
	if err := h.sotw(resources.ListenerTypeURL, "2", lis("M1", "a"), lis("M2", "b")); err != nil {
		t.Fatal(err)
	}
	if got := clk.Pending(); got != 0 {
		t.Fatalf("%d clock timers pending once every name of the batch arrived, want 0", got)
	}
}
