package grpcxds

import (
	"context"
	"time"
)

// WithPickObserver returns ctx with observe, which hears of every pick of
// an RPC made with it: nil when the RPC got an endpoint, the picker's error
// otherwise (balancer.ErrNoSubConnAvailable while it waits).
func WithPickObserver(ctx context.Context, observe func(error)) context.Context {
	pickObservers.Store(true)
	return context.WithValue(ctx, pickObserverKey{}, observe)
}

// SetRetryWait makes the channels b makes from now on wait for a retry's
// backoff with wait instead of a timer.
func SetRetryWait(b *Builder, wait func(ctx context.Context, d time.Duration) error) {
	b.retryWait = wait
}

// ActiveFaults is how many RPCs of the process are in a fault now.
func ActiveFaults() int64 { return processFaults.Active() }
