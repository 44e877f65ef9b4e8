package test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/client/csds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Last known good on disk (client.Options.Persist): a client keeps what it
// accepted in a directory; a later client whose servers cannot be reached
// serves it, flagged, until a server answers.

// persistWait is how long the restarted clients wait for their servers:
// on their fake clock, so only the tests' Advance makes it pass.
const persistWait = time.Second

// diskRecorder is a recorder that also learns where each update comes from.
type diskRecorder[T resources.Resource] struct {
	*recorder[T]
	fromDisk chan bool // one per update, in order
}

func newDiskRecorder[T resources.Resource]() *diskRecorder[T] {
	return &diskRecorder[T]{recorder: newRecorder[T](), fromDisk: make(chan bool, 1000)}
}

// UpdateWithInfo implements client.UpdateInfoWatcher.
func (r *diskRecorder[T]) UpdateWithInfo(v T, info client.UpdateInfo) {
	r.fromDisk <- info.FromDisk
	r.recorder.Update(v)
}

// wantUpdateFrom waits, past reports of the outage, for an update of name
// and checks where it came from.
func (r *diskRecorder[T]) wantUpdateFrom(t *testing.T, name string, fromDisk bool) T {
	t.Helper()
	v := r.wantUpdatePastOutage(t, name)
	if got := <-r.fromDisk; got != fromDisk {
		t.Fatalf("update of %s: FromDisk = %v, want %v", name, got, fromDisk)
	}
	return v
}

// diskTree is the watchers of svc's tree, each told where updates come from.
type diskTree struct {
	l *diskRecorder[*resources.Listener]
	r *diskRecorder[*resources.RouteConfig]
	c *diskRecorder[*resources.Cluster]
	e *diskRecorder[*resources.Endpoints]
}

func watchDiskTree(c *client.Client) diskTree {
	t := diskTree{newDiskRecorder[*resources.Listener](), newDiskRecorder[*resources.RouteConfig](),
		newDiskRecorder[*resources.Cluster](), newDiskRecorder[*resources.Endpoints]()}
	client.WatchListener(c, "svc", t.l)
	client.WatchRouteConfig(c, "svc-route", t.r)
	client.WatchCluster(c, "svc-cluster", t.c)
	client.WatchEndpoints(c, "svc-cluster", t.e)
	return t
}

// wantAll waits for an update of each resource of the tree, from disk or
// not, and returns the endpoints' port.
func (tr diskTree) wantAll(t *testing.T, fromDisk bool) uint32 {
	t.Helper()
	tr.l.wantUpdateFrom(t, "svc", fromDisk)
	tr.r.wantUpdateFrom(t, "svc-route", fromDisk)
	tr.c.wantUpdateFrom(t, "svc-cluster", fromDisk)
	eps := tr.e.wantUpdateFrom(t, "svc-cluster", fromDisk)
	return eps.Raw().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
}

// persistCfg is what newPersistClient needs beyond the server's address.
type persistCfg struct {
	dir      string
	clk      *testutils.FakeClock // nil: the real clock
	node     string               // "": nodeID
	logger   *slog.Logger         // nil: the test logger
	features []string             // the server's server_features
	maxAge   time.Duration
}

// newPersistClient is a client of addr persisting as pc says, waiting
// persistWait for its server.
func newPersistClient(t *testing.T, addr string, p protocol, pc persistCfg) *client.Client {
	t.Helper()
	b, err := bootstrapFor(addr, p, config{features: pc.features})
	if err != nil {
		t.Fatal(err)
	}
	if pc.node != "" {
		b.Node.ID = pc.node
	}
	logger := pc.logger
	if logger == nil {
		logger = testLogger()
	}
	opts := client.Options{WatchExpiry: noExpiry, TransportOptions: fastTransport, Logger: logger,
		Persist: client.PersistOptions{Dir: pc.dir, Wait: persistWait, MaxAge: pc.maxAge}}
	if pc.clk != nil {
		opts.Clock = pc.clk
	}
	c, err := client.New(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// persistTree runs a management server serving svc on port 8080 and a
// client persisting in dir that watches its tree, until the client has it
// all; then closes the client, which writes its last files, and stops the
// server. It returns the environment, whose server is down.
func persistTree(t *testing.T, p protocol, dir string) *e2eEnv {
	t.Helper()
	e := &e2eEnv{t: t, v: variant{name: p.name, p: p}}
	e.start(svc(8080))
	c := newPersistClient(t, e.addr, p, persistCfg{dir: dir})
	tr := watchDiskTree(c)
	if port := tr.wantAll(t, false); port != 8080 {
		t.Fatalf("endpoints on port %d, want 8080", port)
	}
	c.Close()
	e.ms.Stop()
	for _, typ := range []string{"Listener", "RouteConfiguration", "Cluster", "ClusterLoadAssignment"} {
		if _, err := os.Stat(fileOfType(dir, typ)); err != nil {
			t.Fatalf("no file for %s after Close: %v", typ, err)
		}
	}
	return e
}

// fileOfType is the file of the type whose type URL ends in "."+typ.
func fileOfType(dir, typ string) string {
	names, _ := filepath.Glob(filepath.Join(dir, "*."+typ+".lkg"))
	if len(names) != 1 {
		return filepath.Join(dir, "missing-"+typ+".lkg")
	}
	return names[0]
}

// A client restarted with its server down serves what the one before it
// accepted, flagged as from disk in updates and in the dump; the server
// coming back replaces everything: new values, flag cleared.
func TestPersistRestartServesFromDiskUntilServerReturns(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		dir := t.TempDir()
		e := persistTree(t, p, dir)

		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		c := newPersistClient(t, e.addr, p, persistCfg{dir: dir, clk: clk})
		tr := watchDiskTree(c)
		barrier(t, c)
		tr.l.nonePastOutage(t) // nothing from disk before the wait is over
		clk.Advance(persistWait)
		if port := tr.wantAll(t, true); port != 8080 {
			t.Fatalf("endpoints from disk on port %d, want 8080", port)
		}
		for _, st := range c.Dump() {
			if !st.FromDisk || st.Status != client.StatusRequested || st.Value == nil {
				t.Errorf("dump of %s %s: FromDisk %v, status %v, value %v; want from disk, REQUESTED, with its value",
					st.TypeURL, st.Name, st.FromDisk, st.Status, st.Value != nil)
			}
		}
		// CSDS: REQUESTED (no server sent it), with the config in force.
		for _, g := range csds.ClientConfig(c, csds.Options{}).GetGenericXdsConfigs() {
			if g.GetClientStatus() != adminv3.ClientResourceStatus_REQUESTED || g.GetXdsConfig() == nil || g.GetVersionInfo() == "" {
				t.Errorf("CSDS of %s %s from disk: %v, config %v, version %q; want REQUESTED with the config and its version",
					g.GetTypeUrl(), g.GetName(), g.GetClientStatus(), g.GetXdsConfig() != nil, g.GetVersionInfo())
			}
		}

		e.start(svc(9090)) // the server returns, at the same address, with new endpoints
		if port := tr.wantAll(t, false); port != 9090 {
			t.Fatalf("endpoints from the server on port %d, want 9090", port)
		}
		for _, st := range c.Dump() {
			if st.FromDisk || st.Status != client.StatusACKed {
				t.Errorf("dump of %s %s once the server answered: FromDisk %v, status %v", st.TypeURL, st.Name, st.FromDisk, st.Status)
			}
		}
	})
}

// A file whose checksum fails is ignored, with a warning naming it; the
// other files still serve.
func TestPersistCorruptFileIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := persistTree(t, sotw, dir)
	path := fileOfType(dir, "Cluster")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	logger, sink := newCaptureLogger()
	c := newPersistClient(t, e.addr, sotw, persistCfg{dir: dir, clk: clk, logger: logger})
	tr := watchDiskTree(c)
	clk.Advance(persistWait)
	tr.l.wantUpdateFrom(t, "svc", true)
	tr.r.wantUpdateFrom(t, "svc-route", true)
	tr.e.wantUpdateFrom(t, "svc-cluster", true)
	barrier(t, c)
	tr.c.nonePastOutage(t)
	wantWarning(t, sink, path, "checksum")
}

// Files written for another node are ignored, with a warning naming each.
func TestPersistFileOfAnotherNodeIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := persistTree(t, sotw, dir)

	sink := wantNothingFromDisk(t, e.addr, persistCfg{dir: dir, node: "node-2"})
	wantWarning(t, sink, fileOfType(dir, "Listener"), `written for node "node-1"`)
	wantWarning(t, sink, fileOfType(dir, "Cluster"), `written for node "node-1"`)
}

// wantNothingFromDisk starts a SotW client of addr persisting as pc says,
// on a fake clock and with its log captured, lets the persistence wait go
// by, and checks that no watcher of the tree was served from disk. It
// returns the log, for the warning that says why.
func wantNothingFromDisk(t *testing.T, addr string, pc persistCfg) *logSink {
	t.Helper()
	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	logger, sink := newCaptureLogger()
	pc.clk, pc.logger = clk, logger
	c := newPersistClient(t, addr, sotw, pc)
	tr := watchDiskTree(c)
	clk.Advance(persistWait)
	barrier(t, c)
	tr.l.nonePastOutage(t)
	tr.r.nonePastOutage(t)
	tr.c.nonePastOutage(t)
	tr.e.nonePastOutage(t)
	return sink
}

// wantWarning checks that a warning about file says why, with reason in it.
func wantWarning(t *testing.T, sink *logSink, file, reason string) {
	t.Helper()
	for _, r := range sink.all() {
		if r.level == slog.LevelWarn && r.attrs["file"] == file && strings.Contains(r.attrs["reason"], reason) {
			return
		}
	}
	t.Errorf("no warning about %s mentioning %q; logs: %v", file, reason, sink.all())
}

// A resource the server deletes leaves the directory: the file of its
// type, which held only it, is removed.
func TestPersistDeletionRemovesFile(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		dir := t.TempDir()
		fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fs.Stop)
		// fail_on_data_errors: the server's deletion drops what is held
		// (gRFC A88), which is what is persisted.
		c := newPersistClient(t, fs.Address(), p, persistCfg{dir: dir, features: failOnDataErrors})
		e := &fakeEnv{t: t, fs: fs, c: c}
		r := newRecorder[*resources.Cluster]()
		client.WatchCluster(c, "c1", r)
		e.reply(p) // the subscription
		e.respond(p, cdsURL, "n1", cluster("c1", "1", 0))
		r.wantUpdate(t, "c1")
		waitFor(t, "the cluster's file", func() bool { _, err := os.Stat(fileOfType(dir, "Cluster")); return err == nil })
		if p.delta {
			e.deltaReq() // the ACK
			e.sendDelta(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: cdsURL, Nonce: "n2", RemovedResources: []string{"c1"}})
		} else {
			e.req() // the ACK
			e.send(&discoveryv3.DiscoveryResponse{TypeUrl: cdsURL, VersionInfo: "2", Nonce: "n2"})
		}
		r.wantNotFound(t, "c1")
		c.Close() // waits for the writer's last round
		if _, err := os.Stat(fileOfType(dir, "Cluster")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the cluster's file after its deletion: %v, want none", err)
		}
	})
}

// Values from disk, with the server back but silent: the first request
// claims nothing (no SotW version, no delta initial_resource_versions: the
// server must send what the client holds from disk); the does-not-exist
// timer runs but does not report the persisted resource missing; the
// server's first answer replaces it. Then, the server answering, a
// persisted resource it does not send within the timeout is dropped.
func TestPersistServerBackButSilent(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		dir := t.TempDir()
		e := persistTree(t, p, dir)

		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		c := newPersistClient(t, e.addr, p, persistCfg{dir: dir, clk: clk})
		wc := newDiskRecorder[*resources.Cluster]()
		we := newDiskRecorder[*resources.Endpoints]()
		client.WatchCluster(c, "svc-cluster", wc)
		client.WatchEndpoints(c, "svc-cluster", we)
		clk.Advance(persistWait)
		wc.wantUpdateFrom(t, "svc-cluster", true)
		we.wantUpdateFrom(t, "svc-cluster", true)

		fs := startFake(t, e.addr)
		fe := &fakeEnv{t: t, fs: fs, c: c}
		// The two types' first requests, in either order.
		for range 2 {
			if p.delta {
				r := fe.deltaReq()
				wantReq(t, r, &discoveryv3.DeltaDiscoveryRequest{Node: r.GetNode(), TypeUrl: r.GetTypeUrl(),
					ResourceNamesSubscribe: []string{"svc-cluster"}})
			} else {
				r := fe.req()
				wantReq(t, r, &discoveryv3.DiscoveryRequest{Node: r.GetNode(), TypeUrl: r.GetTypeUrl(),
					ResourceNames: []string{"svc-cluster"}})
			}
		}
		waitTimers(t, clk, 2) // the does-not-exist timers of both
		clk.Advance(2 * noExpiry)
		barrier(t, c)
		wc.nonePastOutage(t)
		we.nonePastOutage(t)
		if st, _ := status(c, cdsURL, "svc-cluster"); !st.FromDisk {
			t.Fatalf("cluster after the timeout with a silent server: %+v, want still from disk", st)
		}

		// The server answers with the cluster, not the endpoints.
		fe.respond(p, cdsURL, "n1", res("svc-cluster", "2", testutils.Cluster("svc-cluster", "svc-cluster")))
		wc.wantUpdateFrom(t, "svc-cluster", false)
		fe.reply(p) // the ACK
		// The endpoints never come: a timeout after the server answered,
		// the value from disk is dropped as not existing.
		if st, _ := status(c, edsURL, "svc-cluster"); !st.FromDisk {
			t.Fatalf("endpoints after the server answered CDS: %+v, want still from disk", st)
		}
		clk.Advance(noExpiry)
		we.wantNotFound(t, "svc-cluster")
		if st, _ := status(c, edsURL, "svc-cluster"); st.FromDisk || st.Status != client.StatusDoesNotExist || st.Value != nil {
			t.Fatalf("endpoints a timeout after the server answered: %+v, want DOES_NOT_EXIST without a value", st)
		}
	})
}

// A file older than MaxAge is stale: ignored, with a warning naming it.
func TestPersistStaleFileIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := persistTree(t, sotw, dir)
	sink := wantNothingFromDisk(t, e.addr, persistCfg{dir: dir, maxAge: time.Nanosecond})
	wantWarning(t, sink, fileOfType(dir, "Listener"), "stale")
}

// Files written by a client of another server are ignored, with a warning
// naming each: what one server sent says nothing of another's.
func TestPersistFileOfAnotherServerIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	persistTree(t, sotw, dir)
	other := startFake(t, "127.0.0.1:0") // reachable, never answers
	sink := wantNothingFromDisk(t, other.Address(), persistCfg{dir: dir})
	wantWarning(t, sink, fileOfType(dir, "Cluster"), "none of them in this bootstrap")
}

// A wildcard watch made with the server down gets every persisted resource
// of its type, flagged.
func TestPersistWildcardServedFromDisk(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		dir := t.TempDir()
		e := persistTree(t, p, dir)
		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		c := newPersistClient(t, e.addr, p, persistCfg{dir: dir, clk: clk})
		clk.Advance(persistWait)
		w := newDiskRecorder[*resources.Cluster]()
		client.WatchCluster(c, "*", w)
		w.wantUpdateFrom(t, "svc-cluster", true)
	})
}

// A server that answers before the wait is over is never overridden by the
// files: its values are delivered, and the wait passing brings nothing.
func TestPersistNeverReplacesServerData(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		dir := t.TempDir()
		e := persistTree(t, p, dir)
		e.start(svc(9090))
		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		c := newPersistClient(t, e.addr, p, persistCfg{dir: dir, clk: clk})
		tr := watchDiskTree(c)
		if port := tr.wantAll(t, false); port != 9090 {
			t.Fatalf("endpoints on port %d, want the server's 9090", port)
		}
		clk.Advance(persistWait)
		barrier(t, c)
		tr.l.none(t)
		tr.r.none(t)
		tr.c.none(t)
		tr.e.none(t)
		for _, st := range c.Dump() {
			if st.FromDisk {
				t.Errorf("%s %s from disk, though the server sent it", st.TypeURL, st.Name)
			}
		}
	})
}

// Watches with dynamic parameters are persisted each under its parameters:
// a restarted client's watch with the same parameters gets its own
// variant from disk, and a watch without them gets nothing.
func TestPersistDynamicParameters(t *testing.T) {
	forEachProtocol(t, protocols, func(t *testing.T, p protocol) {
		t.Parallel()
		dir := t.TempDir()
		fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fs.Stop)
		watch := func(c *client.Client, params map[string]string) *diskRecorder[*resources.Cluster] {
			w := newDiskRecorder[*resources.Cluster]()
			client.WatchWithOptions(c, resources.ClusterType, "C1", client.WatchOptions{DynamicParameters: params}, w)
			return w
		}
		c := newPersistClient(t, fs.Address(), p, persistCfg{dir: dir})
		e := &fakeEnv{t: t, fs: fs, c: c}
		prod, dev := watch(c, dpProd), watch(c, dpDev)
		e.waitLocators(p, 2)
		e.respond(p, cdsURL, "n1",
			testutils.WrapVariant("C1", "v1", dpValue("env", "prod"), testutils.Cluster("C1", "eds-prod")),
			testutils.WrapVariant("C1", "v1", dpValue("env", "dev"), testutils.Cluster("C1", "eds-dev")))
		e.replyTo(p, "n1")
		prod.wantUpdateFrom(t, "C1", false)
		dev.wantUpdateFrom(t, "C1", false)
		c.Close()
		addr := fs.Address()
		fs.Stop()

		clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
		c2 := newPersistClient(t, addr, p, persistCfg{dir: dir, clk: clk})
		prod2, dev2, plain2 := watch(c2, dpProd), watch(c2, dpDev), watch(c2, nil)
		clk.Advance(persistWait)
		if got := prod2.wantUpdateFrom(t, "C1", true).EDSServiceName(); got != "eds-prod" {
			t.Errorf("C1{env=prod} from disk: EDS name %q, want eds-prod", got)
		}
		if got := dev2.wantUpdateFrom(t, "C1", true).EDSServiceName(); got != "eds-dev" {
			t.Errorf("C1{env=dev} from disk: EDS name %q, want eds-dev", got)
		}
		barrier(t, c2)
		plain2.nonePastOutage(t)
	})
}
