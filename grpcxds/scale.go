package grpcxds

import (
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/internal/h2settings"
)

// Connection scaling (gRFC A105), bound to SubConns. grpc-go's public API
// has no subchannel of several connections, where the gRFC puts it, so an
// endpoint allowed several (endpoint.Endpoint.MaxConns, capped by
// Options.MaxConnectionsPerEndpoint) gets an endpoint.Group of SubConns:
// its own (the pool's, reconnected by the pool as any endpoint's) and up
// to MaxConns-1 more to the same addresses. The Group decides which takes
// an RPC, when another is made, which RPCs wait and the endpoint's state
// (dataplane/endpoint/group.go); RPCs wait in grpc-go's picker queue
// (balancer.ErrNoSubConnAvailable), released by a new picker
// (wakePickers) when the Group says. The server's MAX_CONCURRENT_STREAMS,
// which grpc-go's transport keeps to itself, is read off the connection
// (internal/h2settings): the goxds dialer wraps a plaintext one, xdscreds
// a TLS one after its handshake; one neither sees in the clear has no
// known limit, never looks full, and its endpoint keeps one connection.
// With the process's switch on (resources.EnvConnectionScaling) every
// connection is followed, scaled or not (any update may scale an endpoint,
// and a server announces its limit only as the connection starts), at the
// cost of a frame-header scan per read; and a plaintext connection so
// wrapped is no *net.TCPConn to grpc-go, which then sets no
// TCP_USER_TIMEOUT from its keepalive parameters.

// queueAtLimit makes an RPC with no stream free queue in the picker at
// the limit and in backoff too (endpoint.Group.QueueAtLimit), for
// BenchmarkScaledQueueing, which measures the Group's choice. queuedPicks
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

// scConn is a connection of a scaled endpoint: a SubConn, and its gRFC
// A94 meter (the gRFC counts the extra connections in open_connections)
// under the endpoint's labels; nil for the endpoint's own SubConn (its
// subConn's) and when the channel does not measure. Guarded by the
// balancer's mu, but sc, which pickers read once the Group has the
// connection.
type scConn struct {
	sc    balancer.SubConn
	meter *endpoint.ConnMeter
}

// member is a connection of a connGroup.
type member = endpoint.Member[*scConn]

// connGroup is the connections of a scaled endpoint (c's).
type connGroup struct {
	*endpoint.Group[*scConn]
	c *subConn
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
		g = &connGroup{c: c}
		// NewSubConn and Connect under the balancer's lock, as every
		// SubConn is made; not on the RPC's goroutine, which holds no lock
		// of ours.
		g.Group = endpoint.NewGroup(&scConn{sc: c.SubConn}, endpoint.StreamLimit(c.lim), endpointState(c.state),
			func() { go b.Do(g.connectLocked) })
		g.QueueAtLimit = queueAtLimit.Load()
		c.group.Store(g)
	}
	g.SetMax(n)
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

// connectLocked starts the attempt a pick asked for (Group.Attempt): an
// idle connection of the group connects again, or a new SubConn is made.
func (g *connGroup) connectLocked() {
	c, b := g.c, g.c.b
	if c.removed {
		return
	}
	idle, add := g.Attempt()
	switch {
	case idle != nil:
		idle.Conn.sc.Connect()
		return
	case !add:
		b.republish = true // the queued RPCs go to the open connections
		return
	}
	x := &scConn{}
	if tag, _ := c.ep.Tag.(*connTag); tag != nil {
		x.meter = endpoint.NewConnMeter(b.connSink, tag.labels)
	}
	lim := h2settings.NewLimit(c.limitChanged)
	m := endpoint.NewMember(x, endpoint.StreamLimit(lim))
	sc, err := b.cc.NewSubConn(c.addrs(lim), balancer.NewSubConnOptions{StateListener: func(s balancer.SubConnState) { g.onState(m, s) }})
	if err != nil {
		g.Add(nil)
		b.logLocked(slog.LevelWarn, "connection scaling: making another connection", "endpoint", c.ep.Key(), "error", err)
		b.republish = true
		return
	}
	x.sc = sc
	if c.authority {
		if tag, _ := c.ep.Tag.(*connTag); tag != nil {
			b.authorities.Store(sc, tag.authority)
		}
	}
	g.Add(m)
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
	state := endpointState(s.ConnectivityState)
	drop, wake := g.SetState(m, state)
	b.republish = b.republish || wake
	b.connEvents.Add(m.Conn.meter.Observe(state, nil))
	if drop {
		g.shutMember(m)
	}
	b.set.Pool().SetState(g.c.ep, g.c, g.State(endpointState(g.c.state)), s.ConnectionError)
	b.finishAndUnlock()
}

// ownStateLocked records s, the state of the endpoint's own SubConn, and
// returns the endpoint's.
func (g *connGroup) ownStateLocked(s endpoint.State) endpoint.State {
	if _, wake := g.SetState(g.First(), s); wake {
		g.c.b.republish = true
	}
	return g.State(s)
}

// shutMember shuts an extra connection down; the balancer's lock is held.
func (g *connGroup) shutMember(m *member) {
	x := m.Conn
	if x.sc == nil {
		return
	}
	g.c.b.connEvents.Add(x.meter.Shut())
	x.sc.Shutdown()
	if g.c.authority {
		g.c.b.authorities.Delete(x.sc)
	}
}

// shutdown shuts the extra connections down, with the endpoint's own.
func (g *connGroup) shutdown() {
	for _, m := range g.Shutdown() {
		g.shutMember(m)
	}
}

// released is called when an RPC on m ends: a stream is free, for the
// RPCs queued, if any, to be picked again.
func (g *connGroup) released(m *member) {
	if g.Release(m) {
		g.c.b.wakePickers()
	}
}

// limitChanged is the Limit's callback, on the connection's reader: a
// server changed its MAX_CONCURRENT_STREAMS; RPCs queued may fit now.
func (c *subConn) limitChanged() {
	if g := c.group.Load(); g != nil && g.Woken() {
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
