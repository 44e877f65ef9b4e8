package grpcxds

import (
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/internal/h2settings"
	"github.com/goxds/xds/internal/httpconnect"
	"github.com/goxds/xds/internal/upstreamtls"
)

// The balancer's endpoints are an endpoint.Pool (package dataplane/
// endpoint): one endpoint per address list and security, shared by every
// cluster and priority that lists it, so that an EDS update that keeps
// an endpoint keeps its connection. The pool is guarded by xdsBalancer.mu
// (its doc says why it has no lock of its own); the balancer is its
// Dialer, and an endpoint's connection is a SubConn.

// connTag is what the balancer keeps on an endpoint (Endpoint.Tag) besides
// its addresses; nil for an EDS endpoint with the channel's own
// credentials, the usual case.
type connTag struct {
	// sec is the TLS of the connection, nil for the channel's
	// credentials; hostname the EDS endpoint's, sent as SNI when the
	// security says auto_host_sni.
	sec      *upstreamtls.Shared
	hostname string
	// dns is the resolution a LOGICAL_DNS endpoint came from, asked to
	// resolve again when the endpoint fails; nil for EDS endpoints.
	dns *cluster.Resolution
	// authority is what an RPC sent here carries as its :authority when
	// its route says auto_host_rewrite (gRFC A81, authority.go): the EDS
	// endpoint's hostname, a LOGICAL_DNS cluster's host:port; "" for
	// none.
	authority string
	// labels are the labels of the connection's metrics (gRFC A94;
	// subchannelmetrics.go), nil when the channel does not measure them.
	labels *endpoint.ConnLabels
}

// subConn is an endpoint's connection: a SubConn, and what its state
// listener needs to report to the pool.
type subConn struct {
	balancer.SubConn
	b  *xdsBalancer
	ep *endpoint.Endpoint
	// authority: the SubConn is in b.authorities (authority.go).
	authority bool
	// m is what the SubConn's metrics need (subchannelmetrics.go), nil
	// when the channel does not measure them. Guarded by b.mu.
	m *endpoint.ConnMeter
	// Connection scaling (gRFC A105, scale.go): lim is the server's
	// MAX_CONCURRENT_STREAMS as the SubConn's connection announced it, nil
	// when it is not followed; group the endpoint's connections once it
	// is allowed more than one, read by pickers. state is the SubConn's
	// last state, removed set at Shutdown; both guarded by b.mu.
	lim     *h2settings.Limit
	group   atomic.Pointer[connGroup]
	state   connectivity.State
	removed bool
}

// Endpoint implements cluster.Host: the endpoint of the given addresses
// (through their HTTP CONNECT proxy, connect.go) and security, created
// (without a SubConn) if it is new. The hostname is the EDS endpoint's,
// sent as SNI when the security says auto_host_sni.
//
// An endpoint with an authority (the EDS hostname, or the DNS name of a
// LOGICAL_DNS cluster: cluster.EndpointSpec.Authority) is an endpoint of its own, apart
// from the same addresses with another authority or none: an RPC picks
// an endpoint, and learns its authority from the endpoint's SubConn, so
// one connection must not stand for two hostnames. Addresses listed
// under one hostname everywhere, the usual case, are still shared.
func (b *xdsBalancer) Endpoint(pool *endpoint.Pool, spec cluster.EndpointSpec) *endpoint.Endpoint {
	addrs, dns, hostname := spec.Addrs, spec.DNS, spec.Hostname
	if spec.Proxy != "" {
		addrs = proxiedAddrs(spec.Proxy, addrs)
	}
	sec, _ := spec.Security.(*upstreamtls.Shared)
	authority := spec.Authority()
	var extra string
	if sec != nil {
		if !sec.Info.UsesHostname() {
			hostname = ""
		}
		extra = sec.Key + "|" + hostname
	}
	if authority != "" {
		extra = cluster.AuthorityKey(authority, extra)
	}
	ep, isNew := pool.Get(addrs, extra)
	if isNew && (sec != nil || dns != nil || authority != "") {
		ep.Tag = &connTag{sec: sec, hostname: hostname, dns: dns, authority: authority}
		if sec != nil {
			sec.Hold()
		}
	}
	if isNew {
		tag, _ := ep.Tag.(*connTag)
		b.labelConnLocked(ep, tag, spec)
	}
	return ep
}

// NewConn implements endpoint.Dialer: a SubConn to ep's addresses, with
// the HandshakeInfo of its TLS on each.
func (b *xdsBalancer) NewConn(ep *endpoint.Endpoint) (endpoint.Conn, error) {
	tag, _ := ep.Tag.(*connTag)
	if !b.ch.connectDialer {
		for _, a := range ep.Addrs() {
			if _, _, proxied := httpconnect.ParseAddr(a); proxied {
				// Never connect around the proxy: fail the endpoint.
				return nil, errNoConnectDialer(a)
			}
		}
	}
	// The listener is the SubConn's: one released may still report before
	// its shutdown, and the pool ignores it (SetState).
	c := &subConn{b: b, ep: ep, state: connectivity.Idle}
	c.measureLocked(tag)
	addrs := c.addrs(nil)
	b.followLocked(c, tag, addrs)
	sc, err := b.cc.NewSubConn(addrs, balancer.NewSubConnOptions{StateListener: c.onState})
	if err != nil {
		return nil, err
	}
	c.SubConn = sc
	if tag != nil && tag.authority != "" {
		b.authorities.Store(sc, tag.authority)
		c.authority = true
	}
	b.scaleLocked(c)
	return c, nil
}

// addrs are the addresses of a SubConn to c's endpoint, with the
// HandshakeInfo of its TLS, and lim (if not nil) for its connections to
// report their server's MAX_CONCURRENT_STREAMS to.
func (c *subConn) addrs(lim *h2settings.Limit) []resolver.Address {
	tag, _ := c.ep.Tag.(*connTag)
	addrs := make([]resolver.Address, len(c.ep.Addrs()))
	for i, a := range c.ep.Addrs() {
		addrs[i] = resolver.Address{Addr: a}
		if tag != nil && tag.sec != nil {
			addrs[i] = xdscreds.SetHandshakeInfo(addrs[i], tag.sec.Info, tag.hostname)
		}
		if lim != nil {
			addrs[i] = h2settings.WithLimit(addrs[i], lim, c.b.followLayerLocked(tag))
		}
	}
	return addrs
}

// Dropped implements endpoint.Dialer: the endpoint lets go of its TLS.
func (b *xdsBalancer) Dropped(ep *endpoint.Endpoint) {
	if tag, _ := ep.Tag.(*connTag); tag != nil && tag.sec != nil {
		tag.sec.Release()
		tag.sec = nil
	}
}

// onState is the state listener of c's SubConn.
func (c *subConn) onState(s balancer.SubConnState) {
	b := c.b
	b.mu.Lock()
	if b.closed || s.ConnectivityState == connectivity.Shutdown || c.removed {
		b.mu.Unlock()
		return
	}
	c.state = s.ConnectivityState
	state := endpointState(s.ConnectivityState)
	if g := c.group.Load(); g != nil {
		state = g.ownStateLocked(state) // ready while another connection is
	}
	if !b.set.Pool().SetState(c.ep, c, state, s.ConnectionError) {
		b.mu.Unlock()
		return
	}
	c.observeLocked(endpointState(s.ConnectivityState))
	if s.ConnectivityState == connectivity.TransientFailure {
		if tag, _ := c.ep.Tag.(*connTag); tag != nil && tag.dns != nil {
			tag.dns.ResolveNow()
		}
	}
	b.finishAndUnlock()
}

// endpointState is the pool's name for a SubConn's state (not Shutdown).
func endpointState(s connectivity.State) endpoint.State {
	switch s {
	case connectivity.Connecting:
		return endpoint.Connecting
	case connectivity.Ready:
		return endpoint.Ready
	case connectivity.TransientFailure:
		return endpoint.TransientFailure
	}
	return endpoint.Idle
}

// sc is the SubConn of a picked endpoint's connection; nil for none (a
// ready endpoint always has one).
func sc(c endpoint.Conn) balancer.SubConn {
	if s, _ := c.(*subConn); s != nil {
		return s.SubConn
	}
	return nil
}
