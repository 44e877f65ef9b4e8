package grpcxds_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goxds/xds/grpcxds"
)

// lingerTimer is a Builder's linger timer that fires when the test says.
type lingerTimer struct {
	armed   chan func() // the function of each timer started
	stopped atomic.Int32
}

func newLingerTimer(b *grpcxds.Builder) *lingerTimer {
	lt := &lingerTimer{armed: make(chan func(), 4)}
	grpcxds.SetClientLingerTimer(b, func(d time.Duration, f func()) func() bool {
		if d != grpcxds.DefaultClientLinger {
			panic("linger " + d.String())
		}
		lt.armed <- f
		return func() bool { lt.stopped.Add(1); return true }
	})
	return lt
}

// next waits for the next timer the Builder starts.
func (lt *lingerTimer) next(t *testing.T) func() {
	t.Helper()
	select {
	case f := <-lt.armed:
		return f
	case <-time.After(testTimeout):
		t.Fatal("the Builder started no linger timer when its last channel closed")
		return nil
	}
}

// A channel that closes (or goes idle) and a channel that comes after it
// share the Builder's client: the second finds the configuration at once,
// on the stream the first opened, instead of redialling the management
// server and fetching the whole tree again. The client closes once it has
// lingered unused for ClientLinger.
func TestBuilderClientLingersBetweenChannels(t *testing.T) {
	e := newEnv(t)
	lt := newLingerTimer(e.builder)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))

	rpc := func() {
		t.Helper()
		conn := e.dial()
		if _, err := call(e.ctx, conn); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	rpc()
	lt.next(t) // the first channel closed: the client lingers
	rpc()
	if n := e.ms.Counters().Streams; n != 1 {
		t.Fatalf("the management server saw %d ADS streams for two channels one after the other; want 1: the second channel redialled", n)
	}
	if lt.stopped.Load() != 1 {
		t.Errorf("the linger timer was stopped %d times when the second channel took the client; want 1", lt.stopped.Load())
	}
	fire := lt.next(t)
	fire() // lingered long enough: the client closes
	rpc()
	if n := e.ms.Counters().Streams; n != 2 {
		t.Fatalf("after the linger, a new channel left the management server with %d ADS streams; want a second one from a new client", n)
	}
	lt.next(t)
}

// Close closes a lingering client at once, and a Builder closed builds no
// more channels.
func TestBuilderClose(t *testing.T) {
	e := newEnv(t)
	lt := newLingerTimer(e.builder)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	conn := e.dial()
	if _, err := call(e.ctx, conn); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	lt.next(t)
	e.builder.Close()
	if lt.stopped.Load() != 1 {
		t.Errorf("Close stopped the linger timer %d times; want 1", lt.stopped.Load())
	}
	waitFor(t, e.ctx, func() bool { return e.ms.Counters().OpenStreams == 0 }) // the client closed
	_, err := call(e.ctx, e.dial())
	if err == nil || !strings.Contains(err.Error(), "Builder is closed") {
		t.Fatalf("RPC on a channel of a closed Builder: %v; want an error saying the Builder is closed", err)
	}
	e.builder.Close() // again: nothing to do
}
