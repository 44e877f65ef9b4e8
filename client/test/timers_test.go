package test

import (
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

const expiry = 150 * time.Millisecond

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

// The timer runs from the request: the resource is reported missing
// WatchExpiry after the server got the name, and is still delivered if it
// shows up later.
func TestDoesNotExistTimerFiresAndResourceMayStillAppear(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, p, config{expiry: expiry})
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			asked := e.fs.Requests()[0].Received
			ev := w.wantNotFound(t, "C1")
			if d := ev.at.Sub(asked); d < expiry*9/10 {
				t.Fatalf("reported missing %v after the request, before the %v expiry", d, expiry)
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
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, p, config{expiry: expiry})
			w := newRecorder[*resources.Cluster]()
			clock := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "C1", w)
			e.reply(p)
			client.WatchCluster(e.c, "clock", clock)
			e.reply(p)
			e.respond(p, cdsURL, "1", cluster("C1", "1", 0), cluster("clock", "1", 3*expiry))
			e.reply(p)
			w.wantUpdate(t, "C1")
			clock.wantUpdate(t, "clock")
			clock.wantNotFound(t, "clock") // 3×expiry later
			barrier(t, e.c)
			w.none(t)
		})
	}
}

// While the stream is down the timer is suspended: a name sent on a stream
// that then failed is not reported missing however long the outage lasts.
// Once it is sent on a new stream the timer starts afresh.
func TestDoesNotExistTimerSuspendedWhileServerGone(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, p, config{expiry: expiry})
			w := newRecorder[*resources.Cluster]()
			clock := newRecorder[*resources.Cluster]()
			client.WatchCluster(e.c, "clock", clock)
			e.reply(p)
			client.WatchCluster(e.c, "C1", w) // its timer starts now
			e.reply(p)
			e.respond(p, cdsURL, "1", cluster("clock", "1", 3*expiry))
			e.reply(p)
			clock.wantUpdate(t, "clock")
			addr := e.fs.Address()
			e.fs.Stop()

			// The clock expires 3×expiry later. Meanwhile C1 hears only that
			// the server is unreachable, once reconnecting has failed.
			w.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")
			for ev := clock.next(t); ev.kind != "resource-error"; ev = clock.next(t) {
				if ev.kind != "ambient-error" {
					t.Fatalf("clock got %v, want its server's failure then its expiry", ev)
				}
			}
			barrier(t, e.c)
			w.none(t)

			fs := startFake(t, addr)
			var resent time.Time
			for resent.IsZero() {
				if p.delta {
					r, err := fs.NextDeltaRequest(testContext(t))
					if err != nil {
						t.Fatal(err)
					}
					if contains(r.ResourceNamesSubscribe, "C1") {
						resent = fs.Requests()[len(fs.Requests())-1].Received
					}
				} else {
					r, err := fs.NextRequest(testContext(t))
					if err != nil {
						t.Fatal(err)
					}
					if r.TypeUrl == cdsURL {
						resent = fs.Requests()[len(fs.Requests())-1].Received
					}
				}
			}
			ev := w.wantNotFound(t, "C1")
			if d := ev.at.Sub(resent); d < expiry/2 {
				t.Fatalf("reported missing %v after the name was sent again: the timer did not start afresh", d)
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
	for _, p := range protocols {
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
			w.none(t)
			if main.StreamCount() != 0 {
				t.Fatalf("%d streams reached the black-holed server", main.StreamCount())
			}

			// Releasing the held connection fails the stream that never
			// started; the client reconnects, the name goes out, and the
			// timer runs.
			main.SetBlackhole(false)
			w.wantError(t, "resource-error", client.ErrServerUnavailable, "C1")
			w.wantNotFound(t, "C1")
			if main.StreamCount() == 0 {
				t.Fatal("C1 reported missing without ever reaching the server")
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
