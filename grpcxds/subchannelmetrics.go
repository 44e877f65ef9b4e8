package grpcxds

import (
	"fmt"

	"google.golang.org/grpc/connectivity"

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

// The disconnection reasons goxds can tell (gRFC A94's
// grpc.disconnect_error values).
const (
	disconnectShutdown = "subchannel shutdown"
	disconnectUnknown  = "unknown"
)

// connSink is where one channel's connection events go: the Builder's
// SubchannelMetrics, and the channel's target. Read-only once made.
type connSink struct {
	m      SubchannelMetrics
	target string
}

// connLabels are a connection's labels, fixed when its endpoint is first
// listed.
type connLabels struct {
	backendService, locality string
}

// connMetrics is what a measured SubConn keeps: where its events go, its
// labels, and the last state it reported, by which the next is judged.
// Guarded by the balancer's mu, but sink and labels, which are read-only.
type connMetrics struct {
	sink   *connSink
	labels *connLabels
	state  connectivity.State
	// shut: the balancer shut the SubConn down; what it reports after is
	// not measured.
	shut bool
}

// connEvent is one measurement to report once mu is released.
type connEvent struct {
	m    *connMetrics
	kind connEventKind
}

type connEventKind uint8

const (
	attemptSucceeded connEventKind = iota
	attemptFailed
	// lostUnderneath: a ready connection closed, not by the balancer.
	lostUnderneath
	// shutWhileReady: the balancer shut a ready connection down.
	shutWhileReady
	// connectedAndLost: the connection was made and lost before it was
	// reported ready (gRPC goes from CONNECTING to IDLE): an attempt
	// that succeeded, and a disconnection, as grpc-go counts it, with no
	// connection left open.
	connectedAndLost
)

// setConnSinkLocked takes the Builder's SubchannelMetrics from cs, once:
// a channel's Builder does not change.
func (b *xdsBalancer) setConnSinkLocked(cs *channelState) {
	if b.connSink != nil || cs == nil || cs.b.subchannelMetrics == nil {
		return
	}
	b.connSink = &connSink{m: cs.b.subchannelMetrics, target: b.bopts.Target.String()}
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
	l := spec.Locality
	tag.labels = &connLabels{backendService: spec.Leaf,
		locality: fmt.Sprintf("{region=%q, zone=%q, sub_zone=%q}", l.Region, l.Zone, l.SubZone)}
}

// measureLocked makes c measured if its endpoint has labels.
func (c *subConn) measureLocked(tag *connTag) {
	if tag != nil && tag.labels != nil && c.b.connSink != nil {
		c.m = &connMetrics{sink: c.b.connSink, labels: tag.labels, state: connectivity.Idle}
	}
}

// observeLocked judges the state c's SubConn reports against the last:
// what ended, if anything.
func (c *subConn) observeLocked(s connectivity.State) {
	m := c.m
	if m == nil || m.shut || s == m.state {
		return
	}
	prev := m.state
	m.state = s
	var kind connEventKind
	switch {
	case prev == connectivity.Connecting && s == connectivity.Ready:
		kind = attemptSucceeded
	case prev == connectivity.Connecting && s == connectivity.TransientFailure:
		kind = attemptFailed
	case prev == connectivity.Connecting && s == connectivity.Idle:
		kind = connectedAndLost
	case prev == connectivity.Ready:
		kind = lostUnderneath
	default:
		return
	}
	c.b.connEvents = append(c.b.connEvents, connEvent{m: m, kind: kind})
}

// shutLocked notes that the balancer shuts c's SubConn down: a ready
// connection is a disconnection, an attempt under way is not measured.
func (c *subConn) shutLocked() {
	m := c.m
	if m == nil || m.shut {
		return
	}
	m.shut = true
	if m.state == connectivity.Ready {
		c.b.connEvents = append(c.b.connEvents, connEvent{m: m, kind: shutWhileReady})
	}
}

// takeConnEventsLocked returns the measurements to report once mu is
// released.
func (b *xdsBalancer) takeConnEventsLocked() []connEvent {
	evs := b.connEvents
	b.connEvents = nil
	return evs
}

// reportConns reports evs, with no lock held.
func reportConns(evs []connEvent) {
	for _, ev := range evs {
		m, l := ev.m.sink, ev.m.labels
		switch ev.kind {
		case attemptSucceeded:
			m.m.ConnectionAttemptSucceeded(m.target, l.backendService, l.locality)
			m.m.OpenConnections(m.target, l.backendService, l.locality, 1)
		case attemptFailed:
			m.m.ConnectionAttemptFailed(m.target, l.backendService, l.locality)
		case lostUnderneath, shutWhileReady:
			reason := disconnectUnknown
			if ev.kind == shutWhileReady {
				reason = disconnectShutdown
			}
			m.m.Disconnection(m.target, l.backendService, l.locality, reason)
			m.m.OpenConnections(m.target, l.backendService, l.locality, -1)
		case connectedAndLost:
			m.m.ConnectionAttemptSucceeded(m.target, l.backendService, l.locality)
			m.m.Disconnection(m.target, l.backendService, l.locality, disconnectUnknown)
		}
	}
}
