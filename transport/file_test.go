package transport_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// FILESYSTEM servers: each type's DiscoveryResponse in a file, read again
// whenever it changes.

type fileEnv struct {
	t   *testing.T
	dir string
	h   *handler
	tr  transport.Transport
}

// newFileEnv serves listeners from dir/name.
func newFileEnv(t *testing.T, name string, opts transport.Options) *fileEnv {
	t.Helper()
	e := &fileEnv{t: t, dir: t.TempDir(), h: newHandler()}
	server := bootstrap.ServerConfig{
		ServerURI:     e.dir,
		APIType:       bootstrap.APITypeFilesystem,
		ResourceFiles: map[string]string{ldsURL: name},
		RefreshDelay:  20 * time.Millisecond,
	}
	if err := (&bootstrap.Config{Servers: []bootstrap.ServerConfig{server}}).Validate(); err != nil {
		t.Fatal(err)
	}
	tr, err := transport.NewBuilder(opts).Build(server, testNode, e.h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	e.tr = tr
	return e
}

func (e *fileEnv) path(name string) string { return filepath.Join(e.dir, name) }

// write replaces the file by an atomic rename.
func (e *fileEnv) write(name, version string, listeners ...string) {
	e.t.Helper()
	resp := listenersResp(version, listeners...)
	if err := testutils.WriteResponseFile(e.path(name), resp); err != nil {
		e.t.Fatal(err)
	}
}

func listenersResp(version string, listeners ...string) *discoveryv3.DiscoveryResponse {
	resp := testutils.SotWResponse(ldsURL, version, "")
	for _, l := range listeners {
		resp.Resources = append(resp.Resources, testutils.MarshalAny(testutils.Listener(l, "R-"+l)))
	}
	return resp
}

// wantListeners waits for the next response and checks its version and
// number of resources.
func (e *fileEnv) wantListeners(version string, n int) *transport.Response {
	e.t.Helper()
	r := e.h.nextResponse(e.t)
	if r.TypeURL != ldsURL || r.Version != version || len(r.Resources) != n || r.Delta {
		e.t.Fatalf("handler got %s version %q with %d resources (delta %v), want version %q with %d",
			r.TypeURL, r.Version, len(r.Resources), r.Delta, version, n)
	}
	return r
}

// wantFileErrors waits for the report of a bad file: names unservable, for
// content rejected, with an error mentioning mentions.
func (e *fileEnv) wantFileErrors(mentions string, names ...string) {
	e.t.Helper()
	u := e.h.nextUnservable(e.t)
	if u.typeURL != ldsURL || !slices.Equal(u.names, names) || !errors.Is(u.err, transport.ErrContentRejected) || !strings.Contains(u.err.Error(), mentions) {
		e.t.Fatalf("unservable %s %q: %v; want %q, content rejected, mentioning %q", u.typeURL, u.names, u.err, names, mentions)
	}
}

// Every format, by extension and, without a telling one, by content.
func TestFileEveryFormat(t *testing.T) {
	resp := listenersResp("7", "L1", "L2")
	for _, c := range []struct {
		name   string
		format string // extension MarshalResponseFile encodes by; "" when as name
	}{
		{"lds.pb", ""}, {"lds.json", ""}, {"lds.yaml", ""}, {"lds.yml", ""}, {"lds.textproto", ""}, {"lds.txt", ""},
		{"lds-binary", ".pb"}, {"lds-json.conf", ".json"}, {"lds-yaml", ".yaml"}, {"lds-text", ".txtpb"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFileEnv(t, c.name, fastOptions)
			data, err := testutils.MarshalResponseFile(c.name+c.format, resp)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(e.path(c.name), data, 0o600); err != nil {
				t.Fatal(err)
			}
			e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
			if s := nextSent(t, e.h); s.typeURL != ldsURL || len(s.names) != 1 {
				t.Fatalf("OnSubscriptionsSent(%v), want L1", s)
			}
			e.wantListeners("7", 2)
		})
	}
}

// A file replaced by an atomic rename, or rewritten in place, is read again.
// A file with no version_info gets one from its content.
func TestFileChanges(t *testing.T) {
	e := newFileEnv(t, "lds.yaml", fastOptions)
	e.write("lds.yaml", "1", "L1")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.wantListeners("1", 1)
	e.write("lds.yaml", "2", "L1", "L2") // rename over it
	e.wantListeners("2", 2)
	data, err := testutils.MarshalResponseFile("x.yaml", listenersResp("", "L3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.path("lds.yaml"), data, 0o600); err != nil { // in place
		t.Fatal(err)
	}
	r := e.h.nextResponse(t)
	if r.Version == "" || len(r.Resources) != 1 {
		t.Fatalf("handler got version %q with %d resources, want a content version and L3", r.Version, len(r.Resources))
	}
	// A name added later gets the file's content again.
	e.tr.UpdateSubscriptions(ldsURL, []string{"L3"}, nil)
	if s := nextSent(t, e.h); len(s.names) != 1 { // L1's
		t.Fatalf("OnSubscriptionsSent(%v)", s)
	}
	if s := nextSent(t, e.h); len(s.names) != 2 {
		t.Fatalf("OnSubscriptionsSent(%v), want L1 and L3", s)
	}
	e.wantListeners(r.Version, 1)
}

// A bad file is rejected: every name wanted gets a resource error, and the
// last valid content stays (nothing is handed over in its place).
func TestFileBadFileKeepsLastConfig(t *testing.T) {
	e := newFileEnv(t, "lds.yaml", fastOptions)
	e.write("lds.yaml", "1", "L1")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1", "L2"}, nil)
	e.wantListeners("1", 1)
	if err := testutils.WriteFileAtomically(e.path("lds.yaml"), []byte("version_info: [unclosed\n")); err != nil {
		t.Fatal(err)
	}
	e.wantFileErrors("lds.yaml", "L1", "L2")
	// A response of another type is bad too.
	wrong := testutils.SotWResponse(cdsURL, "3", "", testutils.Cluster("C1", ""))
	if err := testutils.WriteResponseFile(e.path("lds.yaml"), wrong); err != nil {
		t.Fatal(err)
	}
	e.wantFileErrors(cdsURL, "L1", "L2")
	e.write("lds.yaml", "4", "L1", "L2")
	e.wantListeners("4", 2)
	select {
	case err := <-e.h.streamErrs:
		t.Fatalf("stream error %v: a bad file is no outage", err)
	default:
	}
}

// A file deleted after it was read changes nothing: no response, no error;
// the last content is still handed to names added meanwhile. When it comes
// back it is read.
func TestFileDeletedKeepsLastConfig(t *testing.T) {
	e := newFileEnv(t, "lds.json", fastOptions)
	e.write("lds.json", "1", "L1")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.wantListeners("1", 1)
	if err := os.Remove(e.path("lds.json")); err != nil {
		t.Fatal(err)
	}
	e.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	e.wantListeners("1", 1) // the last content, for L2
	e.write("lds.json", "2", "L1", "L2")
	e.wantListeners("2", 2)
	select {
	case err := <-e.h.streamErrs:
		t.Fatalf("stream error %v: a deleted file keeps its config", err)
	case r := <-e.h.responses:
		t.Fatalf("unexpected response %+v", r)
	case u := <-e.h.unservable:
		t.Fatalf("unexpected unservable report %+v: a deleted file keeps its config", u)
	default:
	}
}

// A file missing before it was ever read makes its names unservable, with
// the file named, until it appears: a name added meanwhile is told too,
// once; nothing counts as sent meanwhile, and there is no stream to fail.
func TestFileMissingAtStart(t *testing.T) {
	e := newFileEnv(t, "lds.pb", fastOptions)
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	for _, name := range []string{"L1", "L2"} {
		if name == "L2" {
			e.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
		}
		u := e.h.nextUnservable(t)
		if u.typeURL != ldsURL || !slices.Equal(u.names, []string{name}) || !strings.Contains(u.err.Error(), "lds.pb") || errors.Is(u.err, transport.ErrContentRejected) {
			t.Fatalf("unservable %s %q: %v; want %s, with the missing file named", u.typeURL, u.names, u.err, name)
		}
	}
	select {
	case s := <-e.h.sent:
		t.Fatalf("OnSubscriptionsSent(%v) with no file", s)
	case err := <-e.h.streamErrs:
		t.Fatalf("stream error %v from a file transport", err)
	case u := <-e.h.unservable:
		t.Fatalf("unservable %+v told again", u)
	default:
	}
	e.write("lds.pb", "1", "L1")
	e.wantListeners("1", 1)
	if s := nextSent(t, e.h); len(s.names) != 2 {
		t.Fatalf("OnSubscriptionsSent(%v), want L1 and L2", s)
	}
}

// Where the system cannot report changes, the files are polled.
func TestFilePolling(t *testing.T) {
	opts := fastOptions
	opts.PollFiles = true
	e := newFileEnv(t, "lds.txt", opts)
	e.write("lds.txt", "1", "L1")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.wantListeners("1", 1)
	e.write("lds.txt", "2", "L1")
	e.wantListeners("2", 1)
	if err := os.Remove(e.path("lds.txt")); err != nil {
		t.Fatal(err)
	}
	e.write("lds.txt", "3", "L1")
	e.wantListeners("3", 1)
}

// A type with no file cannot be fetched: its names are unservable.
func TestFileTypeWithoutFile(t *testing.T) {
	e := newFileEnv(t, "lds.yaml", fastOptions)
	e.tr.UpdateSubscriptions(cdsURL, []string{"C1"}, nil)
	u := e.h.nextUnservable(t)
	if u.typeURL != cdsURL || !slices.Equal(u.names, []string{"C1"}) || !strings.Contains(u.err.Error(), "no file") {
		t.Fatalf("unservable %s %q: %v; want C1, for want of a file", u.typeURL, u.names, u.err)
	}
}

// A name added while the file is bad, after it was read and reported, gets
// the last valid content and the file's error too: it would otherwise wait
// for a resource the file may never serve, told nothing. Only the new name
// is told; those reported already are not told again.
func TestFileBadFileReportedToNamesAddedLater(t *testing.T) {
	e := newFileEnv(t, "lds.yaml", fastOptions)
	e.write("lds.yaml", "1", "L1")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.wantListeners("1", 1)
	if err := testutils.WriteFileAtomically(e.path("lds.yaml"), []byte("version_info: [unclosed\n")); err != nil {
		t.Fatal(err)
	}
	e.wantFileErrors("lds.yaml", "L1")
	// The bad file has been read: L2 comes after it, the file unchanged.
	e.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	e.wantListeners("1", 1) // the last valid content, for L2
	e.wantFileErrors("lds.yaml", "L2")
	// The same while the file is bad and has never been valid: no content
	// to hand over, only the error.
	f := newFileEnv(t, "lds.yaml", fastOptions)
	if err := testutils.WriteFileAtomically(f.path("lds.yaml"), []byte("version_info: [unclosed\n")); err != nil {
		t.Fatal(err)
	}
	f.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	f.wantFileErrors("lds.yaml", "L1")
	f.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	f.wantFileErrors("lds.yaml", "L2")
	select {
	case r := <-e.h.responses:
		t.Fatalf("unexpected response %+v", r)
	case r := <-f.h.responses:
		t.Fatalf("unexpected response %+v", r)
	default:
	}
}
