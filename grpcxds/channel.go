package grpcxds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/watchers"
)

// grpc-go's xds resolver acts on each RPC through a config selector, an
// internal API. goxds reaches the same behaviour with public ones: the
// dial options of Builder.DialOptions install a resolver and interceptors
// that share one channelState. The resolver keeps the configuration in
// force there; the interceptors choose each RPC's route and cluster from
// it when the RPC starts, bound it by the route's timeout, run the HTTP
// filters and retry it; the picker reads the choice from the RPC's
// context at every pick.

// channelState is what one channel's resolver, balancer and interceptors
// share.
type channelState struct {
	// Read-only after newChannelState.
	b *Builder
	// wait is how a retry waits for its backoff: it returns nil after d,
	// or the context's error. Tests replace it so as not to sleep.
	wait func(ctx context.Context, d time.Duration) error

	// balancerGen is the generation of the last configuration the goxds
	// balancer took: the resolver reads it after handing the channel a
	// configuration, to learn whether the goxds balancer runs at all.
	balancerGen atomic.Uint64

	mu    sync.Mutex
	built bool           // a resolver was built for it; guarded by mu
	gen   uint64         // generations handed out; guarded by mu
	cfg   *channelConfig // the configuration in force, nil before one; guarded by mu
	ready chan struct{}  // closed when cfg is first set; guarded by mu
}

// channelConfig is one configuration of a channel, immutable.
type channelConfig struct {
	gen uint64
	// snap is the tree in force; nil when err says why there is none.
	snap *watchers.Snapshot
	// err is the status error RPCs fail with when snap is nil.
	err error
	// chain is snap's HTTP filter chain.
	chain *filterChain
	// nodeID is the bootstrap's node ID, for errors.
	nodeID string
}

func newChannelState(b *Builder) *channelState {
	wait := b.retryWait
	if wait == nil {
		wait = sleepCtx
	}
	return &channelState{b: b, wait: wait, ready: make(chan struct{})}
}

// sleepCtx waits d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// set makes cfg the configuration in force, giving it the next
// generation.
func (cs *channelState) set(cfg *channelConfig) uint64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.gen++
	cfg.gen = cs.gen
	first := cs.cfg == nil
	cs.cfg = cfg
	if first {
		close(cs.ready)
	}
	return cfg.gen
}

// reset forgets the configuration when the channel's resolver closes (the
// channel closing, or going idle): RPCs of a channel that leaves idle mode
// wait for its new resolver's first configuration.
func (cs *channelState) reset() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.built = false
	if cs.cfg != nil {
		cs.cfg = nil
		cs.ready = make(chan struct{})
	}
}

// current returns the configuration in force, waiting for the first one.
// An idle channel is woken: its resolver is built only when an RPC reaches
// gRPC, and the RPC waits here first.
func (cs *channelState) current(ctx context.Context, cc *grpc.ClientConn) (*channelConfig, error) {
	cs.mu.Lock()
	cfg, ready := cs.cfg, cs.ready
	cs.mu.Unlock()
	if cfg != nil {
		return cfg, nil
	}
	if cc.GetState() == connectivity.Shutdown {
		return nil, nil // gRPC says so itself
	}
	cc.Connect()
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.cfg, nil
}

// channelBuilder is the resolver.Builder of one channel made with
// Builder.DialOptions: the Builder's resolver, sharing the channel's state
// with its interceptors.
type channelBuilder struct {
	*Builder
	cs *channelState
}

// Build implements resolver.Builder. The dial options of one
// Builder.DialOptions call serve one channel: a second channel made with
// them would share the first one's per-RPC state.
func (cb channelBuilder) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	cb.cs.mu.Lock()
	if cb.cs.built {
		cb.cs.mu.Unlock()
		return nil, fmt.Errorf("grpcxds: the dial options of one Builder.DialOptions call are used by two channels: call DialOptions once per channel")
	}
	cb.cs.built = true
	cb.cs.mu.Unlock()
	r, err := cb.Builder.build(target, cc, opts, cb.cs)
	if err != nil {
		cb.cs.reset()
	}
	return r, err
}

// DialOptions returns the dial options of one channel routed by b: its
// resolver, and the interceptors that apply the xDS configuration to each
// RPC (the route and cluster chosen once when the RPC starts, the route's
// timeout, its retry policy and the listener's HTTP filters). Call it once
// per channel:
//
//	conn, err := grpc.NewClient("goxds:///my-listener", append(b.DialOptions(),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
//
// A channel made with grpc.WithResolvers(b) alone routes by the
// configuration too, but applies none of the per-RPC behaviour; the
// balancer logs a warning when it sees its first RPC.
func (b *Builder) DialOptions() []grpc.DialOption {
	cs := newChannelState(b)
	return []grpc.DialOption{
		grpc.WithResolvers(channelBuilder{b, cs}),
		grpc.WithChainUnaryInterceptor(cs.unary),
		grpc.WithChainStreamInterceptor(cs.stream),
	}
}

// NewClient is grpc.NewClient for a target of b's scheme, with
// b.DialOptions() before opts.
func NewClient(target string, b *Builder, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(target, append(b.DialOptions(), opts...)...)
}

// errNotOurBalancer is what RPCs fail with on a channel that does not run
// the goxds balancer although its resolver is the goxds one.
func errNotOurBalancer(listener string) error {
	return status.Errorf(codes.Unavailable, "goxds: the channel to listener %q does not run the %s balancer the goxds resolver selects, "+
		"so it cannot route by the xDS configuration: was it made with grpc.WithDisableServiceConfig?", listener, BalancerName)
}
