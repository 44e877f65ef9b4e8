package client

import "time"

// Clock is the time source of the client's does-not-exist and TTL timers,
// and of the update times in its status dump. Production code leaves
// Options.Clock nil for the real clock; tests pass a fake one
// (testutils.FakeClock) so that a 15 s timer fires when the test moves time
// on, not when a machine under load gets round to it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call made by Clock.AfterFunc. Stop prevents the call
// if it has not started and reports whether it did; a call already under way
// is not waited for (the client's timer callbacks find out for themselves
// that they are stale). It is an alias of an unnamed interface, so that a
// fake clock can implement Clock without importing this package.
type Timer = interface{ Stop() bool }

// realClock is the Clock of the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
