package client

import (
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
