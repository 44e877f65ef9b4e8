package test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// A FILESYSTEM source through the client, where files are written the way
// people write them: in place.

// newFilesClient is a client of the files in dir, with the given quiet
// period for files changed in place.
func newFilesClient(t *testing.T, dir string, quiet time.Duration) *client.Client {
	t.Helper()
	b, err := bootstrapFor(dir, files, config{})
	if err != nil {
		t.Fatal(err)
	}
	topts := fastTransport
	topts.FileQuietPeriod = quiet
	c, err := client.New(b, client.Options{WatchExpiry: noExpiry, TransportOptions: topts, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A listener file (YAML) rewritten in place through one descriptor, in two
// halves with a pause between them: the watchers never hear that a
// listener was deleted (the first half parses, as a file without the
// listeners it lacks), nor that the file was bad; they get the new
// listeners once the file is complete. On Linux the pause outlasts the
// quiet period, which is not what decides there: the writer's close is.
func TestFileWrittenInPlaceNeverDeletes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rs := svc(2001)
	names := []string{"l-a", "l-b", "l-c", "l-d", "l-e", "l-f"}
	rs.Listeners = nil
	for _, n := range names {
		rs.Listeners = append(rs.Listeners, testutils.Listener(n, "r1"))
	}
	if err := writeResourceFiles(dir, rs); err != nil {
		t.Fatal(err)
	}
	// Elsewhere the pause (300 ms) and the writes must fit in the quiet
	// period, on a loaded machine too.
	quiet := 2 * time.Second
	if runtime.GOOS == "linux" {
		quiet = 50 * time.Millisecond
	}
	c := newFilesClient(t, dir, quiet)
	ws := map[string]*recorder[*resources.Listener]{}
	for _, n := range names {
		ws[n] = newRecorder[*resources.Listener]()
		client.WatchListener(c, n, ws[n])
		ws[n].wantUpdate(t, n)
	}

	resp := testutils.SotWResponse(ldsURL, "v2", "")
	for _, n := range names {
		resp.Resources = append(resp.Resources, testutils.MarshalAny(testutils.Listener(n, "r2")))
	}
	path := filepath.Join(dir, fileNames[ldsURL])
	data, err := testutils.MarshalResponseFile(path, resp)
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	if i := strings.LastIndexByte(string(data[:half]), '\n'); i > 0 {
		half = i + 1 // at a line's end, so that the first half parses
	}
	// Written through one descriptor, as a program writing its output as
	// it goes does: on Linux the file is read when it is closed.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	// Nothing can say "the half was not read" but time: this wait only
	// gives a bug the chance to show, and cannot fail a correct client.
	<-time.After(300 * time.Millisecond)
	for _, n := range names {
		select {
		case ev := <-ws[n].events:
			t.Fatalf("watcher of %s told %v while the file was half written", n, ev)
		default:
		}
	}
	if _, err := f.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if l := ws[n].wantUpdate(t, n); l.RouteConfigName != "r2" {
			t.Fatalf("listener %s routes to %q, want r2", n, l.RouteConfigName)
		}
	}
}

// In file mode nobody is told of a management server: the errors of a
// missing file and of a bad one speak of files.
func TestFileErrorsSpeakOfFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newFilesClient(t, dir, 50*time.Millisecond)
	w := newRecorder[*resources.Listener]()
	client.WatchListener(c, "svc", w)
	ev := w.wantError(t, "resource-error", client.ErrServerUnavailable, "svc")
	checkFileWording(t, ev.err, fileNames[ldsURL])

	path := filepath.Join(dir, fileNames[ldsURL])
	writeInPlace(t, path, []byte("resources: {not a list\n"), os.O_CREATE|os.O_TRUNC)
	ev = w.wantError(t, "resource-error", client.ErrResourceInvalid, "svc")
	checkFileWording(t, ev.err, fileNames[ldsURL])

	// A resource the file no longer has is deleted by the file.
	rs := svc(2002)
	if err := writeResourceFiles(dir, rs); err != nil {
		t.Fatal(err)
	}
	w.wantUpdate(t, "svc")
	if err := testutils.WriteResponseFile(path, testutils.SotWResponse(ldsURL, "empty", "")); err != nil {
		t.Fatal(err)
	}
	ev = w.wantNotFound(t, "svc")
	checkFileWording(t, ev.err, "")
}

func checkFileWording(t *testing.T, err error, mention string) {
	t.Helper()
	msg := err.Error()
	t.Logf("the watcher was told: %s", msg)
	if strings.Contains(strings.ToLower(msg), "management server") || strings.Contains(msg, "server unavailable") {
		t.Errorf("error %q speaks of a server in file mode", msg)
	}
	if !strings.Contains(msg, "file") || !strings.Contains(msg, mention) {
		t.Errorf("error %q does not speak of the file %s", msg, mention)
	}
	var xe *client.Error
	if !errors.As(err, &xe) {
		t.Errorf("error %q is not a *client.Error", msg)
	}
}

// writeInPlace truncates (os.O_TRUNC) or appends to (os.O_APPEND) the file
// at path and writes data, as a shell's "> file" or ">> file" does.
func writeInPlace(t *testing.T, path string, data []byte, flag int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|flag, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
