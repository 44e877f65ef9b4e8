package transport_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/goxds/xds/testutils"
)

// Files written in place (a shell's "> file", an editor saving over the
// file) are read only once they have been quiet for Options.FileQuietPeriod;
// files replaced by a rename are read at once.

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

// A file written in two halves, with a pause shorter than the quiet period
// between them: only the complete file is handed over, never the first half
// (which would delete the listeners it lacks, or be rejected as a whole).
// Polled files (no fsnotify) wait alike.
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

			data, err := testutils.MarshalResponseFile(name, listenersResp("2", "L1", "L2", "L3", "L4"))
			if err != nil {
				t.Fatal(err)
			}
			half := len(data) / 2
			if i := bytes.LastIndexByte(data[:half], '\n'); i > 0 && name != "lds.pb" {
				// At a line's end the first half of a text file often
				// parses, as a response without the listeners it lacks.
				half = i + 1
			}
			start := time.Now()
			writeInPlace(t, e.path(name), data[:half], os.O_TRUNC)
			e.noResponseWithin(300*time.Millisecond, "half a file was read")
			writeInPlace(t, e.path(name), data[half:], os.O_APPEND)
			e.wantListeners("2", 4)
			if d := time.Since(start); d < opts.FileQuietPeriod {
				t.Errorf("the file was read %v after the first write, before it was quiet for %v", d, opts.FileQuietPeriod)
			}
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
