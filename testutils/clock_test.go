package testutils

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestFakeClockRunsDueCallsInOrder(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewFakeClock(start)
	var got []string
	var at []time.Time
	record := func(name string) func() {
		return func() { got = append(got, name); at = append(at, c.Now()) }
	}
	c.AfterFunc(3*time.Second, record("3s"))
	c.AfterFunc(time.Second, record("1s-a"))
	c.AfterFunc(time.Second, record("1s-b"))
	stopped := c.AfterFunc(2*time.Second, record("stopped"))
	c.AfterFunc(time.Second, func() {
		// A call that sets a timer due within the same Advance runs too.
		c.AfterFunc(500*time.Millisecond, record("chained"))
	})
	c.AfterFunc(10*time.Second, record("later"))

	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if stopped.Stop() {
		t.Fatal("a second Stop reported true")
	}
	c.Advance(999 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("ran %v before anything was due", got)
	}
	c.Advance(3 * time.Second)
	want := []string{"1s-a", "1s-b", "chained", "3s"}
	if !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	wantAt := []time.Time{start.Add(time.Second), start.Add(time.Second), start.Add(1500 * time.Millisecond), start.Add(3 * time.Second)}
	if !slices.EqualFunc(at, wantAt, time.Time.Equal) {
		t.Fatalf("calls saw the clock at %v, want %v", at, wantAt)
	}
	if now := c.Now(); !now.Equal(start.Add(3999 * time.Millisecond)) {
		t.Fatalf("Now() = %v after advancing 3.999s", now)
	}
	if n := c.Pending(); n != 1 {
		t.Fatalf("Pending() = %d, want the one later timer", n)
	}
}

func TestFakeClockWaitForTimers(t *testing.T) {
	c := NewFakeClock(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- c.WaitForTimers(ctx, 2)
	}()
	c.AfterFunc(time.Second, func() {})
	c.AfterFunc(time.Second, func() {})
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.WaitForTimers(ctx, 3); err == nil {
		t.Fatal("WaitForTimers returned nil with 2 timers and a cancelled context")
	}
}
