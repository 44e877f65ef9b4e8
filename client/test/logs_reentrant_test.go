package test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// reentrantHandler is a slog.Handler that calls back into the client it
// logs for, as a program's handler may (to add the client's state to a
// line, say): each line it handles, it runs the client's Dump. Should the
// handler run under the client's lock, Dump would wait for that lock
// forever; it runs on a goroutine of its own, and a Dump that does not
// return within half the test's timeout is recorded as a failure and left
// to finish once the handler returns, so that the test fails, saying why,
// instead of hanging (or timing out a wait of its own first).
type reentrantHandler struct {
	c atomic.Pointer[client.Client]

	mu      sync.Mutex
	msgs    []string // every line handled, in order
	blocked []string // the lines whose Dump did not return in time
}

func (h *reentrantHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *reentrantHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	c := h.c.Load()
	if c == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		c.Dump()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout / 2):
		h.mu.Lock()
		h.blocked = append(h.blocked, r.Message)
		h.mu.Unlock()
	}
	return nil
}

func (h *reentrantHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *reentrantHandler) WithGroup(string) slog.Handler      { return h }

// handled tells whether a line with msg was handled.
func (h *reentrantHandler) handled(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if m == msg {
			return true
		}
	}
	return false
}

// A log handler that calls back into the client does not deadlock it: the
// client writes its log lines after releasing its lock, including those of
// decisions made under it (a resource deleted by the server but kept, a
// does-not-exist timer and a TTL expiring, a fallback to the next server).
func TestLogHandlerMayCallBackIntoClient(t *testing.T) {
	t.Parallel()
	checkLeaks(t)
	h := &reentrantHandler{}
	clk := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	primary := startFake(t, "")
	fallback := startFake(t, "")
	b, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:       primary.Address(),
		APIType:         sotw.apiType,
		FallbackServers: []testutils.BootstrapServer{{URI: fallback.Address(), APIType: sotw.apiType}},
		NodeID:          nodeID,
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{WatchExpiry: expiry, TransportOptions: fastTransport, Clock: clk, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	h.c.Store(c)

	// The primary server fails before it answers: the client falls back.
	c1, c2, c3 := newRecorder[*resources.Cluster](), newRecorder[*resources.Cluster](), newRecorder[*resources.Cluster]()
	client.WatchCluster(c, "C1", c1)
	client.WatchCluster(c, "C2", c2)
	client.WatchCluster(c, "C3", c3)
	primary.Stop()
	e := &fakeEnv{t: t, fs: fallback, c: c}
	e.reqsNaming(map[string][]string{cdsURL: {"C1", "C2", "C3"}})
	waitFor(t, "the fallback to be logged", func() bool {
		return h.handled("server of xds_servers failed before answering while a resource is awaited: falling back to the next")
	})

	// C1 with a TTL, C3 plain; C2 never comes.
	e.send(testutils.SotWResponse(cdsURL, "1", "n1", cluster("C1", "1", time.Hour), cluster("C3", "1", 0)))
	c1.wantUpdate(t, "C1")
	c3.wantUpdate(t, "C3")
	// C3 deleted from the whole-world response: kept (gRFC A88).
	e.send(testutils.SotWResponse(cdsURL, "2", "n2", cluster("C1", "1", time.Hour)))
	c3.wantError(t, "ambient-error", client.ErrResourceNotFound, "C3")
	// C2's does-not-exist timer, then C1's TTL.
	clk.Advance(expiry)
	c2.wantNotFound(t, "C2")
	clk.Advance(time.Hour)
	waitFor(t, "the TTL's end to be logged", func() bool { return h.handled("resource TTL expired") })

	for _, msg := range []string{"server deleted a resource; keeping it", "resource does not exist: not received in time"} {
		if !h.handled(msg) {
			t.Errorf("no line %q was logged", msg)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, msg := range h.blocked {
		t.Errorf("the client's Dump, called from its log handler, did not return within %v for the line %q: the handler runs under the client's lock",
			timeout/2, msg)
	}
}
