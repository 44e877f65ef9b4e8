package test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// Close stops everything the client started, whatever state it is in: a
// live stream with a response being handled, does-not-exist and TTL timers
// running, a stream to a server that never answers the connection. Not
// parallel, so that goleak sees this test's goroutines only.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			live := startFake(t, "")
			stuck := startFake(t, "")
			stuck.SetBlackhole(true)
			c := newClient(t, live.Address(), p, config{expiry: time.Hour, authorities: map[string]string{"stuck": stuck.Address()}})
			w := newRecorder[*resources.Cluster]()
			client.WatchCluster(c, "C1", w)
			client.WatchCluster(c, "C2", newRecorder[*resources.Cluster]()) // its timer runs
			client.WatchCluster(c, "xdstp://stuck/envoy.config.cluster.v3.Cluster/C3", newRecorder[*resources.Cluster]())
			e := &fakeEnv{t: t, fs: live, c: c}
			e.reply(p)
			e.respond(p, cdsURL, "1", cluster("C1", "1", time.Hour)) // its TTL runs
			e.reply(p)
			w.wantUpdate(t, "C1")
			e.respond(p, cdsURL, "2", cluster("C1", "2", time.Hour)) // in flight

			done := make(chan struct{})
			go func() { c.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(timeout):
				t.Fatal("Close did not return")
			}
			c.Close() // idempotent
			live.Stop()
			stuck.Stop()
			goleak.VerifyNone(t)
		})
	}
}

// Close called from a watcher callback returns at once instead of waiting
// for the callback that called it; no other callback starts, and once the
// callback returns nothing of the client is left running.
func TestCloseFromCallback(t *testing.T) {
	for _, p := range everyProtocol {
		t.Run(p.name, func(t *testing.T) {
			live := startFake(t, "")
			c := newClient(t, live.Address(), p, config{})
			closed := make(chan struct{})
			after := newRecorder[*resources.Cluster]()
			client.WatchCluster(c, "C1", client.WatcherFuncs[*resources.Cluster]{
				OnUpdate: func(*resources.Cluster) {
					// A new watcher of a cached resource gets it through
					// the callback queue, right after this callback: the
					// callback that Close forbids.
					client.WatchCluster(c, "C1", after)
					c.Close()
					close(closed)
				},
			})
			e := &fakeEnv{t: t, fs: live, c: c}
			e.reply(p)
			e.respond(p, cdsURL, "1", cluster("C1", "1", 0))
			select {
			case <-closed:
			case <-time.After(timeout):
				t.Fatal("Close called from a callback did not return")
			}
			c.Close() // idempotent, from another goroutine too
			live.Stop()
			goleak.VerifyNone(t)
			after.none(t)
		})
	}
}

// A watch made after Close is told, once, that the client is closed: its
// watcher gets a resource error wrapping ErrClosed, after Close, on no
// goroutine that outlives the callback.
func TestWatchAfterClose(t *testing.T) {
	live := startFake(t, "")
	c := newClient(t, live.Address(), sotw, config{})
	c.Close()
	w := newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", w)
	w.wantError(t, "resource-error", client.ErrClosed, "C1")
	live.Stop()
	goleak.VerifyNone(t)
	w.none(t)
}
