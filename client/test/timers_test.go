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

// The does-not-exist timer, with a short injected timeout, on both
// protocols. Where a test must show that the timer did NOT fire, a resource
// with a longer TTL serves as the clock: its expiry is an event that proves
// enough time has passed, and callbacks run in order.
//
// Such a test assumes the machine keeps up: that the test answers the
// client well within the timeout. It measures whether that held, and a
// scenario whose assumption failed (a starved process under -race) is run
// again rather than read as a verdict.

const expiry = 150 * time.Millisecond

// retryTiming runs scenario until it reports that its timing assumptions
// held, at most three times. A scenario fails t only for outcomes that are
// wrong whatever the timing.
func retryTiming(t *testing.T, scenario func(t *testing.T) (assumptionsHeld bool)) {
	t.Helper()
	for i := range 3 {
		if scenario(t) {
			return
		}
		t.Logf("attempt %d: the machine was too slow for the scenario's timing", i+1)
	}
	t.Skip("the machine was too slow for this scenario's timing, three times")
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

// The resource is reported missing no sooner than WatchExpiry after it was
// asked for, and is still delivered if it shows up later.
func TestDoesNotExistTimerFiresAndResourceMayStillAppear(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, p, config{expiry: expiry})
			w := newRecorder[*resources.Cluster]()
			asked := time.Now()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			ev := w.wantNotFound(t, "C1")
			if d := ev.at.Sub(asked); d < expiry {
				t.Fatalf("reported missing %v after the watch, before the %v expiry", d, expiry)
			}
			if st, _ := status(e.c, cdsURL, "C1"); st.Status != client.StatusDoesNotExist {
				t.Fatalf("dump says %v, want DOES_NOT_EXIST", st.Status)
			}
			e.respond(p, cdsURL, "1", cluster("C1", "1", 0))
			e.reply(p)
			w.wantUpdate(t, "C1")
		})
	}
}

// The timer stops when the resource arrives.
func TestDoesNotExistTimerStopsOnArrival(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			retryTiming(t, func(t *testing.T) bool {
				e := newFakeEnv(t, p, config{expiry: expiry})
				w := newRecorder[*resources.Cluster]()
				clock := newRecorder[*resources.Cluster]()
				client.WatchCluster(e.c, "clock", clock)
				e.reply(p)
				asked := time.Now()
				client.WatchCluster(e.c, "C1", w)
				e.reply(p)
				e.respond(p, cdsURL, "1", cluster("C1", "1", 0), cluster("clock", "1", 3*expiry))
				e.reply(p)
				// The ACK is read after the client applied the response.
				applied := lastReceived(e.fs)
				if ev := w.next(t); ev.kind != "update" {
					if applied.Sub(asked) < expiry {
						t.Fatalf("got %v, want C1, which arrived within the expiry", ev)
					}
					return false
				}
				clock.wantUpdate(t, "clock")
				clock.wantNotFound(t, "clock") // 3×expiry after it arrived
				barrier(t, e.c)
				w.none(t)
				return true
			})
		})
	}
}

// While the stream is down the timer is suspended: a name sent on a stream
// that then failed is not reported missing however long the outage lasts.
// Once it is sent on a new stream the timer starts afresh.
func TestDoesNotExistTimerSuspendedWhileServerGone(t *testing.T) {
	t.Parallel()
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			retryTiming(t, func(t *testing.T) bool {
				e := newFakeEnv(t, p, config{expiry: expiry})
				w := newRecorder[*resources.Cluster]()
				clock := newRecorder[*resources.Cluster]()
				client.WatchCluster(e.c, "clock", clock)
				e.reply(p)
				clockSent := time.Now()
				e.respond(p, cdsURL, "1", cluster("clock", "1", 3*expiry))
				e.reply(p)
				clock.wantUpdate(t, "clock")
				asked := time.Now()
				client.WatchCluster(e.c, "C1", w) // its timer starts now
				e.reply(p)
				addr := e.fs.Address()
				e.fs.Stop()
				// The timer, had it run on, would fire before the clock
				// expires, if the test kept up.
				kept := time.Since(asked) < expiry*2/3 && asked.Sub(clockSent) < expiry*2/3

				// Meanwhile C1 hears only that the server is unreachable,
				// once reconnecting has failed.
				if ev := w.next(t); !isUnavailable(ev) {
					if kept {
						t.Fatalf("C1 got %v during the outage, want only the server's failure", ev)
					}
					return false
				}
				for ev := clock.next(t); ev.kind != "resource-error" || isUnavailable(ev); ev = clock.next(t) {
					if ev.kind != "ambient-error" {
						t.Fatalf("clock got %v, want its server's failure then its expiry", ev)
					}
				}
				barrier(t, e.c)
				if len(w.events) > 0 && !kept {
					return false
				}
				w.none(t)

				restarted := time.Now()
				fs := startFake(t, addr)
				if ev := w.nextPastOutage(t); ev.kind != "resource-error" || !isNotFound(ev.err) {
					t.Fatalf("C1 got %v after the restart, want it reported missing", ev)
				} else if d := ev.at.Sub(restarted); d < expiry {
					t.Fatalf("reported missing %v after the server came back: the timer did not start afresh", d)
				}
				if fs.StreamCount() == 0 {
					t.Fatal("C1 reported missing without reaching the new server")
				}
				return true
			})
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
			if main.StreamCount() == 0 {
				t.Fatal("C1 reported missing without ever reaching the server")
			}
		})
	}
}

// lastReceived is when the server read its latest request.
func lastReceived(fs *testutils.FakeServer) time.Time {
	reqs := fs.Requests()
	return reqs[len(reqs)-1].Received
}

func isUnavailable[T resources.Resource](ev event[T]) bool {
	return ev.kind != "update" && errors.Is(ev.err, client.ErrServerUnavailable)
}
