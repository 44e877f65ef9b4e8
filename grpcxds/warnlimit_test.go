package grpcxds

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"

	"github.com/goxds/xds/internal/warnlimit"
)

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
// channel writes warnlimit.Burst of them, the last saying that more are held
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
	if len(records) != warnlimit.Burst {
		t.Fatalf("%d clusters failing together wrote %d warnings, want %d", n, len(records), warnlimit.Burst)
	}
	var note bool
	records[warnlimit.Burst-1].Attrs(func(a slog.Attr) bool {
		note = note || a.Key == "note"
		return true
	})
	if !note {
		t.Errorf("the last warning written does not say that more are held back")
	}
}
