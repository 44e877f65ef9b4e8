package test

import (
	"net"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Fallback (gRFC A71) between two stock go-control-plane servers, a primary
// and a fallback in that order in xds_servers, over ADS and per-type
// streams, SotW and delta. The two serve the same tree except for the
// endpoints' ports (1xxx from the primary, 2xxx from the fallback), so each
// watcher's events say which server they came from, and the Listener,
// route and Cluster, byte for byte the same on both, must not be delivered
// again when the client switches.

// fallbackEnv is a client of a primary and a fallback server.
type fallbackEnv struct {
	t        *testing.T
	p        protocol
	primary  *testutils.ManagementServer // nil while down
	paddr    string                      // the primary's address, up or down
	held     *portHolder                 // holds paddr while the primary is down
	fallback *testutils.ManagementServer
	// fallbackClosed receives a value each time a stream to the fallback
	// ends.
	fallbackClosed chan struct{}
	// primaryACKs and fallbackACKs receive the type URL of every ACK the
	// primary (the latest started) and the fallback receive.
	primaryACKs, fallbackACKs chan string
	c                         *client.Client
}

// newFallbackEnv starts the fallback serving fres and, unless pres is nil,
// the primary serving pres; with pres nil the primary's address is reserved
// but nothing listens there.
func newFallbackEnv(t *testing.T, p protocol, pres, fres *testutils.Resources) *fallbackEnv {
	t.Helper()
	e := &fallbackEnv{t: t, p: p, fallbackClosed: make(chan struct{}, 100), fallbackACKs: make(chan string, 1000)}
	opts := ackHooks(e.fallbackACKs)
	opts.OnStreamClosed = func(int64, bool) { e.fallbackClosed <- struct{}{} }
	fb, err := testutils.StartManagementServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fb.Stop)
	e.fallback = fb
	if err := fb.Update(testContext(t), nodeID, *fres); err != nil {
		t.Fatal(err)
	}
	if pres != nil {
		e.startPrimary(*pres)
	} else {
		e.held = holdPort(t, "127.0.0.1:0")
		e.paddr = e.held.lis.Addr().String()
	}
	t.Cleanup(func() {
		if e.held != nil {
			e.held.release()
		}
	})
	b, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:       e.paddr,
		APIType:         p.apiType,
		FallbackServers: []testutils.BootstrapServer{{URI: fb.Address(), APIType: p.apiType}},
		NodeID:          nodeID,
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // before the servers stop
	e.c = c
	return e
}

// startPrimary starts the primary (at its old address, if it had one)
// serving rs.
func (e *fallbackEnv) startPrimary(rs testutils.Resources) { e.startPrimaryAfter(rs, 0) }

// startPrimaryAfter is startPrimary, but the primary gets its resources
// only once it has the first request of n types: the requests find it
// empty, as they find a control plane that starts serving before it has a
// configuration.
func (e *fallbackEnv) startPrimaryAfter(rs testutils.Resources, n int) {
	e.t.Helper()
	if e.held != nil {
		e.held.release()
		e.held = nil
	}
	e.primaryACKs = make(chan string, 1000) // this server's only
	opts := ackHooks(e.primaryACKs)
	opts.Address = e.paddr
	requested := make(chan string, 1000)
	sotwHook, deltaHook := opts.OnStreamRequest, opts.OnDeltaRequest
	opts.OnStreamRequest = func(id int64, r *discoveryv3.DiscoveryRequest) error {
		requested <- r.TypeUrl
		return sotwHook(id, r)
	}
	opts.OnDeltaRequest = func(id int64, r *discoveryv3.DeltaDiscoveryRequest) error {
		requested <- r.TypeUrl
		return deltaHook(id, r)
	}
	ms, err := testutils.StartManagementServer(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(ms.Stop)
	for seen := make(map[string]bool); len(seen) < n; {
		select {
		case u := <-requested:
			seen[u] = true
		case <-time.After(timeout):
			e.t.Fatalf("the restarted primary got requests for %v only", seen)
		}
	}
	if err := ms.Update(testContext(e.t), nodeID, rs); err != nil {
		e.t.Fatal(err)
	}
	e.primary, e.paddr = ms, ms.Address()
}

func (e *fallbackEnv) stopPrimary() {
	e.primary.Stop()
	e.primary = nil
	e.held = holdPort(e.t, e.paddr)
}

// portHolder keeps a port while the primary is down, so that no server of
// a test running in parallel takes it (the client would get that server's
// answers): it accepts connections and closes them at once, which the
// client sees as a server that fails without answering.
type portHolder struct {
	lis  net.Listener
	done chan struct{}
}

func holdPort(t *testing.T, addr string) *portHolder {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("holding the primary's port: %v", err)
	}
	h := &portHolder{lis: lis, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			conn, err := lis.Accept()
			if err != nil {
				return // released
			}
			conn.Close()
		}
	}()
	return h
}

func (h *portHolder) release() {
	h.lis.Close()
	<-h.done
}

// ackHooks reports the type URL of every ACK a server receives on acks.
func ackHooks(acks chan<- string) testutils.ManagementServerOptions {
	ack := func(typeURL, nonce string, nack bool) {
		if nonce != "" && !nack {
			acks <- typeURL
		}
	}
	return testutils.ManagementServerOptions{
		OnStreamRequest: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			ack(r.TypeUrl, r.ResponseNonce, r.ErrorDetail != nil)
			return nil
		},
		OnDeltaRequest: func(_ int64, r *discoveryv3.DeltaDiscoveryRequest) error {
			ack(r.TypeUrl, r.ResponseNonce, r.ErrorDetail != nil)
			return nil
		},
	}
}

// waitACKs waits until the client has ACKed a response of each of the four
// types from a server (its ACKs on acks), then for the callbacks it
// queued: every type has been applied.
func (e *fallbackEnv) waitACKs(acks <-chan string, server string) {
	e.t.Helper()
	seen := make(map[string]bool)
	for len(seen) < 4 {
		select {
		case u := <-acks:
			seen[u] = true
		case <-time.After(timeout):
			e.t.Fatalf("the client ACKed only %v from the %s", seen, server)
		}
	}
	barrier(e.t, e.c)
}

// fallbackStreams counts the streams the fallback server has seen.
func (e *fallbackEnv) fallbackStreams() int64 {
	n := e.fallback.Counters()
	return n.Streams + n.DeltaStreams
}

// waitFallbackClosed waits until every stream to the fallback server has
// ended: one over ADS, one per type (four) on per-type streams.
func (e *fallbackEnv) waitFallbackClosed() {
	e.t.Helper()
	want := int64(1)
	if e.p.perType {
		want = 4
	}
	for closed := int64(0); closed < want; closed++ {
		select {
		case <-e.fallbackClosed:
		case <-time.After(timeout):
			e.t.Fatalf("the client closed %d of its %d streams to the fallback server", closed, want)
		}
	}
	if n := e.fallback.Counters(); n.OpenStreams != 0 || n.Streams+n.DeltaStreams != want {
		e.t.Fatalf("fallback server counters %+v: want %d streams, all closed", n, want)
	}
}

func withEndpoints(rs testutils.Resources, name string, port uint32) testutils.Resources {
	rs.Endpoints = append(rs.Endpoints, testutils.ClusterLoadAssignment(name, "127.0.0.1", port))
	return rs
}

// Primary down from the start: the client uses the fallback without telling
// watchers of the failure, then goes back to the primary once it answers,
// and closes the fallback's stream. Each watcher sees exactly the updates
// that change what it holds.
func TestFallbackPrimaryDownAtStartThenBack(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		fres := svc(2001)
		e := newFallbackEnv(t, p, nil, &fres)
		start := time.Now()
		tr := watchTree(e.c)
		ev := tr.wantFrom(t, "127.0.0.1:2001")
		t.Logf("primary down at start: fallback data after %v", ev.at.Sub(start))
		barrier(t, e.c)
		tr.none(t) // no failure reported: the fallback served

		back := time.Now()
		e.startPrimary(svc(1001))
		ev = tr.e.next(t)
		wantAddresses(t, tr.e.checkUpdate(t, ev, "svc-cluster"), "127.0.0.1:1001")
		t.Logf("switch back: primary's data %v after it started", ev.at.Sub(back))
		e.waitFallbackClosed()
		// The rest is the same bytes from both: nothing to tell.
		e.waitACKs(e.primaryACKs, "primary")
		tr.none(t)
		for _, st := range e.c.Dump() {
			if st.Server != e.paddr {
				t.Errorf("%s %q is from %s, want the primary %s", st.TypeURL, st.Name, st.Server, e.paddr)
			}
		}
	})
}

// The primary dies while a watcher waits on a resource it does not have:
// the client falls back, the waiting watcher gets the resource from the
// fallback, and the others only what differs. When the primary returns the
// client goes back to it.
func TestFallbackWhenPrimaryDiesWithAWatchWaiting(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		pres, fres := svc(1001), withEndpoints(svc(2001), "late", 2002)
		e := newFallbackEnv(t, p, &pres, &fres)
		tr := watchTree(e.c)
		tr.wantFrom(t, "127.0.0.1:1001")
		late := newRecorder[*resources.Endpoints]()
		client.WatchEndpoints(e.c, "late", late)
		barrier(t, e.c)
		if n := e.fallbackStreams(); n != 0 {
			t.Fatalf("%d streams to the fallback while the primary serves", n)
		}

		died := time.Now()
		e.stopPrimary()
		ev := late.next(t)
		wantAddresses(t, late.checkUpdate(t, ev, "late"), "127.0.0.1:2002")
		t.Logf("switch-over: fallback data %v after the primary died", ev.at.Sub(died))
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:2001")
		// Every type is then the fallback's, so the primary, once back, has
		// to send each: a delta stream tells a server only of what came from
		// it (initial_resource_versions).
		e.waitACKs(e.fallbackACKs, "fallback")
		tr.none(t)
		late.none(t)

		back := time.Now()
		e.startPrimary(withEndpoints(svc(1001), "late", 1002))
		ev = late.next(t)
		wantAddresses(t, late.checkUpdate(t, ev, "late"), "127.0.0.1:1002")
		t.Logf("switch back: primary's data %v after it started", ev.at.Sub(back))
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")
		e.waitFallbackClosed()
		e.waitACKs(e.primaryACKs, "primary")
		tr.none(t)
		late.none(t)
	})
}

// The primary dies with every watched resource cached: no fallback (gRFC
// A71), watchers keep their data and are told the server is unreachable.
// A watch of a resource not cached, made while the primary is down, then
// falls back at once.
func TestFallbackNotWhenEverythingIsCached(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		pres, fres := svc(1001), withEndpoints(svc(2001), "late", 2002)
		e := newFallbackEnv(t, p, &pres, &fres)
		tr := watchTree(e.c)
		tr.wantFrom(t, "127.0.0.1:1001")

		e.stopPrimary()
		// Watchers hear of the failure in the same step in which the client
		// decides not to fall back.
		tr.l.wantError(t, "ambient-error", client.ErrServerUnavailable, "svc")
		tr.r.wantError(t, "ambient-error", client.ErrServerUnavailable, "svc-route")
		tr.c.wantError(t, "ambient-error", client.ErrServerUnavailable, "svc-cluster")
		tr.e.wantError(t, "ambient-error", client.ErrServerUnavailable, "svc-cluster")
		if n := e.fallbackStreams(); n != 0 {
			t.Fatalf("%d streams to the fallback with everything cached", n)
		}

		late := newRecorder[*resources.Endpoints]()
		client.WatchEndpoints(e.c, "late", late)
		wantAddresses(t, late.wantUpdate(t, "late"), "127.0.0.1:2002")
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:2001")
		// Every type is then the fallback's, so the primary, once back, has
		// to send each: a delta stream tells a server only of what came from
		// it (initial_resource_versions).
		e.waitACKs(e.fallbackACKs, "fallback")
		tr.none(t)
		late.none(t)
	})
}

// The primary comes back as a new instance whose versions start again from
// "1", and its requests arrive before it has a snapshot. The client must
// not tell it the versions its predecessor sent: the fallback's data
// replaced those, and go-control-plane's snapshot cache, finding the
// version it is given, would answer nothing, leaving the fallback's data in
// force behind the primary's back.
func TestFallbackPrimaryBackWithTheSameVersions(t *testing.T) {
	forEachProtocol(t, everyProtocol, func(t *testing.T, p protocol) {
		t.Parallel()
		pres, fres := svc(1001), withEndpoints(svc(2001), "late", 2002)
		e := newFallbackEnv(t, p, &pres, &fres)
		tr := watchTree(e.c)
		tr.wantFrom(t, "127.0.0.1:1001")
		e.waitACKs(e.primaryACKs, "primary")
		late := newRecorder[*resources.Endpoints]()
		client.WatchEndpoints(e.c, "late", late)

		e.stopPrimary()
		wantAddresses(t, late.wantUpdate(t, "late"), "127.0.0.1:2002")
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:2001")
		e.waitACKs(e.fallbackACKs, "fallback")

		// The same resources as its first life, so the same versions: "1".
		e.startPrimaryAfter(withEndpoints(svc(1001), "late", 1002), 4)
		wantAddresses(t, late.wantUpdate(t, "late"), "127.0.0.1:1002")
		wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")
		e.waitFallbackClosed()
		e.waitACKs(e.primaryACKs, "primary")
		tr.none(t)
		late.none(t)
	})
}

// The fallback can be files (an outdated static configuration, as gRFC A71
// has in mind): the primary down at start, the client serves from the
// files, then goes back to the primary once it answers.
func TestFallbackToFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := writeResourceFiles(dir, svc(2001)); err != nil {
		t.Fatal(err)
	}
	e := &fallbackEnv{t: t, p: sotw}
	e.held = holdPort(t, "127.0.0.1:0")
	e.paddr = e.held.lis.Addr().String()
	t.Cleanup(func() {
		if e.held != nil {
			e.held.release()
		}
	})
	b, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: e.paddr,
		APIType:   sotw.apiType,
		FallbackServers: []testutils.BootstrapServer{{
			URI: dir, APIType: testutils.APITypeFilesystem, ResourceFiles: fileNames, RefreshDelay: 20 * time.Millisecond,
		}},
		NodeID: nodeID,
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.c = c

	tr := watchTree(c)
	tr.l.wantUpdate(t, "svc")
	tr.r.wantUpdate(t, "svc-route")
	tr.c.wantUpdate(t, "svc-cluster")
	wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:2001")

	e.startPrimary(svc(1001))
	wantAddresses(t, tr.e.wantUpdate(t, "svc-cluster"), "127.0.0.1:1001")
	e.waitACKs(e.primaryACKs, "primary")
	tr.none(t)
	for _, st := range c.Dump() {
		if st.Server != e.paddr {
			t.Errorf("%s %q is from %s, want the primary %s", st.TypeURL, st.Name, st.Server, e.paddr)
		}
	}
}

// wantFrom waits for the first value of every resource of the tree, the
// endpoints being addr, and returns the endpoints' event.
func (tr tree) wantFrom(t *testing.T, addr string) event[*resources.Endpoints] {
	t.Helper()
	tr.l.wantUpdate(t, "svc")
	tr.r.wantUpdate(t, "svc-route")
	tr.c.wantUpdate(t, "svc-cluster")
	ev := tr.e.next(t)
	wantAddresses(t, tr.e.checkUpdate(t, ev, "svc-cluster"), addr)
	return ev
}
