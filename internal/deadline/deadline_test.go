package deadline

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// ctx is a context that carries its deadline in a Carrier, as grpcxds's
// selection and httpxds's request context do.
type ctx struct {
	context.Context
	c Carrier
}

func (x *ctx) Deadline() (time.Time, bool)           { return x.c.Deadline(), true }
func (x *ctx) Done() <-chan struct{}                 { return x.c.Done() }
func (x *ctx) Err() error                            { return x.c.Err() }
func (x *ctx) AfterFunc(f func()) (stop func() bool) { return x.c.AfterFunc(f) }

// waitDone waits for done, and fails the test after a while that no
// deadline of these tests comes near.
func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never done", what)
	}
}

// A Carrier's context is done at the deadline with DeadlineExceeded, and
// what the context package derives from it with it.
func TestCarrierExpires(t *testing.T) {
	t.Parallel()
	const timeout = 50 * time.Millisecond
	x := &ctx{Context: context.Background()}
	before := time.Now()
	x.c.Start(timeout)
	defer x.c.End()
	if err := x.Err(); err != nil {
		t.Errorf("Err() before the deadline = %v; want nil", err)
	}
	child, cancel := context.WithCancel(x)
	defer cancel()
	waitDone(t, child.Done(), "derived context")
	if took := time.Since(before); took < timeout {
		t.Errorf("done after %v; want not before %v", took, timeout)
	}
	if !errors.Is(x.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("Err() = %v, derived %v; want %v", x.Err(), child.Err(), context.DeadlineExceeded)
	}
	x.c.End() // after the deadline: no change
	if !errors.Is(x.Err(), context.DeadlineExceeded) {
		t.Errorf("Err() after End past the deadline = %v; want %v", x.Err(), context.DeadlineExceeded)
	}
}

// End before the deadline makes the context Canceled and takes the
// Carrier out of its shard's heap.
func TestCarrierEnd(t *testing.T) {
	t.Parallel()
	x := &ctx{Context: context.Background()}
	x.c.Start(time.Hour)
	child, cancel := context.WithCancel(x)
	defer cancel()
	x.c.End()
	waitDone(t, child.Done(), "derived context")
	if !errors.Is(x.Err(), context.Canceled) {
		t.Errorf("Err() after End = %v; want %v", x.Err(), context.Canceled)
	}
	sh := x.c.shardOf()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, c := range sh.heap {
		if c == &x.c {
			t.Error("the shard still holds the ended Carrier")
		}
	}
	if x.c.heapIdx != -1 {
		t.Errorf("heapIdx = %d after End; want -1", x.c.heapIdx)
	}
}

// The shard's heap gives its Carriers back earliest deadline first,
// whatever order they came and left in.
func TestShardOrder(t *testing.T) {
	t.Parallel()
	var sh shard
	defer func() {
		if sh.timer != nil {
			sh.timer.Stop()
		}
	}()
	base := time.Now().Add(time.Hour)
	var cs []*Carrier
	for range 200 {
		c := &Carrier{dl: base.Add(time.Duration(rand.IntN(1000)) * time.Millisecond)}
		sh.add(c)
		cs = append(cs, c)
	}
	for _, c := range cs[:50] {
		sh.remove(c)
		if c.heapIdx != -1 {
			t.Fatal("a removed Carrier keeps its place")
		}
	}
	if sh.armed.After(base.Add(time.Second)) || sh.armed.Before(base) {
		t.Errorf("armed for %v; want the earliest deadline", sh.armed)
	}
	var last time.Time
	for n := 0; len(sh.heap) > 0; n++ {
		c := sh.heap[0]
		if c.dl.Before(last) {
			t.Fatalf("Carrier %d out of order: %v after %v", n, c.dl, last)
		}
		last = c.dl
		sh.remove(c)
	}
}
