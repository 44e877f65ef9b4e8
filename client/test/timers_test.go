package test

import (
	"errors"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// The does-not-exist timer, on both protocols. The client's timers run on a
// fake clock, which moves only when a test says so: a test that must show
// that a timer did not fire moves the clock up to its deadline and looks,
// and the verdict does not depend on how fast the machine is.

const expiry = 150 * time.Millisecond

// The client is checked to take any client.Clock, the fake one included.
var _ client.Clock = (*testutils.FakeClock)(nil)

// newClockedEnv is a fake-server environment whose client runs its timers on
// the returned clock, with the does-not-exist timeout expiry.
func newClockedEnv(t *testing.T, p protocol) (*fakeEnv, *testutils.FakeClock) {
	t.Helper()
	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	return newFakeEnv(t, p, config{expiry: expiry, clock: clk}), clk
}

// waitTimers waits until n of clk's timers are pending: the client starts a
// does-not-exist timer just after the request is on the stream, so the
// server seeing the request does not mean the timer runs yet.
func waitTimers(t *testing.T, clk *testutils.FakeClock, n int) {
	t.Helper()
	if err := clk.WaitForTimers(testContext(t), n); err != nil {
		t.Fatal(err)
	}
}

func startFake(t *testing.T, addr string) *testutils.FakeServer {
	t.Helper()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Stop)
	return fs
}

func cluster(name, version string, ttl time.Duration) *discoveryv3.Resource {
	return testutils.WrapResource(name, version, ttl, testutils.Cluster(name, ""))
}

// The resource is reported missing exactly WatchExpiry after it was asked
// for, not a moment sooner, and is still delivered if it shows up later.
func TestDoesNotExistTimerFiresAndResourceMayStillAppear(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e, clk := newClockedEnv(t, p)
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			waitTimers(t, clk, 1)
			clk.Advance(expiry - time.Nanosecond)
			barrier(t, e.c)
			w.none(t)
			if st, _ := status(e.c, cdsURL, "C1"); st.Status != client.StatusRequested {
				t.Fatalf("dump says %v just before the expiry, want REQUESTED", st.Status)
			}
			clk.Advance(time.Nanosecond)
			w.wantNotFound(t, "C1")
			st, _ := status(e.c, cdsURL, "C1")
			if st.Status != client.StatusDoesNotExist {
				t.Fatalf("dump says %v, want DOES_NOT_EXIST", st.Status)
			}
			if !st.LastUpdated.Equal(clk.Now()) {
				t.Fatalf("dump says last updated at %v, want the expiry, %v", st.LastUpdated, clk.Now())
			}
			e.respond(p, cdsURL, "1", cluster("C1", "1", 0))
			e.reply(p)
			w.wantUpdate(t, "C1")
		})
	}
}

// The timer stops when the resource arrives: however long the clock then
// runs, nothing is reported missing.
func TestDoesNotExistTimerStopsOnArrival(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e, clk := newClockedEnv(t, p)
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			waitTimers(t, clk, 1)
			clk.Advance(expiry / 2)
			e.respond(p, cdsURL, "1", cluster("C1", "1", 0))
			e.reply(p)
			w.wantUpdate(t, "C1")
			if n := clk.Pending(); n != 0 {
				t.Fatalf("%d timers still pending after the resource arrived", n)
			}
			clk.Advance(10 * expiry)
			barrier(t, e.c)
			w.none(t)
		})
	}
}

// While the stream is down the timer is suspended: a name sent on a stream
// that then failed is not reported missing however long the outage lasts.
// Once it is sent on a new stream the timer starts afresh, with the whole
// timeout before it.
func TestDoesNotExistTimerSuspendedWhileServerGone(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e, clk := newClockedEnv(t, p)
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			waitTimers(t, clk, 1)
			clk.Advance(expiry - time.Nanosecond)
			addr := e.fs.Address()
			e.fs.Stop()

			// C1 hears only that the server is unreachable. The timer was
			// stopped before that was said.
			if ev := w.next(t); !isUnavailable(ev) {
				t.Fatalf("C1 got %v during the outage, want only the server's failure", ev)
			}
			if n := clk.Pending(); n != 0 {
				t.Fatalf("%d timers pending with the server gone, want the does-not-exist timer suspended", n)
			}
			clk.Advance(10 * expiry)
			barrier(t, e.c)
			w.nonePastOutage(t)

			fs := startFake(t, addr)
			ne := &fakeEnv{t: t, fs: fs, c: e.c}
			ne.reply(p)
			waitTimers(t, clk, 1)
			clk.Advance(expiry - time.Nanosecond)
			barrier(t, e.c)
			w.nonePastOutage(t)
			clk.Advance(time.Nanosecond)
			if ev := w.nextPastOutage(t); ev.kind != "resource-error" || !isNotFound(ev.err) {
				t.Fatalf("C1 got %v a whole timeout after the restart, want it reported missing", ev)
			}
		})
	}
}

// The timer starts only once the name is on a live stream: a client that
// cannot get a stream (the server accepts connections and never answers)
// does not report the name missing. Another server, of an authority, keeps
// the clock.
func TestDoesNotExistTimerWaitsForAStream(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			main := startFake(t, "")
			main.SetBlackhole(true)
			clockServer := startFake(t, "")
			c := newClient(t, main.Address(), p, config{expiry: expiry, authorities: map[string]string{"clock": clockServer.Address()}})
			const clockName = "xdstp://clock/envoy.config.cluster.v3.Cluster/clock"
			clock := newRecorder[*resources.Cluster]()
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(c, "C1", w)
			client.WatchCluster(c, clockName, clock)

			ce := &fakeEnv{t: t, fs: clockServer, c: c}
			ce.reply(p)
			clockRes := testutils.WrapResource(clockName, "1", 3*expiry, testutils.Cluster(clockName, "eds"))
			ce.respond(p, cdsURL, "1", clockRes)
			ce.reply(p)
			clock.wantUpdate(t, clockName)
			clock.wantNotFound(t, clockName)
			barrier(t, c)
			// A connection attempt may have timed out meanwhile: that is
			// an outage, not a missing resource.
			w.nonePastOutage(t)
			if main.StreamCount() != 0 {
				t.Fatalf("%d streams reached the black-holed server", main.StreamCount())
			}

			// Releasing the held connection fails the stream that never
			// started; the client reconnects, the name goes out, and the
			// timer runs.
			main.SetBlackhole(false)
			if ev := w.nextPastOutage(t); ev.kind != "resource-error" || !isNotFound(ev.err) {
				t.Fatalf("C1 got %v once the server answered, want it reported missing", ev)
			}
			// The client starts the timer once the request is on a live
			// stream, which the server sees a moment later: wait for it,
			// rather than count the streams it has registered so far. A
			// timer started without a stream leaves this wait to fail.
			if _, err := main.NextStream(testContext(t)); err != nil {
				t.Fatalf("C1 reported missing, and no stream reached the server: %v", err)
			}
		})
	}
}

func isUnavailable[T resources.Resource](ev event[T]) bool {
	return ev.kind != "update" && errors.Is(ev.err, client.ErrServerUnavailable)
}
