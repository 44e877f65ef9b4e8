package grpcxds

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitDone waits for ctx to be done, and fails the test after a while
// that no deadline of these tests comes near.
func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never done", what)
	}
}

// A selection that carries the route's deadline is a context that is done
// at it, as context.WithTimeout's is: Deadline says when, Err is nil until
// then and DeadlineExceeded after, and what derives from it (gRPC's own
// context, context.AfterFunc) is cancelled with it.
func TestSelectionDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	before := time.Now()
	sel := &selection{Context: context.WithValue(context.Background(), pickObserverKey{}, "v")}
	sel.startDeadline(timeout)
	defer sel.finish()
	if dl, ok := sel.Deadline(); !ok || dl.Before(before.Add(timeout)) || dl.After(time.Now().Add(timeout)) {
		t.Errorf("Deadline() = %v, %v; want %v from the start", dl, ok, timeout)
	}
	if err := sel.Err(); err != nil {
		t.Errorf("Err() before the deadline = %v; want nil", err)
	}
	child, cancel := context.WithCancel(sel)
	defer cancel()
	ran := make(chan struct{})
	context.AfterFunc(sel, func() { close(ran) })
	waitDone(t, child, "context derived from the selection")
	if took := time.Since(before); took < timeout {
		t.Errorf("done after %v; want not before %v", took, timeout)
	}
	if !errors.Is(sel.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("Err() = %v, derived %v; want %v", sel.Err(), child.Err(), context.DeadlineExceeded)
	}
	waitDone(t, ctxOf(ran), "context.AfterFunc's func")
	if v := child.Value(pickObserverKey{}); v != "v" {
		t.Errorf("the application's value through the derived context = %v; want v", v)
	}
	if selectionOf(child) != sel {
		t.Error("selectionOf(derived context) is not the selection")
	}
}

// ctxOf is a context done when c is closed.
func ctxOf(c <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-c
		cancel()
	}()
	return ctx
}

// An RPC that ends before its deadline ends the selection's deadline as
// context.WithTimeout's cancel does: it is done, Canceled, and the shared
// timer forgets it. A func whose AfterFunc was stopped does not run.
func TestSelectionDeadlineFinish(t *testing.T) {
	t.Parallel()
	sel := &selection{Context: context.Background()}
	sel.startDeadline(time.Hour)
	_, cancelChild := context.WithCancel(sel) // gRPC's own, linked by AfterFunc
	ran := make(chan struct{}, 2)
	stop := sel.AfterFunc(func() { ran <- struct{}{} })
	sel.AfterFunc(func() { ran <- struct{}{} })
	if !stop() {
		t.Error("stop() of a func not run = false; want true")
	}
	if stop() {
		t.Error("second stop() = true; want false")
	}
	cancelChild() // as gRPC cancels its own at the RPC's end
	sel.finish()
	if !errors.Is(sel.Err(), context.Canceled) {
		t.Errorf("Err() after finish = %v; want %v", sel.Err(), context.Canceled)
	}
	waitDone(t, sel, "finished selection")
	if n := len(ran); n != 1 {
		t.Errorf("%d funcs given to AfterFunc ran; want 1, the one not stopped", n)
	}
	if sel.deadline.Carries() && sel.deadline.Done() != sel.Done() {
		t.Error("the selection's Done is not its deadline's")
	}
}

// ownDone is a context not of the context package, with a Done channel of
// its own.
type ownDone struct {
	context.Context
	done chan struct{}
}

func (c ownDone) Done() <-chan struct{} { return c.done }

func (c ownDone) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// A selection without a deadline of its own is its application context's:
// done with it, and a context derived from it is cancelled with it, the
// application's context being the context package's or not.
func TestSelectionWithoutDeadline(t *testing.T) {
	t.Parallel()
	app, cancel := context.WithCancel(context.Background())
	sel := &selection{Context: app}
	if _, ok := sel.Deadline(); ok {
		t.Error("a selection without deadline reports one")
	}
	child, cancelChild := context.WithCancel(sel)
	defer cancelChild()
	own := ownDone{context.Background(), make(chan struct{})}
	ownChild, cancelOwnChild := context.WithCancel(&selection{Context: own})
	defer cancelOwnChild()
	cancel()
	close(own.done)
	waitDone(t, sel, "selection of a cancelled application context")
	waitDone(t, child, "context derived from it")
	waitDone(t, ownChild, "context derived from a selection of a context of its own")
	if !errors.Is(sel.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) || !errors.Is(ownChild.Err(), context.Canceled) {
		t.Errorf("Err() = %v, derived %v and %v; want %v", sel.Err(), child.Err(), ownChild.Err(), context.Canceled)
	}
}
