package grpcxds

import (
	"context"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/sharedclient"
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

// SetClientLingerTimer makes b start the timer that closes its lingering
// client with start, which returns what stops it.
func SetClientLingerTimer(b *Builder, start func(d time.Duration, f func()) (stop func() bool)) {
	b.lender.SetTimer(func(d time.Duration, f func()) sharedclient.Timer { return stopFunc(start(d, f)) })
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

// rpcConfig is what selectRPC chose for one RPC, for the package's tests.
type rpcConfig struct {
	sel *selection
}

// selectRPC chooses the route and cluster of an RPC to method whose
// outgoing metadata is md, as the interceptors do (selectInto), for the
// package's tests.
func (c *channelConfig) selectRPC(method string, md metadata.MD, channelID uint64) (rpcConfig, error) {
	sel := &selection{Context: context.Background(), md: md, mdRead: true}
	if err := c.selectInto(sel, method, channelID, nil); err != nil {
		return rpcConfig{}, err
	}
	return rpcConfig{sel: sel}, nil
}

// The request headers that control header_delay and header_abort faults
// (gRFC A33), as gRPC metadata keys, for the package's tests.
const (
	faultDelayHeader        = route.FaultDelayHeader
	faultDelayPercentHeader = route.FaultDelayPercentHeader
	faultAbortHTTPHeader    = route.FaultAbortHTTPHeader
	faultAbortGRPCHeader    = route.FaultAbortGRPCHeader
	faultAbortPercentHeader = route.FaultAbortPercentHeader
)

// The balancer's clock, as the tests name it: the data plane's.
type (
	clock     = lbpolicy.Clock
	stopper   = lbpolicy.Timer
	realClock = lbpolicy.RealClock
)

// SetQueueAtLimit makes scaled endpoints queue RPCs in the picker at their
// limit too (scale.go's queueAtLimit); it returns the count of picks
// queued for want of a stream so far.
func SetQueueAtLimit(on bool) int64 {
	queueAtLimit.Store(on)
	return queuedPicks.Load()
}

// QueuedPicks is how many picks scaled endpoints queued for want of a
// stream.
func QueuedPicks() int64 { return queuedPicks.Load() }
