package grpcxds

import (
	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/endpoint"
)

// SubchannelMetrics records what gRFC A94 measures of a channel's
// connections (its SubConns, one per endpoint of the balancer's pool):
// connection attempts succeeded and failed, disconnections with their
// reason, and the connections open. metrics/otelxds and metrics/promxds
// implement it. grpc-go measures the same of every channel's
// subchannels itself, through a stats handler's metrics recorder (its
// OpenTelemetry plugin), but takes the locality and backend service
// labels from address attributes only its own xDS balancers can set: for
// a goxds channel its measurements carry neither, and these do.
//
// target is the channel's canonical target (grpc.target); backendService
// the leaf cluster (grpc.lb.backend_service, gRFC A89) and locality the
// EDS locality (grpc.lb.locality, as grpc-go spells it:
// {region="…", zone="…", sub_zone="…"}) the endpoint was listed under.
// An endpoint is one connection however many clusters and localities
// list it (the pool shares it), and each event of a connection is
// measured once, never once per cluster: its labels are those of the
// first cluster and locality that listed it, kept for its life, so that
// an open connection and its closing carry the same labels.
//
// A connection attempt is measured when it ends: succeeded when the
// connection becomes ready, failed when it fails; one cut short by the
// balancer shutting the SubConn down is neither (as A94 says). A
// disconnection is a ready connection lost: reason "subchannel shutdown"
// when the balancer shut it down (the endpoint left the configuration,
// its cluster went idle, or the channel closed), "unknown" when the
// connection closed underneath: gRPC tells a balancer no more than that
// the SubConn went idle, so the GOAWAY codes and socket errors A94 lists
// cannot be told apart here. grpc.security_level is not measured: the
// balancer does not see a connection's handshake.
//
// Implementations must be safe for concurrent use and quick: they are
// called with no lock of the channel held, from gRPC's SubConn state
// callbacks and the balancer's updates.
type SubchannelMetrics interface {
	// ConnectionAttemptSucceeded: grpc.subchannel.connection_attempts_succeeded.
	ConnectionAttemptSucceeded(target, backendService, locality string)
	// ConnectionAttemptFailed: grpc.subchannel.connection_attempts_failed.
	ConnectionAttemptFailed(target, backendService, locality string)
	// Disconnection: grpc.subchannel.disconnections, with
	// grpc.disconnect_error reason.
	Disconnection(target, backendService, locality, reason string)
	// OpenConnections adds delta (1 or -1) to
	// grpc.subchannel.open_connections.
	OpenConnections(target, backendService, locality string, delta int)
}

// setConnSinkLocked takes the Builder's SubchannelMetrics from cs, once:
// a channel's Builder does not change. The measuring itself is
// dataplane/endpoint's (ConnMeter); the balancer feeds it its SubConns'
// states, collects what they ended under mu and reports it after.
func (b *xdsBalancer) setConnSinkLocked(cs *channelState) {
	if b.connSink != nil || cs == nil || cs.b.subchannelMetrics == nil {
		return
	}
	b.connSink = endpoint.NewConnSink(cs.b.subchannelMetrics, b.bopts.Target.String())
}

// labelConnLocked gives a new endpoint the labels of its connection's
// metrics, from the spec it was first listed under, if the channel
// measures its connections; tag is the endpoint's connTag, made if nil.
func (b *xdsBalancer) labelConnLocked(ep *endpoint.Endpoint, tag *connTag, spec cluster.EndpointSpec) {
	if b.connSink == nil {
		return
	}
	if tag == nil {
		tag = &connTag{}
		ep.Tag = tag
	}
	tag.labels = endpoint.NewConnLabels(spec.Leaf, spec.Locality)
}

// measureLocked makes c measured if its endpoint has labels.
func (c *subConn) measureLocked(tag *connTag) {
	if tag != nil {
		c.m = endpoint.NewConnMeter(c.b.connSink, tag.labels)
	}
}

// observeLocked judges the state c's SubConn reports against the last.
// gRPC tells a balancer no more of a lost connection than that it went
// idle: its reason is "unknown".
func (c *subConn) observeLocked(s endpoint.State) {
	c.b.connEvents.Add(c.m.Observe(s, nil))
}

// shutLocked notes that the balancer shuts c's SubConn down.
func (c *subConn) shutLocked() { c.b.connEvents.Add(c.m.Shut()) }

// takeConnEventsLocked returns the measurements to report once mu is
// released (ConnEvents.Report).
func (b *xdsBalancer) takeConnEventsLocked() endpoint.ConnEvents {
	evs := b.connEvents
	b.connEvents = nil
	return evs
}
