package grpcxds

import (
	"context"
	"time"
)

// WithPickObserver returns ctx with observe, which hears of every pick of
// an RPC made with it: nil when the RPC got an endpoint, the picker's error
// otherwise (balancer.ErrNoSubConnAvailable while it waits).
func WithPickObserver(ctx context.Context, observe func(error)) context.Context {
	return context.WithValue(ctx, pickObserverKey{}, observe)
}

// SetRetryWait makes the channels b makes from now on wait for a retry's
// backoff with wait instead of a timer.
func SetRetryWait(b *Builder, wait func(ctx context.Context, d time.Duration) error) {
	b.retryWait = wait
}

// ActiveFaults is how many RPCs of the process are in a fault now.
func ActiveFaults() int64 { return processFaults.active.Load() }

// SetClientLingerTimer makes b start the timer that closes its lingering
// client with start, which returns what stops it.
func SetClientLingerTimer(b *Builder, start func(d time.Duration, f func()) (stop func() bool)) {
	b.afterFunc = func(d time.Duration, f func()) stopper { return stopFunc(start(d, f)) }
}

// stopFunc is a stopper made of a func.
type stopFunc func() bool

func (f stopFunc) Stop() bool { return f() }

// WithConfigWaitObserver returns ctx with observe, called each time a
// wait-for-ready RPC made with it starts waiting in the goxds interceptor
// for a usable configuration.
func WithConfigWaitObserver(ctx context.Context, observe func()) context.Context {
	return context.WithValue(ctx, configWaitObserverKey{}, observe)
}
