package warnlimit

import (
	"log/slog"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var l Limiter
	t0 := time.Unix(1000, 0)
	written := 0
	for i := range 25 {
		ok, extra := l.allow("m", t0.Add(time.Duration(i)*time.Millisecond))
		if ok {
			written++
		}
		if wantNote := i == Burst-1; (len(extra) > 0) != wantNote {
			t.Errorf("line %d: extra %v, want the note only on line %d", i, extra, Burst-1)
		}
	}
	if written != Burst {
		t.Errorf("%d of 25 like lines written in one window, want %d", written, Burst)
	}
	// Another message has a count of its own.
	if ok, extra := l.allow("other", t0); !ok || extra != nil {
		t.Errorf("another message: written %v, extra %v; want written alone", ok, extra)
	}
	// Still in the window: held back.
	if ok, _ := l.allow("m", t0.Add(Window-time.Millisecond)); ok {
		t.Error("a line before the window's end was written")
	}
	// The first line of the next window says how many were held back.
	ok, extra := l.allow("m", t0.Add(Window))
	if !ok || len(extra) != 2 || extra[0] != "held_back" || extra[1] != 25-Burst+1 {
		t.Errorf("first line after the window: written %v, extra %v; want held_back %d", ok, extra, 25-Burst+1)
	}
	if ok, extra := l.allow("m", t0.Add(Window+time.Millisecond)); !ok || extra != nil {
		t.Errorf("second line of the new window: written %v, extra %v", ok, extra)
	}
}

// Limit passes other levels untouched, and adds the note to a copy of
// the caller's arguments, never to the caller's array.
func TestLimitLevelsAndArgs(t *testing.T) {
	var l Limiter
	now := time.Unix(1000, 0)
	for range 3 * Burst {
		if ok, _ := l.Limit(slog.LevelDebug, "d", nil, now); !ok {
			t.Fatal("a debug line was held back")
		}
	}
	args := make([]any, 2, 4)
	args[0], args[1] = "cluster", "c"
	for i := range Burst {
		ok, got := l.Limit(slog.LevelWarn, "w", args, now)
		if !ok {
			t.Fatalf("warning %d of a burst held back", i)
		}
		if i == Burst-1 && (len(got) != 4 || got[2] != "note") {
			t.Errorf("last warning of the burst: args %v, want the caller's and a note", got)
		}
	}
	if extra := args[:4]; extra[2] != nil {
		t.Errorf("Limit wrote its note into the caller's array: %v", extra)
	}
	if ok, _ := l.Limit(slog.LevelWarn, "w", args, now); ok {
		t.Error("a warning past the burst was written")
	}
}
