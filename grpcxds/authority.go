package grpcxds

import (
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/metadata"
)

// Authority rewriting (gRFC A81). A route whose auto_host_rewrite a
// trusted server set (resources.Route.AutoHostRewrite) sends each RPC
// with the hostname of the endpoint picked for it as its :authority. The
// endpoint is known only once the pick is made, so the picker says it:
// grpc-go takes an ":authority" in a PickResult's Metadata as the
// authority of that attempt (csAttempt.newStream in grpc-go v1.85), unless
// the application set one with grpc.CallAuthority, which wins, as the gRFC
// wants. Each attempt is picked anew, so a retry sent to another endpoint
// carries that endpoint's hostname. The transport checks the authority
// against the connection's credentials (credentials.AuthorityValidator):
// TLS, xdscreds' among them, checks it against the server's certificate,
// as grpc-go's xDS credentials do.
//
// The picker learns the hostname from the SubConn it picked: each
// endpoint with an authority has one SubConn, in the balancer's
// authorities from its creation to its shutdown. The balancer's Endpoint
// (conns.go) keeps endpoints of one address but different hostnames apart,
// so a SubConn never stands for two hostnames (dataplane/cluster's
// authority rule, shared with httpxds).
// RPCs on routes that do not rewrite never look.

// Shutdown implements endpoint.Conn: the SubConn leaves authorities once
// it is shut down, when gRPC no longer sends on it, so that no RPC picks
// it without its authority in view.
func (c *subConn) Shutdown() {
	c.shutLocked()
	c.removed = true
	if g := c.group.Load(); g != nil {
		g.shutdown() // the extra connections of gRFC A105 (scale.go)
	}
	c.SubConn.Shutdown()
	if c.authority {
		c.b.authorities.Delete(c.SubConn)
	}
}

// rewriteAuthority gives the RPC of res, picked on a route that rewrites
// the authority, the authority of the endpoint picked, if it has one.
// res.Metadata, when set, was made for this pick (grpc-go's RLS policy
// makes its own per pick; goxds's cluster pickers set none), so it may be
// added to.
func (p *routePicker) rewriteAuthority(res *balancer.PickResult) {
	if p.authorities == nil || res.SubConn == nil {
		return
	}
	v, ok := p.authorities.Load(res.SubConn)
	if !ok {
		return
	}
	a := v.(string)
	if res.Metadata == nil {
		// A map and a slice: metadata.Pairs would make more.
		res.Metadata = metadata.MD{":authority": {a}}
		return
	}
	res.Metadata.Set(":authority", a)
}
