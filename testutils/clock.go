package testutils

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// FakeClock is a clock whose time moves only when the test says so. Give it
// to a client (client.Options.Clock) to fire does-not-exist and TTL timers
// exactly when a test wants them to, however slow the machine: a test that
// must show a timer did not fire advances the clock past it and looks,
// instead of sleeping and hoping.
//
// Unlike time.AfterFunc, a due call runs in the goroutine of Advance, which
// returns once every call that became due has returned. A FakeClock is safe
// for concurrent use.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64                  // orders timers due at the same time by creation
	timers map[*fakeTimer]struct{} // pending: neither run nor stopped
	added  chan struct{}           // closed and replaced whenever a timer is added
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, timers: make(map[*fakeTimer]struct{}), added: make(chan struct{})}
}

type fakeTimer struct {
	c   *FakeClock
	at  time.Time
	seq uint64
	f   func()
}

// Stop removes the timer if it is pending, and reports whether it was.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, pending := t.c.timers[t]
	delete(t.c.timers, t)
	return pending
}

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arranges for f to be called by the Advance that moves the clock
// d or more past now. Its result satisfies client.Timer.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers[t] = struct{}{}
	close(c.added)
	c.added = make(chan struct{})
	return t
}

// Advance moves the clock d forward and runs, in order of due time, every
// call that falls due, including calls that those calls arrange within the
// same span. The clock reads each call's due time while it runs, and the
// new time once Advance returns.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		next := c.nextDueLocked(end)
		if next == nil {
			break
		}
		delete(c.timers, next)
		c.now = next.at
		c.mu.Unlock()
		next.f() // never under the lock: f may set or stop timers
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// nextDueLocked returns the earliest pending timer due no later than end.
func (c *FakeClock) nextDueLocked(end time.Time) *fakeTimer {
	due := make([]*fakeTimer, 0, len(c.timers))
	for t := range c.timers {
		if !t.at.After(end) {
			due = append(due, t)
		}
	}
	if len(due) == 0 {
		return nil
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].seq < due[j].seq
	})
	return due[0]
}

// Pending returns the number of timers that have neither run nor been
// stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are pending, or ctx ends. A
// client starts a does-not-exist timer only once the request naming the
// resource is on the stream, a moment a test cannot see from the server:
// waiting for the timer is how it knows that advancing the clock will fire it.
func (c *FakeClock) WaitForTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		pending, added := len(c.timers), c.added
		c.mu.Unlock()
		if pending >= n {
			return nil
		}
		select {
		case <-added:
		case <-ctx.Done():
			return fmt.Errorf("testutils: %d timers pending, waited for %d: %w", pending, n, context.Cause(ctx))
		}
	}
}

// WaitForTimerAt blocks until a timer due at exactly at is pending, or ctx
// ends. A test that changes how long a client's pending timer runs (a new
// report interval, say) waits for the new timer this way: the number of
// pending timers does not change when one replaces another.
func (c *FakeClock) WaitForTimerAt(ctx context.Context, at time.Time) error {
	for {
		c.mu.Lock()
		found := false
		for t := range c.timers {
			if t.at.Equal(at) {
				found = true
				break
			}
		}
		added := c.added
		c.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-added:
		case <-ctx.Done():
			return fmt.Errorf("testutils: no timer due at %v: %w", at, context.Cause(ctx))
		}
	}
}
