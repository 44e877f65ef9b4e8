package grpcxds

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/route"
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
	// channelID is what the channel_id hash policy hashes; the balancer
	// takes it from the resolver state, so that the interceptors' hashes
	// and the picker's agree.
	channelID uint64
	// connectDialer: the channel was made with Builder.DialOptions, whose
	// dialer tunnels to HTTP CONNECT proxies (connect.go).
	connectDialer bool
	// noInterceptors is what the balancer logs at the first RPC of a
	// channel that has no goxds interceptors (noInterceptorsWarning):
	// set by Builder.Build, "" for a channel of Builder.DialOptions.
	noInterceptors string
	// wait is how a retry waits for its backoff: it returns nil after d,
	// or the context's error. Tests replace it so as not to sleep.
	wait func(ctx context.Context, d time.Duration) error
	// lastRoutes is the routing table of the last configuration RPCs
	// used, which the next configuration keeps if it routes the same
	// virtual host and listener (channelConfig.routes).
	lastRoutes atomic.Pointer[route.Table]

	mu    sync.Mutex
	built bool             // a resolver was built for it; guarded by mu
	owner *grpc.ClientConn // the channel of the first RPC; guarded by mu
	gen   uint64           // generations handed out; guarded by mu
	cfg   *channelConfig   // the configuration in force, nil before one; guarded by mu
	// changed is closed, and replaced, each time cfg is set: RPCs waiting
	// for the first configuration, or wait-for-ready ones for a usable
	// one, look again. Guarded by mu.
	changed chan struct{}
	// foreign is why owner's RPCs fail at once: its target is not of the
	// Builder's scheme, so no resolver of this state will ever configure
	// it (foreignTarget); nil if it is. Guarded by mu.
	foreign error
	// closed is closed when the resolver closes (reset) and replaced: an
	// RPC waiting for the first configuration learns that the resolver it
	// waited for is gone. Guarded by mu.
	closed chan struct{}
}

// channelConfig is one configuration of a channel, immutable.
type channelConfig struct {
	gen uint64
	// src is the resolver's that made it, nil for one set by no resolver
	// (channelBuilder.Build's error): the balancer hands the configuration
	// to the interceptors only if that resolver is still the channel's
	// (channelState.setFrom with src.epoch).
	src *source
	// snap is the tree in force; nil when err says why there is none.
	snap *watchers.Snapshot
	// err is the status error RPCs fail with when snap is nil.
	err error
	// cerr, if set, is err's cause: the tree is unusable for now, so
	// wait-for-ready RPCs wait for the next configuration, as gRPC holds
	// them while its channel is in TRANSIENT_FAILURE; other errors (the
	// channel ignores the service config, the resolver could not start)
	// fail every RPC. The balancer fails its picks with it.
	cerr *ConfigError
	// chain is snap's HTTP filter chain.
	chain *filterChain
	// nodeID is the bootstrap's node ID, for errors.
	nodeID string
	// table routes the RPCs of snap (dataplane/route), made at the
	// first RPC (routes).
	table atomic.Pointer[route.Table]
}

func newChannelState(b *Builder) *channelState {
	wait := b.retryWait
	if wait == nil {
		wait = sleepCtx
	}
	return &channelState{b: b, channelID: rand.Uint64(), wait: wait, closed: make(chan struct{}), changed: make(chan struct{})}
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

// nextGen returns the generation of a new configuration.
func (cs *channelState) nextGen() uint64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.gen++
	return cs.gen
}

// set makes cfg the configuration in force for the channel's new RPCs.
func (cs *channelState) set(cfg *channelConfig) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.setLocked(cfg)
}

func (cs *channelState) setLocked(cfg *channelConfig) {
	cs.cfg = cfg
	close(cs.changed)
	cs.changed = make(chan struct{})
}

// epochNow identifies the resolver being built for the channel: the closed
// channel that its Close (reset) closes and replaces.
func (cs *channelState) epochNow() chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.closed
}

// setFrom is set for the resolver of epoch, and reports whether cfg was
// set. A resolver closed since sets nothing: its tree's callback may still
// be running when Close returns (the tree stops calling, but does not wait
// for a call under way), and a configuration it set after reset would be
// the one in force for the next resolver's RPCs; or, since a closed
// channel's UpdateState reaches no balancer, an error saying the channel
// ignores xDS.
func (cs *channelState) setFrom(epoch chan struct{}, cfg *channelConfig) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed != epoch {
		return false
	}
	cs.setLocked(cfg)
	return true
}

// reset forgets the configuration when the channel's resolver closes (the
// channel closing, or going idle): RPCs of a channel that leaves idle mode
// wait for its new resolver's first configuration.
func (cs *channelState) reset() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.built = false
	close(cs.closed)
	cs.closed = make(chan struct{})
	cs.cfg = nil
}

// current returns the configuration in force, waiting for the first one,
// and with waitForReady for one that is usable (or at least not
// transient: see channelConfig.cerr) until ctx is done.
//
// An idle channel is woken: its resolver is built only when an RPC reaches
// gRPC, and the RPC waits here first. gRPC does not count an RPC waiting
// here as active, so the channel may go idle again before its resolver
// brings a configuration (its idle timeout shorter than the management
// server's answer): the resolver closes and no configuration will come
// from it, so the RPC wakes the channel again rather than wait for its
// deadline.
func (cs *channelState) current(ctx context.Context, cc *grpc.ClientConn, waitForReady bool) (*channelConfig, error) {
	for {
		cs.mu.Lock()
		first := cs.owner == nil
		if first {
			cs.owner = cc
			cs.foreign = cs.b.foreignTarget(cc)
		}
		cfg, closed, changed, owner, foreign := cs.cfg, cs.closed, cs.changed, cs.owner, cs.foreign
		cs.mu.Unlock()
		if owner != cc {
			return nil, status.Error(codes.FailedPrecondition, errSharedDialOptions)
		}
		if foreign != nil {
			if first {
				cs.b.logger.Warn("a channel with the goxds dial options is not resolved by the goxds Builder: its RPCs fail", "err", foreign)
			}
			return nil, foreign
		}
		if cfg != nil && (cfg.snap != nil || cfg.cerr == nil || !waitForReady) {
			return cfg, nil
		}
		if cc.GetState() == connectivity.Shutdown {
			return nil, nil // gRPC says so itself
		}
		if cfg != nil {
			if observe, ok := ctx.Value(configWaitObserverKey{}).(func()); ok {
				observe()
			}
		} else {
			// gRPC closes the old resolver before it builds a new one
			// (entering idle mode waits for it), so a resolver closed
			// after closed was read is seen below, and Connect wakes the
			// channel again.
			cc.Connect()
		}
		select {
		case <-changed:
		case <-closed:
		case <-ctx.Done():
			if cfg != nil {
				// A wait-for-ready RPC whose deadline came first: say what
				// it waited for.
				return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(),
					"%v while waiting for a usable xDS configuration; the last: %s", ctx.Err(), status.Convert(cfg.err).Message())
			}
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		// The configuration, a new one, or the resolver gone: look again.
	}
}

// configWaitObserverKey is the context key of a func() that tests put in
// an RPC's context to hear that the RPC waits for a usable configuration.
type configWaitObserverKey struct{}

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
		return nil, errors.New(errSharedDialOptions)
	}
	cb.cs.built = true
	cb.cs.mu.Unlock()
	r, err := cb.Builder.build(target, cc, opts, cb.cs)
	if err != nil {
		// RPCs waiting for a configuration fail with the reason.
		cb.cs.set(&channelConfig{err: status.Error(codes.Unavailable, err.Error())})
		cb.cs.mu.Lock()
		cb.cs.built = false
		cb.cs.mu.Unlock()
	}
	return r, err
}

// foreignTarget returns the error RPCs of cc fail with if gRPC resolves
// its target with another resolver than b's: a target of another scheme
// ("xds:///name", grpc-go's habit) or of none ("name", which gRPC gives to
// its dns resolver). b's resolver is then never built for the channel, and
// without this its RPCs would wait for a configuration until their
// deadline. It returns nil for a target b serves.
func (b *Builder) foreignTarget(cc *grpc.ClientConn) error {
	u, err := url.Parse(cc.CanonicalTarget())
	if err == nil && u.Scheme == b.scheme {
		return nil
	}
	used := "another resolver"
	if err == nil {
		used = fmt.Sprintf("gRPC's %q resolver", u.Scheme)
	}
	return status.Errorf(codes.FailedPrecondition, "grpcxds: the channel's target %q is resolved by %s, not by the goxds Builder its dial options come from, "+
		"so no xDS configuration will come for its RPCs: that Builder serves targets of scheme %q (%s:///listener-name)", cc.Target(), used, b.scheme, b.scheme)
}

// checkTarget returns an error unless target is of b's scheme.
func (b *Builder) checkTarget(target string) error {
	u, err := url.Parse(target)
	switch {
	case err != nil:
		return fmt.Errorf("grpcxds: target %q: %v; want %s:///listener-name", target, err, b.scheme)
	case u.Scheme == "":
		return fmt.Errorf("grpcxds: target %q has no scheme; the Builder serves %q: want %s:///listener-name", target, b.scheme, b.scheme)
	case u.Scheme != b.scheme:
		hint := ""
		if u.Scheme == "xds" {
			hint = ` (Options.Scheme "xds" makes a Builder serve grpc-go's scheme)`
		}
		return fmt.Errorf("grpcxds: target %q is of scheme %q, but the Builder serves %q%s: want %s:///listener-name", target, u.Scheme, b.scheme, hint, b.scheme)
	}
	return nil
}

const errSharedDialOptions = "grpcxds: the dial options of one Builder.DialOptions call are used by two channels: call DialOptions once per channel"

// DialOptions returns the dial options of one channel routed by b: its
// resolver, and the interceptors that apply the xDS configuration to each
// RPC (the route and cluster chosen once when the RPC starts, the route's
// timeout, its retry policy and the listener's HTTP filters), and a dialer
// that reaches the endpoints of http_11_proxy clusters through their HTTP
// CONNECT proxy (gRFC A86; see ConnectDialer, which a channel with its own
// grpc.WithContextDialer must wrap its dialer in). Call it once per
// channel:
//
//	conn, err := grpc.NewClient("goxds:///my-listener", append(b.DialOptions(),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
//
// The target must be of b's scheme: the RPCs of a channel whose target
// another resolver serves fail at once, saying so (NewClient refuses such
// a target before making the channel). A channel made with
// grpc.WithResolvers(b) alone, or from a target of a scheme Register
// registered with no dial options, routes by the configuration too, but
// applies none of the per-RPC behaviour; the balancer logs a warning,
// naming which of the two the channel did, when it sees its first RPC.
func (b *Builder) DialOptions() []grpc.DialOption {
	cs := newChannelState(b)
	cs.connectDialer = true
	return []grpc.DialOption{
		grpc.WithResolvers(channelBuilder{b, cs}),
		grpc.WithChainUnaryInterceptor(cs.unary),
		grpc.WithChainStreamInterceptor(cs.stream),
		// Tunnels to the endpoints of http_11_proxy clusters (connect.go).
		grpc.WithContextDialer(ConnectDialer(nil)),
	}
}

// NewClient is grpc.NewClient for a target of b's scheme, with
// b.DialOptions() before opts. It refuses a nil b, and a target of another
// scheme or of none ("xds:///name", "name"): gRPC would give it to another
// resolver, and no xDS configuration would ever come for its RPCs.
func NewClient(target string, b *Builder, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if b == nil {
		return nil, errors.New("grpcxds: NewClient: nil Builder (make one with NewBuilder or Register)")
	}
	if err := b.checkTarget(target); err != nil {
		return nil, err
	}
	return grpc.NewClient(target, append(b.DialOptions(), opts...)...)
}

// errNotOurBalancer is what RPCs fail with on a channel that does not run
// the goxds balancer although its resolver is the goxds one.
func errNotOurBalancer(listener string) error {
	return status.Errorf(codes.Unavailable, "goxds: the channel to listener %q does not run the %s balancer the goxds resolver selects, "+
		"so it cannot route by the xDS configuration: was it made with grpc.WithDisableServiceConfig?", listener, BalancerName)
}

// Register makes a Builder for opts and registers it with gRPC
// (resolver.Register) under opts.Scheme: "goxds" by default, or "xds" to
// take over targets written for grpc-go's own xDS resolver. It fails if a
// resolver is already registered for the scheme: for "xds", that is
// grpc-go's, linked in by an import of google.golang.org/grpc/xds, and the
// two cannot share it. Like resolver.Register, call it at initialization
// time only.
//
// A channel made from a target alone ("goxds:///my-listener") then routes
// by xDS, but the per-RPC parts of the configuration (timeouts, retries,
// HTTP filters) need the interceptors: make channels with
// b.DialOptions() or NewClient.
func Register(opts Options) (*Builder, error) {
	b, err := NewBuilder(opts)
	if err != nil {
		return nil, err
	}
	if prev := resolver.Get(b.scheme); prev != nil {
		if _, ours := prev.(*Builder); ours {
			return nil, fmt.Errorf("grpcxds: scheme %q is already registered by another goxds Builder", b.scheme)
		}
		if b.scheme == "xds" {
			return nil, errors.New(`grpcxds: scheme "xds" is taken by grpc-go's own xDS resolver (google.golang.org/grpc/xds is imported): use another scheme`)
		}
		return nil, fmt.Errorf("grpcxds: a resolver is already registered for scheme %q", b.scheme)
	}
	resolver.Register(b)
	return b, nil
}
