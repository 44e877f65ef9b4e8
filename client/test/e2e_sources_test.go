package test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// The servers of the E2E variants that are not gRPC: a testutils.RESTServer
// that holds polls (long polling), and a directory of files.

// fileNames are the files of the files variant, one format each.
var fileNames = map[string]string{
	ldsURL: "listeners.yaml",
	rdsURL: "routes.json",
	cdsURL: "clusters.pb",
	edsURL: "endpoints.txtpb",
}

// longPoll is how long the REST server holds a poll with nothing new.
const longPoll = 30 * time.Second

func (e *e2eEnv) startSource(rs testutils.Resources) {
	e.t.Helper()
	if e.v.p.files {
		if e.dir == "" {
			e.dir = e.t.TempDir()
			e.addr = e.dir
		}
		e.updateSource(rs)
		return
	}
	s, err := testutils.StartRESTServer(testutils.RESTServerOptions{Address: e.opts.Address, LongPoll: longPoll, Logger: e.opts.Logger})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Stop)
	e.rs = s
	e.opts.Address = s.Address()
	e.addr = s.Address()
	e.updateSource(rs)
}

func (e *e2eEnv) updateSource(rs testutils.Resources) {
	e.t.Helper()
	if e.v.p.rest {
		if err := e.rs.Update(testContext(e.t), nodeID, rs); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	if err := writeResourceFiles(e.dir, rs); err != nil {
		e.t.Fatal(err)
	}
}

// restartSource: a new REST server at the same address; the files are
// deleted, then written anew.
func (e *e2eEnv) restartSource(rs testutils.Resources) {
	e.t.Helper()
	if e.v.p.rest {
		e.rs.Stop()
		e.startSource(rs)
		return
	}
	for _, name := range fileNames {
		if err := os.Remove(filepath.Join(e.dir, name)); err != nil {
			e.t.Fatal(err)
		}
	}
	e.updateSource(rs)
}

// fileVersions numbers the writes of writeResourceFiles.
var fileVersions atomic.Int64

// writeResourceFiles writes rs as the files of fileNames in dir, each file
// a DiscoveryResponse of every resource of its type.
func writeResourceFiles(dir string, rs testutils.Resources) error {
	n := fileVersions.Add(1)
	byType := map[string][]proto.Message{}
	for _, l := range rs.Listeners {
		byType[ldsURL] = append(byType[ldsURL], l)
	}
	for _, r := range rs.Routes {
		byType[rdsURL] = append(byType[rdsURL], r)
	}
	for _, c := range rs.Clusters {
		byType[cdsURL] = append(byType[cdsURL], c)
	}
	for _, ep := range rs.Endpoints {
		byType[edsURL] = append(byType[edsURL], ep)
	}
	for typeURL, name := range fileNames {
		resp := testutils.SotWResponse(typeURL, fmt.Sprint("f", n), "", byType[typeURL]...)
		if err := testutils.WriteResponseFile(filepath.Join(dir, name), resp); err != nil {
			return err
		}
	}
	return nil
}

// A file source through the client: a bad file gives the watchers of its
// type an error (a resource error to those still waiting, an ambient one to
// those holding a value) and the last valid configuration stays; a deleted
// file changes nothing; a rewritten one is delivered.
func TestFileSourceBadAndDeletedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := writeResourceFiles(dir, svc(1001)); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, dir, files, config{expiry: noExpiry})
	l := newRecorder[*resources.Listener]()
	waiting := newRecorder[*resources.Listener]()
	client.WatchListener(c, "svc", l)
	client.WatchListener(c, "not-yet", waiting)
	l.wantUpdate(t, "svc")

	path := writeBadListenersFile(t, dir)
	ev := l.wantError(t, "ambient-error", client.ErrResourceInvalid, "svc")
	t.Logf("the watcher was told: %v", ev.err)
	waiting.wantError(t, "resource-error", client.ErrResourceInvalid, "not-yet")
	if st, _ := status(c, ldsURL, "svc"); st.Value == nil {
		t.Fatalf("dump %+v, want the last valid listener kept", st)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	rs := svc(1001)
	rs.Listeners = append(rs.Listeners, testutils.Listener("not-yet", "svc-route"))
	resp := testutils.SotWResponse(ldsURL, "back", "")
	for _, m := range rs.Listeners {
		resp.Resources = append(resp.Resources, testutils.MarshalAny(m))
	}
	if err := testutils.WriteResponseFile(path, resp); err != nil {
		t.Fatal(err)
	}
	waiting.wantUpdate(t, "not-yet")
	barrier(t, c)
	l.none(t) // svc did not change, deleted file or not
	if st, _ := status(c, ldsURL, "svc"); st.Version != "back" {
		t.Fatalf("dump %+v, want version back", st)
	}
}

// A watch of a name made after the file turned bad, once the client has
// heard of it, gets a resource error as well: TestFileSourceBadAndDeletedFiles
// races its second watch against the reading of the file, and this is the
// order in which it lost.
func TestFileSourceBadFileWatchedLater(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := writeResourceFiles(dir, svc(1001)); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, dir, files, config{expiry: noExpiry})
	l := newRecorder[*resources.Listener]()
	client.WatchListener(c, "svc", l)
	l.wantUpdate(t, "svc")
	writeBadListenersFile(t, dir)
	l.wantError(t, "ambient-error", client.ErrResourceInvalid, "svc")

	waiting := newRecorder[*resources.Listener]()
	client.WatchListener(c, "not-yet", waiting)
	waiting.wantError(t, "resource-error", client.ErrResourceInvalid, "not-yet")
	barrier(t, c)
	l.none(t) // svc was told already
}

// writeBadListenersFile replaces the Listener file in dir, atomically, with
// YAML that is no DiscoveryResponse, and returns its path.
func writeBadListenersFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, fileNames[ldsURL])
	if err := testutils.WriteFileAtomically(path, []byte("resources: {not a list\n")); err != nil {
		t.Fatal(err)
	}
	return path
}
