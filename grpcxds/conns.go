package grpcxds

import (
	"iter"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/grpcxds/xdscreds"
)

// endpointConn is one endpoint of the balancer: an address list (one
// address, or an EDS endpoint's additional addresses, or everything a
// LOGICAL_DNS name resolved to) and the SubConn to it, shared by every
// cluster and priority that lists the same addresses. An EDS update that
// keeps an endpoint keeps its endpointConn, and so its connection.
//
// Fields are guarded by xdsBalancer.mu, but for inflight.
type endpointConn struct {
	b     *xdsBalancer
	key   string // the addresses joined by ",", then the security; the key in xdsBalancer.conns
	addrs []resolver.Address
	// sec is the TLS of the connection (its HandshakeInfo is on addrs),
	// nil for the channel's own credentials.
	sec *secEntry
	// dns is the resolution a LOGICAL_DNS endpoint came from, asked to
	// resolve again when the endpoint fails; nil for EDS endpoints.
	dns *dnsWatch
	// users are the clusters whose priorities list the endpoint; none,
	// and the SubConn is shut down.
	users clusterSet
	// wantedBy counts the clusters that want the endpoint connected: it is
	// in a priority they use or are trying. Created lazily, the SubConn
	// exists once some cluster wanted it; it is reconnected whenever it
	// goes idle while wanted.
	wantedBy int
	sc       balancer.SubConn
	removed  bool
	// raw is the state the SubConn last reported. state is what the
	// balancer goes by: TRANSIENT_FAILURE sticks until READY, so an
	// endpoint that keeps failing does not look like one connecting each
	// time it retries. err is the last connection error.
	raw   connectivity.State
	state connectivity.State
	err   error
	// inflight counts the RPCs on the endpoint, for least_request.
	inflight atomic.Int64
}

// connLocked returns the endpoint of the given addresses and security,
// creating it (without a SubConn) if it is new. hostname is the EDS
// endpoint's, sent as SNI when the security says auto_host_sni.
func (b *xdsBalancer) connLocked(addrs []string, dns *dnsWatch, sec *secEntry, hostname string) *endpointConn {
	key := strings.Join(addrs, ",")
	if sec != nil {
		if !sec.hi.UsesHostname() {
			hostname = ""
		}
		key += "|" + sec.key + "|" + hostname
	}
	if c := b.conns[key]; c != nil {
		return c
	}
	c := &endpointConn{
		b:     b,
		key:   key,
		dns:   dns,
		raw:   connectivity.Idle,
		state: connectivity.Idle,
	}
	c.addrs = make([]resolver.Address, len(addrs))
	for i, a := range addrs {
		c.addrs[i] = resolver.Address{Addr: a}
		if sec != nil {
			c.addrs[i] = xdscreds.SetHandshakeInfo(c.addrs[i], sec.hi, hostname)
		}
	}
	if sec != nil {
		c.sec = sec
		sec.refs++
	}
	b.conns[key] = c
	return c
}

// want marks the endpoint wanted by one more cluster, creating its SubConn
// if needed and connecting it if idle.
func (c *endpointConn) want() {
	c.wantedBy++
	if c.sc == nil && !c.removed && !c.b.connectDialer {
		for _, a := range c.addrs {
			if _, _, proxied := parseConnectAddr(a.Addr); proxied {
				// Never connect around the proxy: fail the endpoint.
				c.state, c.err = connectivity.TransientFailure, errNoConnectDialer(a.Addr)
				c.markUsersDirty()
				return
			}
		}
	}
	if c.sc == nil && !c.removed {
		// The listener is the SubConn's: one released (release) may still
		// report before its shutdown, and must not be taken for the next.
		var sc balancer.SubConn
		var err error
		sc, err = c.b.cc.NewSubConn(c.addrs, balancer.NewSubConnOptions{StateListener: func(s balancer.SubConnState) { c.onState(sc, s) }})
		if err != nil {
			c.state, c.err = connectivity.TransientFailure, err
			c.markUsersDirty()
			return
		}
		c.sc = sc
	}
	if c.sc != nil && c.raw == connectivity.Idle {
		c.sc.Connect()
	}
}

// unwant undoes want. The SubConn stays, connected or not, as long as some
// cluster lists the endpoint: if a higher priority fails again, it is
// still warm.
func (c *endpointConn) unwant() { c.wantedBy-- }

// shutdown closes the SubConn. gRPC lets the RPCs on it finish.
func (c *endpointConn) shutdown() {
	c.removed = true
	if c.sc != nil {
		c.sc.Shutdown()
	}
	if c.sec != nil {
		c.sec.refs--
		c.sec = nil
	}
}

// release shuts the SubConn down and forgets it, keeping the endpoint: a
// cluster that wants it again makes a new one. For endpoints of clusters
// gone idle.
func (c *endpointConn) release() {
	if c.sc == nil {
		return
	}
	c.sc.Shutdown()
	c.sc = nil
	c.raw, c.state, c.err = connectivity.Idle, connectivity.Idle, nil
	c.markUsersDirty()
}

// onState is the state listener of the SubConn sc.
func (c *endpointConn) onState(sc balancer.SubConn, s balancer.SubConnState) {
	b := c.b
	b.mu.Lock()
	if b.closed || c.removed || c.sc != sc || s.ConnectivityState == connectivity.Shutdown {
		b.mu.Unlock()
		return
	}
	oldState, oldErr := c.state, c.err
	c.raw = s.ConnectivityState
	switch c.raw {
	case connectivity.Ready:
		c.state, c.err = connectivity.Ready, nil
	case connectivity.TransientFailure:
		c.state, c.err = connectivity.TransientFailure, s.ConnectionError
		if c.dns != nil && c.dns.r != nil {
			c.dns.r.ResolveNow(resolver.ResolveNowOptions{})
		}
	case connectivity.Idle:
		if c.wantedBy > 0 {
			c.sc.Connect()
		}
		if c.state != connectivity.TransientFailure {
			c.state = connectivity.Idle
		}
	case connectivity.Connecting:
		if c.state != connectivity.TransientFailure {
			c.state = connectivity.Connecting
		}
	}
	if c.state != oldState || c.err != oldErr {
		c.markUsersDirty()
	}
	b.finishAndUnlock()
}

func (c *endpointConn) markUsersDirty() {
	for cl := range c.users.all() {
		c.b.dirty[cl] = struct{}{}
	}
}

// clusterSet is a set of clusters that nearly always holds one: an
// endpoint is usually listed by a single cluster, and a Go map for each of
// tens of thousands of endpoints was a fifth of what the balancer kept
// (~180 B an endpoint). The zero value is empty; when one is nil, more is
// empty.
type clusterSet struct {
	one  *clusterLB
	more map[*clusterLB]struct{}
}

func (s *clusterSet) add(cl *clusterLB) {
	switch {
	case s.one == nil:
		s.one = cl
	case s.one != cl:
		if s.more == nil {
			s.more = make(map[*clusterLB]struct{})
		}
		s.more[cl] = struct{}{}
	}
}

func (s *clusterSet) remove(cl *clusterLB) {
	if s.one != cl {
		delete(s.more, cl)
		return
	}
	s.one = nil
	for other := range s.more {
		s.one = other
		delete(s.more, other)
		return
	}
}

func (s *clusterSet) len() int {
	if s.one == nil {
		return 0
	}
	return 1 + len(s.more)
}

// all yields the clusters of s; s may change while it yields.
func (s *clusterSet) all() iter.Seq[*clusterLB] {
	return func(yield func(*clusterLB) bool) {
		if s.one == nil {
			return
		}
		if len(s.more) == 0 {
			yield(s.one)
			return
		}
		list := append([]*clusterLB{s.one}, slices.Collect(maps.Keys(s.more))...)
		for _, cl := range list {
			if !yield(cl) {
				return
			}
		}
	}
}

// usable reports whether the endpoint may yet become ready without a
// change of configuration: it is not failing.
func (c *endpointConn) usable() bool { return c.state != connectivity.TransientFailure }
