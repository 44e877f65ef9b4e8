package test

import (
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// xListenerName is a Listener of authority "auth", which another server
// serves than the top-level one.
const xListenerName = "xdstp://auth/envoy.config.listener.v3.Listener/x"

// newTwoServerPersistClient is a client of the top-level server at top and
// of authority "auth" at auth, persisting in dir and waiting persistWait
// (on clk) for its servers.
func newTwoServerPersistClient(t *testing.T, p protocol, top, auth, dir string, clk *testutils.FakeClock) *client.Client {
	t.Helper()
	b, err := bootstrapFor(top, p, config{authorities: map[string]string{"auth": auth}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger(),
		Clock: clk, Persist: client.PersistOptions{Dir: dir, Wait: persistWait}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// xListener is authority auth's resources: the Listener x, naming route.
func xListener(route string) testutils.Resources {
	return testutils.Resources{Listeners: []*listenerv3.Listener{testutils.Listener(xListenerName, route)}}
}

func wantRouteName(t *testing.T, l *resources.Listener, want string) {
	t.Helper()
	if l.RouteConfigName != want {
		t.Fatalf("%s names route %q, want %q", l.Name, l.RouteConfigName, want)
	}
}

// One server's answer must not erase from disk what another server sent an
// earlier run: restarted while the authority's server is down, a client
// whose top-level server answers within the wait (and so rewrites the
// Listener file) still keeps the authority's Listener, whether or not it
// watches it in that run, and serves it once the wait is over; the server's
// return replaces it, on disk too.
func TestPersistKeepsRecordsOfServersNotAnswering(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		dir := t.TempDir()
		top := &e2eEnv{t: t, v: variant{name: p.name, p: p}}
		top.start(svc(8080))
		auth := &e2eEnv{t: t, v: variant{name: p.name, p: p}}
		auth.start(xListener("x-route-1"))
		start := func() (*client.Client, *testutils.FakeClock) {
			clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
			return newTwoServerPersistClient(t, p, top.addr, auth.addr, dir, clk), clk
		}
		watch := func(c *client.Client, name string) *diskRecorder[*resources.Listener] {
			w := newDiskRecorder[*resources.Listener]()
			client.WatchListener(c, name, w)
			return w
		}

		// The first run gets svc from the top-level server, x from auth's.
		c, _ := start()
		watch(c, "svc").wantUpdateFrom(t, "svc", false)
		wantRouteName(t, watch(c, xListenerName).wantUpdateFrom(t, xListenerName, false), "x-route-1")
		c.Close()
		auth.ms.Stop()

		// Restart 1: auth's server is down and x is not watched; the
		// top-level server answers, and the Listener file is rewritten.
		c, _ = start()
		watch(c, "svc").wantUpdateFrom(t, "svc", false)
		c.Close()

		// Restart 2: x is watched, and served from disk once the wait is
		// over, after the top-level server's answer rewrote the file.
		c, clk := start()
		watch(c, "svc").wantUpdateFrom(t, "svc", false)
		x := watch(c, xListenerName)
		clk.Advance(persistWait)
		wantRouteName(t, x.wantUpdateFrom(t, xListenerName, true), "x-route-1")
		c.Close()

		// Restart 3: x from disk again; then auth's server returns with a
		// new x, which replaces it.
		c, clk = start()
		watch(c, "svc").wantUpdateFrom(t, "svc", false)
		x = watch(c, xListenerName)
		clk.Advance(persistWait)
		wantRouteName(t, x.wantUpdateFrom(t, xListenerName, true), "x-route-1")
		auth.start(xListener("x-route-2"))
		wantRouteName(t, x.wantUpdateFrom(t, xListenerName, false), "x-route-2")
		c.Close()
		auth.ms.Stop()

		// And the next run, auth's server down again, has the new x.
		c, clk = start()
		x = watch(c, xListenerName)
		clk.Advance(persistWait)
		wantRouteName(t, x.wantUpdateFrom(t, xListenerName, true), "x-route-2")
	})
}
