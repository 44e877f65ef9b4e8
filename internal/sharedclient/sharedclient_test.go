package sharedclient

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTimers are linger timers that fire when the test says.
type fakeTimers struct {
	started chan func()
	stopped atomic.Int32
}

func (f *fakeTimers) afterFunc(d time.Duration, fire func()) Timer {
	f.started <- fire
	return f
}

func (f *fakeTimers) Stop() bool { f.stopped.Add(1); return true }

// next returns the function of the timer started last; it fails the test
// if none was.
func (f *fakeTimers) next(t *testing.T) func() {
	t.Helper()
	select {
	case fire := <-f.started:
		return fire
	default:
		t.Fatal("no linger timer started")
		return nil
	}
}

func (f *fakeTimers) none(t *testing.T) {
	t.Helper()
	select {
	case <-f.started:
		t.Fatal("a linger timer started")
	default:
	}
}

func newLender(t *testing.T, linger time.Duration) (*Lender, *fakeTimers) {
	t.Helper()
	// The client dials at its first watch: nothing listens at port 1,
	// and nothing is watched but to see whether a client is closed.
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: "n"}))
	if err != nil {
		t.Fatal(err)
	}
	l := New(cfg, client.Options{}, linger)
	ft := &fakeTimers{started: make(chan func(), 4)}
	l.SetTimer(ft.afterFunc)
	return l, ft
}

// closed reports whether c is closed, by the first error a new watch
// hears: ErrClosed from a closed client, ErrServerUnavailable from an open
// one, whose server (nothing at 127.0.0.1:1) refuses it.
func closed(t *testing.T, c *client.Client) bool {
	t.Helper()
	errc := make(chan error, 1)
	cancel := client.WatchListener(c, "l", client.WatcherFuncs[*resources.Listener]{OnResourceError: func(err error) {
		select {
		case errc <- err:
		default:
		}
	}})
	defer cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, client.ErrClosed) && !errors.Is(err, client.ErrServerUnavailable) {
			t.Fatalf("watch error %v; want ErrClosed or ErrServerUnavailable", err)
		}
		return errors.Is(err, client.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("a watch heard nothing in 10s, neither that its client is closed nor that its server is unreachable")
		return false
	}
}

// Users share one client; the last release starts the linger, an Acquire
// during it keeps the client (the timer stopped), and the timer firing
// closes it; the next Acquire makes another.
func TestLenderLingers(t *testing.T) {
	l, ft := newLender(t, time.Minute)
	defer l.Close()
	c1, release1, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	c2, release2, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if c1 != c2 {
		t.Fatal("two users got two clients; want one shared")
	}
	release1()
	release1() // twice: counted once
	ft.none(t)
	release2()
	ft.next(t)
	c3, release3, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if c3 != c1 || ft.stopped.Load() != 1 {
		t.Fatalf("an Acquire while lingering got the same client: %v, stopped the timer %d times; want true, 1", c3 == c1, ft.stopped.Load())
	}
	release3()
	fire := ft.next(t)
	fire()
	if !closed(t, c1) {
		t.Fatal("the client is open after its linger")
	}
	c4, release4, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer release4()
	if c4 == c1 || closed(t, c4) {
		t.Fatal("after the linger, Acquire gave the closed client; want a new one")
	}
}

// A timer that fires after its client was taken again closes nothing.
func TestLenderStaleTimer(t *testing.T) {
	l, ft := newLender(t, time.Minute)
	defer l.Close()
	c, release, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	release()
	stale := ft.next(t)
	_, release, err = l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	stale() // Stop came too late to keep it from running
	if closed(t, c) {
		t.Fatal("a timer stopped by Acquire closed the client in use")
	}
}

// Close closes a client no one holds at once, one held at its last
// release without lingering, and Acquire fails from then on.
func TestLenderClose(t *testing.T) {
	t.Run("lingering", func(t *testing.T) {
		l, ft := newLender(t, time.Minute)
		c, release, err := l.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		release()
		ft.next(t)
		l.Close()
		if !closed(t, c) || ft.stopped.Load() != 1 {
			t.Fatalf("Close: client closed %v, timer stopped %d times; want true, 1", closed(t, c), ft.stopped.Load())
		}
		if _, _, err := l.Acquire(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Acquire after Close: %v; want ErrClosed", err)
		}
		l.Close() // again: nothing to do
	})
	t.Run("held", func(t *testing.T) {
		l, ft := newLender(t, time.Minute)
		c, release, err := l.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		if closed(t, c) {
			t.Fatal("Close closed a client in use")
		}
		release()
		ft.none(t)
		if !closed(t, c) {
			t.Fatal("the last release after Close left the client open")
		}
	})
}

// With no linger, the last release closes the client.
func TestLenderNoLinger(t *testing.T) {
	l, ft := newLender(t, -1)
	defer l.Close()
	c, release, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	release()
	ft.none(t)
	if !closed(t, c) {
		t.Fatal("with no linger the last release left the client open")
	}
}
