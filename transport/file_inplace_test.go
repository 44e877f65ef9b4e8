package transport_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/goxds/xds/testutils"
)

// Files written in place (a shell's "> file", an editor saving over the
// file) are read only once complete: on Linux when their writer closes
// them, elsewhere (and when polled) once they have been quiet for
// Options.FileQuietPeriod; files replaced by a rename are read at once.

// writeInPlace truncates the file at path and writes data into it, as "> file"
// does: whoever reads it meanwhile sees an empty or partial file.
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

// noResponseWithin fails if the handler gets a response within d. Only used
// where every response would be a bug: what it proves is that nothing was
// read early, and it holds however slow the machine.
func (e *fileEnv) noResponseWithin(d time.Duration, why string) {
	e.t.Helper()
	select {
	case r := <-e.h.responses:
		e.t.Fatalf("%s: handler got version %q with %d resources and %d errors", why, r.Version, len(r.Resources), len(r.ResourceErrors))
	case <-time.After(d):
	}
}

// A file written in two halves through one descriptor, with a pause
// shorter than the quiet period between them: only the complete file is
// handed over, never the first half (which would delete the listeners it
// lacks, or be rejected as a whole). Polled files wait for the quiet
// period; on Linux, watched files are read when their writer closes them.
func TestFileInPlaceWriteAppliedOnlyWhenComplete(t *testing.T) {
	for _, c := range []struct {
		name string
		poll bool
	}{{"lds.yaml", false}, {"lds.json", false}, {"lds.pb", false}, {"lds.yaml", true}} {
		name := c.name
		t.Run(fmt.Sprintf("%s/poll=%v", name, c.poll), func(t *testing.T) {
			t.Parallel()
			opts := fastOptions
			opts.PollFiles = c.poll
			// The pause below (300 ms) and the writes must fit in it, on a
			// loaded machine too.
			opts.FileQuietPeriod = 2 * time.Second
			e := newFileEnv(t, name, opts)
			e.write(name, "1", "L1")
			e.tr.UpdateSubscriptions(ldsURL, []string{"L1", "L2", "L3", "L4"}, nil)
			e.wantListeners("1", 1)

			first, rest := halves(t, name, listenersResp("2", "L1", "L2", "L3", "L4"))
			start := time.Now()
			w := openInPlace(t, e.path(name), os.O_TRUNC)
			w.write(first)
			e.noResponseWithin(300*time.Millisecond, "half a file was read")
			w.write(rest)
			w.close()
			e.wantListeners("2", 4)
			if d := time.Since(start); !readOnClose(c.poll) && d < opts.FileQuietPeriod {
				t.Errorf("the file was read %v after the first write, before it was quiet for %v", d, opts.FileQuietPeriod)
			}
		})
	}
}

// readOnClose tells whether a watched file changed in place is read when its
// writer closes it (inotify) rather than once quiet.
func readOnClose(poll bool) bool { return runtime.GOOS == "linux" && !poll }

// halves encodes resp as the file name holds it, and cuts it in two: for a
// text format at a line's end, where the first half often parses, as a
// response without the listeners it lacks.
func halves(t *testing.T, name string, resp *discoveryv3.DiscoveryResponse) (first, rest []byte) {
	t.Helper()
	data, err := testutils.MarshalResponseFile(name, resp)
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	if i := bytes.LastIndexByte(data[:half], '\n'); i > 0 && !strings.HasSuffix(name, ".pb") {
		half = i + 1
	}
	return data[:half], data[half:]
}

// inPlaceWriter writes a file through one descriptor, as a program that
// writes its output as it goes does.
type inPlaceWriter struct {
	t *testing.T
	f *os.File
}

func openInPlace(t *testing.T, path string, flag int) *inPlaceWriter {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &inPlaceWriter{t: t, f: f}
}

func (w *inPlaceWriter) write(data []byte) {
	w.t.Helper()
	if _, err := w.f.Write(data); err != nil {
		w.t.Fatal(err)
	}
}

func (w *inPlaceWriter) close() {
	w.t.Helper()
	if err := w.f.Close(); err != nil {
		w.t.Fatal(err)
	}
}

// The writer pauses longer than the quiet period, the descriptor still
// open, and what it wrote so far is a valid response by itself, lacking
// listeners: on Linux the file is not read until the writer closes it, so
// no listener is ever deleted. Whether the file was there already or is
// created by the writer.
func TestFileInPlaceLongPauseReadOnClose(t *testing.T) {
	if !readOnClose(false) {
		t.Skip("only inotify reports a writer closing a file; elsewhere the quiet period is all there is")
	}
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			t.Parallel()
			e := newFourListenersServed(t)
			if !existing {
				if err := os.Remove(e.path("lds.yaml")); err != nil {
					t.Fatal(err)
				}
			}

			first, rest := halves(t, "lds.yaml", listenersResp("2", "L1", "L2", "L3", "L4"))
			if n, err := yamlListeners(first); err != nil || n >= 4 {
				t.Fatalf("the first half must be a valid response by itself, with fewer listeners, to show it is not read: %d listeners, %v", n, err)
			}
			w := openInPlace(t, e.path("lds.yaml"), os.O_TRUNC)
			w.write(first)
			// Six quiet periods: time enough for a reader that waits
			// for quiet, none for one that waits for the close.
			e.noResponseWithin(300*time.Millisecond, "the file was read while its writer had it open")
			w.write(rest)
			w.close()
			e.wantListeners("2", 4)
		})
	}
}

// A file replaced by a rename is read at once, however long the quiet
// period: a rename is complete by nature.
func TestFileRenameAppliedAtOnce(t *testing.T) {
	opts := fastOptions
	opts.FileQuietPeriod = time.Hour
	e := newFileEnv(t, "lds.yaml", opts)
	e.write("lds.yaml", "1", "L1")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1", "L2"}, nil)
	e.wantListeners("1", 1)
	e.write("lds.yaml", "2", "L1", "L2")
	e.wantListeners("2", 2)
}

// A file that is still broken once quiet keeps the last good content: its
// names get one resource error each, the same broken bytes written again are
// not reported again, and a name added later gets the last good content.
func TestFileInPlaceBrokenKeepsLastConfig(t *testing.T) {
	opts := fastOptions
	opts.FileQuietPeriod = 50 * time.Millisecond
	e := newFileEnv(t, "lds.yaml", opts)
	e.write("lds.yaml", "1", "L1")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	e.wantListeners("1", 1)
	broken := []byte("version_info: \"2\"\nresources: [unclosed\n")
	writeInPlace(t, e.path("lds.yaml"), broken, os.O_TRUNC)
	e.wantFileErrors("lds.yaml", "L1")
	writeInPlace(t, e.path("lds.yaml"), broken, os.O_TRUNC)
	// The response to a new name is the next thing the handler sees: the
	// rewrite reported nothing.
	e.tr.UpdateSubscriptions(ldsURL, []string{"L2"}, nil)
	e.wantListeners("1", 1)
}

// yamlListeners reads a YAML DiscoveryResponse and returns how many
// resources it holds.
func yamlListeners(data []byte) (int, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return 0, err
	}
	var resp discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(js, &resp); err != nil {
		return 0, err
	}
	return len(resp.GetResources()), nil
}

// newFourListenersServed starts a file transport, its quiet period short
// (50 ms) next to the pauses of the writers of these tests, with lds.yaml
// at version 1 holding L1-L4, all four subscribed and served.
func newFourListenersServed(t *testing.T) *fileEnv {
	t.Helper()
	opts := fastOptions
	opts.FileQuietPeriod = 50 * time.Millisecond
	e := newFileEnv(t, "lds.yaml", opts)
	e.write("lds.yaml", "1", "L1", "L2", "L3", "L4")
	e.tr.UpdateSubscriptions(ldsURL, []string{"L1", "L2", "L3", "L4"}, nil)
	e.wantListeners("1", 4)
	return e
}

// A file removed and made again by a writer that has not finished, both
// before the transport looks at the removal: the removal must not read the
// half-written file that is there by then ("rm f; slow > f"). The transport
// is kept busy (a response held) while it happens, so that it does.
func TestFileRemovedThenWrittenInPlace(t *testing.T) {
	if !readOnClose(false) {
		t.Skip("only inotify reports a writer closing a file; elsewhere the quiet period is all there is")
	}
	e := newFourListenersServed(t)

	hold := make(chan func(), 1)
	e.h.mu.Lock()
	e.h.hold = hold
	e.h.mu.Unlock()
	e.tr.UpdateSubscriptions(ldsURL, []string{"L5"}, nil)
	e.wantListeners("1", 4) // for L5; the transport waits for it to be applied
	if err := os.Remove(e.path("lds.yaml")); err != nil {
		t.Fatal(err)
	}
	first, rest := halves(t, "lds.yaml", listenersResp("2", "L1", "L2", "L3", "L4"))
	w := openInPlace(t, e.path("lds.yaml"), os.O_TRUNC)
	w.write(first)
	e.h.mu.Lock()
	e.h.hold = nil
	e.h.mu.Unlock()
	(<-hold)()

	e.noResponseWithin(300*time.Millisecond, "the file was read while its writer had it open")
	w.write(rest)
	w.close()
	e.wantListeners("2", 4)
}
