package client

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A line queued under the client's lock keeps the time and the place it
// was logged at, as slog.Logger would record them, though the handler sees
// it only after unlocking.
func TestLockedLogKeepsTimeAndCaller(t *testing.T) {
	var q lockedLog
	before := time.Now()
	q.Warn("queued", "k", "v")
	lines := q.take()
	if len(lines) != 1 || len(q.take()) != 0 {
		t.Fatalf("take returned %d lines, then more: want one, then none", len(lines))
	}
	r := lines[0]
	if r.Message != "queued" || r.NumAttrs() != 1 || r.Time.Before(before) {
		t.Errorf("record %q with %d attrs at %v, want \"queued\" with one attr, at or after %v", r.Message, r.NumAttrs(), r.Time, before)
	}
	f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
	if !strings.HasSuffix(f.Function, ".TestLockedLogKeepsTimeAndCaller") {
		t.Errorf("record's caller is %s (%s:%d), want the test", f.Function, f.File, f.Line)
	}
}

// Every release of Client.mu goes through Client.unlock, or the lines
// queued under it would wait for the next release that does: a source check,
// so that new code (or a merge) that unlocks directly is caught.
func TestClientMutexReleasedThroughUnlock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		// logger.go holds unlock itself; in loadstore.go, c is a
		// *ClusterLoad, whose mutex is its own.
		if strings.HasSuffix(f, "_test.go") || f == "logger.go" || f == "loadstore.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if strings.Contains(line, "c.mu.Unlock()") {
				t.Errorf("%s:%d releases Client.mu without c.unlock(): %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
