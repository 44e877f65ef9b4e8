package grpcxds

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
)

func TestWarnLimiter(t *testing.T) {
	var l warnLimiter
	t0 := time.Unix(1000, 0)
	written := 0
	for i := range 25 {
		ok, extra := l.allow("m", t0.Add(time.Duration(i)*time.Millisecond))
		if ok {
			written++
		}
		if wantNote := i == warnBurst-1; (len(extra) > 0) != wantNote {
			t.Errorf("line %d: extra %v, want the note only on line %d", i, extra, warnBurst-1)
		}
	}
	if written != warnBurst {
		t.Errorf("%d of 25 like lines written in one window, want %d", written, warnBurst)
	}
	// Another message has a count of its own.
	if ok, extra := l.allow("other", t0); !ok || extra != nil {
		t.Errorf("another message: written %v, extra %v; want written alone", ok, extra)
	}
	// Still in the window: held back.
	if ok, _ := l.allow("m", t0.Add(warnWindow-time.Millisecond)); ok {
		t.Error("a line before the window's end was written")
	}
	// The first line of the next window says how many were held back.
	ok, extra := l.allow("m", t0.Add(warnWindow))
	if !ok || len(extra) != 2 || extra[0] != "held_back" || extra[1] != 25-warnBurst+1 {
		t.Errorf("first line after the window: written %v, extra %v; want held_back %d", ok, extra, 25-warnBurst+1)
	}
	if ok, extra := l.allow("m", t0.Add(warnWindow+time.Millisecond)); !ok || extra != nil {
		t.Errorf("second line of the new window: written %v, extra %v", ok, extra)
	}
}

// recordingHandler keeps the records of one message, and if added is
// set, signals it (without blocking) at each: a test can wait for a line
// written once a lock is released.
type recordingHandler struct {
	msg     string
	mu      *sync.Mutex
	records *[]slog.Record
	added   chan struct{}
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.mu.Lock()
		*h.records = append(*h.records, r)
		h.mu.Unlock()
		if h.added != nil {
			select {
			case h.added <- struct{}{}:
			default:
			}
		}
	}
	return nil
}
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

// Every endpoint of 300 clusters failing at once (a zone down) used to
// write 300 warnings, one per cluster; 10,000 at 10,000 clusters. The
// channel writes warnBurst of them, the last saying that more are held
// back.
func TestUnreachableClustersWarnInABurst(t *testing.T) {
	t.Parallel()
	const n = 300
	const msg = "cluster has no usable endpoint; its RPCs fail"
	var (
		mu      sync.Mutex
		records []slog.Record
	)
	cc := &failingCC{calls: make(chan func(), 2*n), want: n, done: make(chan struct{})}
	b := newStuckBalancer(&cc.stuckCC, &manualClock{now: time.Unix(1000, 0)}, time.Minute)
	b.cc = cc
	b.logger = slog.New(recordingHandler{msg: msg, mu: &mu, records: &records})
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersState(n)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Minute)
	for done := false; !done; {
		select {
		case f := <-cc.calls:
			f()
		case <-cc.done:
			done = true
		case <-deadline:
			t.Fatalf("%d of %d SubConns failed within a minute", cc.reports.Load(), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(records) != warnBurst {
		t.Fatalf("%d clusters failing together wrote %d warnings, want %d", n, len(records), warnBurst)
	}
	var note bool
	records[warnBurst-1].Attrs(func(a slog.Attr) bool {
		note = note || a.Key == "note"
		return true
	})
	if !note {
		t.Errorf("the last warning written does not say that more are held back")
	}
}
