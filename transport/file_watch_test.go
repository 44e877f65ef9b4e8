package transport_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// logRecorder is a slog.Handler that keeps the messages of the records it
// is given.
type logRecorder struct {
	mu      sync.Mutex
	msgs    []string
	changed chan struct{} // capacity 1: a message was added
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{}, 1)} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// count returns how many messages hold s.
func (l *logRecorder) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// wait waits until n messages hold s.
func (l *logRecorder) wait(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for l.count(s) < n {
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("%d log messages with %q, want %d", l.count(s), s, n)
		}
	}
}

// A FILESYSTEM server whose directory does not exist yet is polled until it
// does, and says so once, not at every poll; once the directory appears it
// is watched, and a file then written in it is read. The same when the
// directory is removed, and comes back.
func TestFileMissingDirectoryLoggedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	server := bootstrap.ServerConfig{
		ServerURI:     dir,
		APIType:       bootstrap.APITypeFilesystem,
		ResourceFiles: map[string]string{ldsURL: "lds.yaml"},
		RefreshDelay:  10 * time.Millisecond,
	}
	if err := (&bootstrap.Config{Servers: []bootstrap.ServerConfig{server}}).Validate(); err != nil {
		t.Fatal(err)
	}
	logs := newLogRecorder()
	opts := fastOptions
	opts.Logger = slog.New(logs)
	h := newHandler()
	tr, err := transport.NewBuilder(opts).Build(server, testNode, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
	h.nextUnservable(t) // the file is missing
	// Polled every 10 ms: this wait gives a transport that logs at every
	// poll the chance to show it, and cannot fail one that does not.
	<-time.After(200 * time.Millisecond)

	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Written in place once the directory is there: seen through the
	// directory's watch (or by polling, where the system has none).
	logs.wait(t, "watching the directory of a file now", 1)
	writeIn := func(version string) {
		t.Helper()
		data, err := testutils.MarshalResponseFile("lds.yaml", listenersResp(version, "L1"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lds.yaml"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := h.nextResponse(t)
		if r.Version != version || len(r.Resources) != 1 {
			t.Fatalf("handler got version %q with %d resources, want version %s with L1", r.Version, len(r.Resources), version)
		}
	}
	writeIn("1")
	if n := logs.count("cannot watch the directory"); n != 1 {
		t.Errorf("the missing directory was logged %d times, want once", n)
	}

	// The directory removed, its watch goes with it: polled again (and
	// said so, once), then watched again when it is back.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, "cannot watch the directory", 2)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, "watching the directory of a file now", 2)
	writeIn("2")
	if n := logs.count("cannot watch the directory"); n != 2 {
		t.Errorf("the missing directory was logged %d times, want twice (once per absence)", n)
	}
}

// Files behind symlinks: a Kubernetes ConfigMap volume swaps a symlink to a
// directory (..data) by renaming a new one over it, and the file's own
// symlink leads through it; a file may also be a symlink to another in its
// directory, written in place. Each change is read once complete.
func TestFileBehindSymlinks(t *testing.T) {
	t.Run("configmap", func(t *testing.T) {
		e := newFileEnv(t, "lds.yaml", fastOptions)
		version := func(v string) {
			t.Helper()
			d := e.path("..v" + v)
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := testutils.WriteResponseFile(filepath.Join(d, "lds.yaml"), listenersResp(v, "L1")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("..v"+v, e.path("..data_tmp")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(e.path("..data_tmp"), e.path("..data")); err != nil {
				t.Fatal(err)
			}
		}
		version("1")
		if err := os.Symlink(filepath.Join("..data", "lds.yaml"), e.path("lds.yaml")); err != nil {
			t.Fatal(err)
		}
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1"}, nil)
		e.wantListeners("1", 1)
		version("2")
		e.wantListeners("2", 1)
	})
	t.Run("target in place", func(t *testing.T) {
		opts := fastOptions
		opts.FileQuietPeriod = 50 * time.Millisecond
		e := newFileEnv(t, "lds.yaml", opts)
		e.write("real.yaml", "1", "L1", "L2")
		if err := os.Symlink("real.yaml", e.path("lds.yaml")); err != nil {
			t.Fatal(err)
		}
		e.tr.UpdateSubscriptions(ldsURL, []string{"L1", "L2"}, nil)
		e.wantListeners("1", 2)
		first, rest := halves(t, "real.yaml", listenersResp("2", "L1", "L2"))
		w := openInPlace(t, e.path("real.yaml"), os.O_TRUNC)
		w.write(first)
		if readOnClose(false) {
			e.noResponseWithin(300*time.Millisecond, "the file was read while its writer had it open")
		}
		w.write(rest)
		w.close()
		e.wantListeners("2", 2)
	})
}
