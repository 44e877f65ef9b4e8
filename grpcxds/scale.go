package grpcxds

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/internal/h2settings"
)

// Connection scaling (gRFC A105). The gRFC puts it in the subchannel,
// which grpc-go's public API does not open: a SubConn is one connection.
// So an endpoint allowed several connections (endpoint.Endpoint.MaxConns,
// capped by Options.MaxConnectionsPerEndpoint) gets a connGroup: its own
// SubConn (the pool's, reconnected by the pool as any endpoint's) and up
// to MaxConns-1 more SubConns to the same addresses, made one at a time
// as the ones open run out of streams. The picker picks the endpoint as
// ever, then the group's oldest ready SubConn with a stream free. The
// server's MAX_CONCURRENT_STREAMS, which grpc-go's transport keeps to
// itself, is read off the connection (package internal/h2settings): the
// goxds dialer wraps a plaintext connection, xdscreds a TLS one after its
// handshake; a connection neither can see in the clear (TLS of
// credentials goxds does not own, or a dialer of the application's) has
// no known limit, never looks full, and its endpoint keeps one connection.
// With the process's switch on (resources.EnvConnectionScaling) every
// connection is followed, scaled or not: any update may scale an endpoint
// whose connection is open, and a server announces its limit only as the
// connection starts. The cost is a frame-header scan per read; and a
// plaintext connection so wrapped is no *net.TCPConn to grpc-go, which
// then sets no TCP_USER_TIMEOUT from its keepalive parameters.
//
// Where the gRFC queues an RPC in the subchannel, goxds has grpc-go's
// picker queue (balancer.ErrNoSubConnAvailable), which releases every
// queued RPC for a pick again at each new picker: the rationale the
// gRFC gives for not scaling in the LB policy is that this is quadratic
// when every RPC that ends releases them all. So an RPC is queued only
// while a connection attempt is under way, when a new connection is
// moments away; a new picker is published when the connection is ready
// or fails, and when a stream frees up or a server raises its limit
// while RPCs are queued (then only: RPCs queue only during an attempt, so
// the releases are bounded by it). When no connection can be added (the
// endpoint has MaxConns ready, or is in backoff after a failed attempt)
// the RPC goes to the connection with the most streams to spare (the
// fewest short), and waits in grpc-go's transport for a stream, in order,
// as every RPC did before the gRFC.

// queueAtLimit makes an RPC with no stream free queue in the picker at
// the limit and in backoff too, as the gRFC's subchannel queues it: for
// BenchmarkScaledQueueing, which measures the choice above. queuedPicks
// counts the picks queued for want of a stream, for the same benchmark.
var (
	queueAtLimit atomic.Bool
	queuedPicks  atomic.Int64
)

// scaleState is a balancer's part in connection scaling.
type scaleState struct {
	// on: the process turned scaling on (resources.EnvConnectionScaling),
	// so connections are followed for their server's
	// MAX_CONCURRENT_STREAMS. Read-only after Build.
	on bool
	// waking: a publication of the picker for RPCs queued is on its way.
	waking atomic.Bool
	// warnedUnfollowed: the log was told that an endpoint allowed more
	// connections keeps one. Under the balancer's mu.
	warnedUnfollowed bool
}

// member is one connection of a scaled endpoint: a SubConn, its server's
// MAX_CONCURRENT_STREAMS, the RPCs picked for it and not yet done.
type member struct {
	sc       balancer.SubConn
	lim      *h2settings.Limit
	inflight atomic.Int64
	// state is the SubConn's last; guarded by the group's mu.
	state connectivity.State
	// meter measures an extra connection as gRFC A94 measures any (the
	// gRFC has them in open_connections), under the endpoint's labels; nil
	// for the endpoint's own SubConn (its subConn's) and when the channel
	// does not measure. Guarded by the balancer's mu.
	meter *endpoint.ConnMeter
}

// connGroup is the connections of a scaled endpoint (a subConn's).
type connGroup struct {
	c     *subConn
	first *member // c's own SubConn
	// queued: a pick was queued for a connection being made since the
	// last picker was published.
	queued atomic.Bool

	mu  sync.Mutex
	max int // connections allowed, capped
	// members are the SubConns, first first; ready those of them that
	// are ready, oldest first.
	members []*member
	ready   []*member
	// scheduled: a connection attempt was asked of the balancer
	// (connectLocked) and has not yet been started.
	scheduled bool
}

// followLayerLocked is the layer that can follow the frames of a
// connection to an endpoint of tag's (nil: the channel's credentials), 0
// when none can: credentials goxds does not own, or plaintext through a
// dialer not goxds's.
func (b *xdsBalancer) followLayerLocked(tag *connTag) h2settings.Layer {
	if tag != nil && tag.sec != nil {
		return h2settings.Handshake
	}
	if xdscreds.Plaintext(b.bopts.DialCreds) && b.ch.connectDialer {
		return h2settings.Dialer
	}
	return 0
}

// followLocked gives c a Limit its connections report to, when the
// process turned scaling on (resources.EnvConnectionScaling): whether an
// endpoint scales can change with any update, and a server announces
// its limit only as the connection starts.
func (b *xdsBalancer) followLocked(c *subConn, tag *connTag, addrs []resolver.Address) {
	if !b.scale.on {
		return
	}
	layer := b.followLayerLocked(tag)
	if layer == 0 {
		return
	}
	c.lim = h2settings.NewLimit(c.limitChanged)
	for i := range addrs {
		addrs[i] = h2settings.WithLimit(addrs[i], c.lim, layer)
	}
}

// scaleLocked gives c's endpoint as many connections as it is allowed now.
func (b *xdsBalancer) scaleLocked(c *subConn) {
	n := min(int(c.ep.MaxConns()), b.ch.maxConns)
	g := c.group.Load()
	if g == nil {
		if n <= 1 {
			return
		}
		if c.lim == nil {
			b.warnUnfollowedLocked(c)
			return
		}
		g = &connGroup{c: c, first: &member{sc: c.SubConn, lim: c.lim, state: c.state}}
		g.members = []*member{g.first}
		if c.state == connectivity.Ready {
			g.ready = []*member{g.first}
		}
		c.group.Store(g)
	}
	g.mu.Lock()
	g.max = max(n, 1)
	g.mu.Unlock()
	b.republish = true // RPCs queued for a connection now not allowed go on
}

// MaxConnsChanged implements endpoint.Scaler.
func (b *xdsBalancer) MaxConnsChanged(ep *endpoint.Endpoint) {
	if c, _ := ep.Conn().(*subConn); c != nil && c.SubConn != nil {
		b.scaleLocked(c)
	}
}

// warnUnfollowedLocked logs, once per channel, that an endpoint allowed
// more connections keeps one: its server's limit cannot be read.
func (b *xdsBalancer) warnUnfollowedLocked(c *subConn) {
	if b.scale.warnedUnfollowed {
		return
	}
	b.scale.warnedUnfollowed = true
	why := "the channel's transport credentials are neither insecure nor xdscreds' (whose TLS goxds runs)"
	if xdscreds.Plaintext(b.bopts.DialCreds) {
		why = "the channel was made without the goxds dialer (Builder.DialOptions), or its scaling switch was off when the connection was made"
	}
	b.logLocked(slog.LevelWarn, "connection scaling (gRFC A105) is configured but an endpoint keeps one connection: the server's MAX_CONCURRENT_STREAMS cannot be read off its connection: "+why,
		"endpoint", c.ep.Key())
}

// pick chooses the connection for an RPC: the oldest ready one with a
// stream free. With none, it queues the RPC (true) if a connection is
// being made or can be, starting it; otherwise it returns the one with
// the most streams to spare. nil, false: none is ready (the picker's
// view was older than the SubConn's state); the endpoint's own SubConn
// then, for gRPC to pick again.
func (g *connGroup) pick() (*member, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var best *member
	var bestSpare int64
	for _, m := range g.ready {
		n := m.inflight.Load()
		v, known := m.lim.Get()
		if !known || n < int64(v) {
			m.inflight.Add(1)
			return m, false
		}
		if spare := int64(v) - n; best == nil || spare > bestSpare {
			best, bestSpare = m, spare
		}
	}
	if best == nil {
		return nil, false
	}
	if g.attemptLocked() || queueAtLimit.Load() {
		g.queued.Store(true)
		queuedPicks.Add(1)
		return nil, true
	}
	best.inflight.Add(1)
	return best, false
}

// attemptLocked reports whether a connection attempt is under way, having
// asked for one if none is and the endpoint may have another connection
// and is not in backoff.
func (g *connGroup) attemptLocked() bool {
	if g.scheduled {
		return true
	}
	for _, m := range g.members {
		switch m.state {
		case connectivity.Connecting:
			return true
		case connectivity.TransientFailure:
			return false // backoff, as after any failed attempt
		}
	}
	if len(g.ready) >= g.max {
		return false
	}
	g.scheduled = true
	b := g.c.b
	// NewSubConn and Connect under the balancer's lock, as every SubConn
	// is made; not on the RPC's goroutine, which holds no lock of ours.
	go b.Do(g.connectLocked)
	return true
}

// connectLocked starts the attempt pick asked for: an idle connection of
// the group connects again, or a new one is made.
func (g *connGroup) connectLocked() {
	c, b := g.c, g.c.b
	g.mu.Lock()
	g.scheduled = false
	if c.removed {
		g.mu.Unlock()
		return
	}
	var idle *member
	for _, m := range g.members {
		if m.state == connectivity.Idle {
			idle = m
			break
		}
	}
	room := len(g.members) < g.max
	if idle != nil {
		idle.state = connectivity.Connecting // before its listener says so: one attempt at a time
	}
	g.mu.Unlock()
	switch {
	case idle != nil:
		idle.sc.Connect()
		return
	case !room:
		b.republish = true // the queued RPCs go to the open connections
		return
	}
	m := &member{state: connectivity.Connecting}
	m.lim = h2settings.NewLimit(c.limitChanged)
	if tag, _ := c.ep.Tag.(*connTag); tag != nil {
		m.meter = endpoint.NewConnMeter(b.connSink, tag.labels)
	}
	addrs := c.addrs(m.lim)
	sc, err := b.cc.NewSubConn(addrs, balancer.NewSubConnOptions{StateListener: func(s balancer.SubConnState) { g.onState(m, s) }})
	if err != nil {
		b.logLocked(slog.LevelWarn, "connection scaling: making another connection", "endpoint", c.ep.Key(), "error", err)
		b.republish = true
		return
	}
	m.sc = sc
	if c.authority {
		if tag, _ := c.ep.Tag.(*connTag); tag != nil {
			b.authorities.Store(sc, tag.authority)
		}
	}
	g.mu.Lock()
	g.members = append(g.members, m)
	g.mu.Unlock()
	sc.Connect()
}

// onState is the state listener of an extra connection's SubConn.
func (g *connGroup) onState(m *member, s balancer.SubConnState) {
	b := g.c.b
	b.mu.Lock()
	if b.closed || s.ConnectivityState == connectivity.Shutdown || g.c.removed {
		b.mu.Unlock()
		return
	}
	g.setState(m, s.ConnectivityState)
	b.connEvents.Add(m.meter.Observe(endpointState(s.ConnectivityState), nil))
	g.mu.Lock()
	// An extra connection lost when the endpoint has more than it is now
	// allowed goes: scaling closes none, but reconnects none either.
	drop := s.ConnectivityState == connectivity.Idle && len(g.members) > g.max
	if drop {
		g.members = removeMember(g.members, m)
	}
	g.mu.Unlock()
	if drop {
		g.shutMember(m)
	}
	b.set.Pool().SetState(g.c.ep, g.c, endpointState(g.stateOf(g.c.state)), s.ConnectionError)
	b.finishAndUnlock()
}

// setState records m's state; the balancer's lock is held. A connection
// that becomes ready, fails or is lost publishes a new picker when RPCs
// are queued (for them to go to it, or to the open ones).
func (g *connGroup) setState(m *member, s connectivity.State) {
	g.mu.Lock()
	was := m.state
	m.state = s
	if s == connectivity.Ready && was != connectivity.Ready {
		g.ready = append(g.ready, m)
	} else if was == connectivity.Ready && s != connectivity.Ready {
		g.ready = removeMember(g.ready, m)
	}
	g.mu.Unlock()
	if s != was && g.queued.Swap(false) {
		g.c.b.republish = true
	}
}

// stateOf is the endpoint's state, its own SubConn's being own: ready
// while any of its connections is (gRFC A105: READY with one connection
// established), its own SubConn's otherwise, for the pool to reconnect.
func (g *connGroup) stateOf(own connectivity.State) connectivity.State {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ready) > 0 {
		return connectivity.Ready
	}
	return own
}

// shutMember shuts an extra connection down; the balancer's lock is held.
func (g *connGroup) shutMember(m *member) {
	if m.sc == nil {
		return
	}
	g.c.b.connEvents.Add(m.meter.Shut())
	m.sc.Shutdown()
	if g.c.authority {
		g.c.b.authorities.Delete(m.sc)
	}
}

// shutdown shuts the extra connections down, with the endpoint's own.
func (g *connGroup) shutdown() {
	g.mu.Lock()
	extras := g.members[1:]
	g.members, g.ready = g.members[:1], nil
	g.mu.Unlock()
	for _, m := range extras {
		g.shutMember(m)
	}
}

// released is called when an RPC on m ends: a stream is free, for the
// RPCs queued, if any, to be picked again.
func (g *connGroup) released(m *member) {
	m.inflight.Add(-1)
	if g.queued.Load() && g.queued.Swap(false) {
		g.c.b.wakePickers()
	}
}

// limitChanged is the Limit's callback, on the connection's reader: a
// server changed its MAX_CONCURRENT_STREAMS; RPCs queued may fit now.
func (c *subConn) limitChanged() {
	if g := c.group.Load(); g != nil && g.queued.Load() && g.queued.Swap(false) {
		c.b.wakePickers()
	}
}

// wakePickers publishes the picker again, from a goroutine of its own
// (the caller may be an RPC's or a transport's, which must not wait on
// the balancer's lock), once however many ask before it runs: gRPC picks
// again every RPC it queued.
func (b *xdsBalancer) wakePickers() {
	if !b.scale.waking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		b.mu.Lock()
		b.scale.waking.Store(false)
		b.republish = b.republish || !b.closed
		b.finishAndUnlock()
	}()
}

// removeMember returns ms without m, in the same order.
func removeMember(ms []*member, m *member) []*member {
	for i, x := range ms {
		if x == m {
			return append(ms[:i:i], ms[i+1:]...)
		}
	}
	return ms
}
