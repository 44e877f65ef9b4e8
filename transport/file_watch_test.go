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

// wait waits until a message holds s.
func (l *logRecorder) wait(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for l.count(s) == 0 {
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("no log message with %q", s)
		}
	}
}

// A FILESYSTEM server whose directory does not exist yet is polled until it
// does, and says so once, not at every poll; once the directory appears it
// is watched, and a file then written in it is read.
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
	logs.wait(t, "watching the directory of a file now")
	data, err := testutils.MarshalResponseFile("lds.yaml", listenersResp("1", "L1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lds.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.nextResponse(t)
	if r.Version != "1" || len(r.Resources) != 1 {
		t.Fatalf("handler got version %q with %d resources, want version 1 with L1", r.Version, len(r.Resources))
	}
	if n := logs.count("cannot watch the directory"); n != 1 {
		t.Errorf("the missing directory was logged %d times, want once", n)
	}
}
