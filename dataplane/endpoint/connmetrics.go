package endpoint

import (
	"fmt"

	"github.com/goxds/xds/resources"
)

// ConnMetrics is where the connection metrics of gRFC A94 go: connection
// attempts succeeded and failed, disconnections with their reason, and
// the connections open, each labelled with the client's target, the leaf
// cluster (grpc.lb.backend_service) and the EDS locality
// (grpc.lb.locality) the endpoint was first listed under. The
// transports' own interfaces (grpcxds.SubchannelMetrics,
// httpxds.ConnectionMetrics) have these methods and say what the labels
// are for each; metrics/otelxds and metrics/promxds implement them.
//
// Implementations must be safe for concurrent use and quick; they are
// called with no lock of the client held (ConnEvent.Report).
type ConnMetrics interface {
	ConnectionAttemptSucceeded(target, backendService, locality string)
	ConnectionAttemptFailed(target, backendService, locality string)
	Disconnection(target, backendService, locality, reason string)
	OpenConnections(target, backendService, locality string, delta int)
}

// The disconnection reasons (gRFC A94's grpc.disconnect_error values)
// DisconnectReason gives, and DisconnectShutdown, the reason of a
// connection its client closed.
const (
	DisconnectShutdown = "subchannel shutdown"
	DisconnectReset    = "connection reset"
	DisconnectTimedOut = "connection timed out"
	DisconnectAborted  = "connection aborted"
	DisconnectSocket   = "socket error"
	DisconnectUnknown  = "unknown"
)

// ConnSink is where one client's connection events go: its ConnMetrics
// and its target (the gRPC channel's; "" for an HTTP client). Read-only.
type ConnSink struct {
	m      ConnMetrics
	target string
}

// NewConnSink returns the sink of m for target; nil if m is nil (nothing
// is measured).
func NewConnSink(m ConnMetrics, target string) *ConnSink {
	if m == nil {
		return nil
	}
	return &ConnSink{m: m, target: target}
}

// ConnLabels are the labels of an endpoint's connections, fixed when the
// endpoint is first listed: an endpoint is one connection (or one set of
// them) however many clusters and localities list it, measured once,
// with the labels of the first, so that an open connection and its
// closing carry the same labels. Read-only.
type ConnLabels struct {
	backendService, locality string
}

// NewConnLabels returns the labels of a connection to an endpoint the
// leaf cluster backendService lists in locality l, spelled as grpc-go
// spells grpc.lb.locality: {region="…", zone="…", sub_zone="…"}.
func NewConnLabels(backendService string, l resources.LocalityID) *ConnLabels {
	return &ConnLabels{backendService: backendService,
		locality: fmt.Sprintf("{region=%q, zone=%q, sub_zone=%q}", l.Region, l.Zone, l.SubZone)}
}

// ConnMeter judges the states one connection reports, one after the
// other, and says what each ended (ConnEvent): a connection attempt
// ends when the connection becomes ready (succeeded) or fails (failed);
// one the client cuts short (Shut while connecting) is neither, as gRFC
// A94 says; a ready connection lost is a disconnection, with the reason
// the transport saw, or "subchannel shutdown" when the client closed it
// (Shut).
//
// A ConnMeter is not safe for concurrent use: its owner guards it (the
// grpcxds balancer's lock; an HTTP connection's own). What it returns is
// reported with ConnEvent.Report once that lock is released, since a
// ConnMetrics is the user's code.
type ConnMeter struct {
	sink   *ConnSink
	labels *ConnLabels
	// state is the last state observed, by which the next is judged.
	state State
	// shut: the client closed the connection (or cut its attempt
	// short); what it reports after is not measured.
	shut bool
}

// NewConnMeter returns the meter of a new connection (Idle) whose events
// go to sink with labels; nil if either is nil (the client does not
// measure its connections): a nil meter measures nothing.
func NewConnMeter(sink *ConnSink, labels *ConnLabels) *ConnMeter {
	if sink == nil || labels == nil {
		return nil
	}
	return &ConnMeter{sink: sink, labels: labels}
}

// Observe judges the state s the connection reports against the last:
// what ended, if anything. err is what the transport saw of a ready
// connection lost (DisconnectReason's), nil if it saw nothing.
func (m *ConnMeter) Observe(s State, err error) ConnEvent {
	if m == nil || m.shut || s == m.state {
		return ConnEvent{}
	}
	prev := m.state
	m.state = s
	switch {
	case prev == Connecting && s == Ready:
		return ConnEvent{m: m, kind: attemptSucceeded}
	case prev == Connecting && s == TransientFailure:
		return ConnEvent{m: m, kind: attemptFailed}
	case prev == Connecting && s == Idle:
		return ConnEvent{m: m, kind: connectedAndLost, reason: DisconnectReason(err)}
	case prev == Ready:
		return ConnEvent{m: m, kind: lost, reason: DisconnectReason(err)}
	}
	return ConnEvent{}
}

// Shut notes that the client closes the connection: a ready one is a
// disconnection ("subchannel shutdown"), an attempt under way is not
// measured, and nothing the connection reports after is.
func (m *ConnMeter) Shut() ConnEvent {
	if m == nil || m.shut {
		return ConnEvent{}
	}
	m.shut = true
	if m.state == Ready {
		return ConnEvent{m: m, kind: lost, reason: DisconnectShutdown}
	}
	return ConnEvent{}
}

// ConnEvent is what a connection's state change ended, to report once
// the owner's lock is released; the zero ConnEvent is nothing.
type ConnEvent struct {
	m      *ConnMeter
	kind   connEventKind
	reason string // lost, connectedAndLost: the disconnection's
}

type connEventKind uint8

const (
	attemptSucceeded connEventKind = iota
	attemptFailed
	// lost: a ready connection closed.
	lost
	// connectedAndLost: the connection was made and lost before it was
	// reported ready (gRPC goes from CONNECTING to IDLE): an attempt
	// that succeeded, and a disconnection, as grpc-go counts it, with no
	// connection left open.
	connectedAndLost
)

// Empty reports whether e is nothing to report.
func (e ConnEvent) Empty() bool { return e.m == nil }

// Report hands e to its ConnMetrics. Call it with no lock held.
func (e ConnEvent) Report() {
	if e.m == nil {
		return
	}
	s, l := e.m.sink, e.m.labels
	switch e.kind {
	case attemptSucceeded:
		s.m.ConnectionAttemptSucceeded(s.target, l.backendService, l.locality)
		s.m.OpenConnections(s.target, l.backendService, l.locality, 1)
	case attemptFailed:
		s.m.ConnectionAttemptFailed(s.target, l.backendService, l.locality)
	case lost:
		s.m.Disconnection(s.target, l.backendService, l.locality, e.reason)
		s.m.OpenConnections(s.target, l.backendService, l.locality, -1)
	case connectedAndLost:
		s.m.ConnectionAttemptSucceeded(s.target, l.backendService, l.locality)
		s.m.Disconnection(s.target, l.backendService, l.locality, e.reason)
	}
}

// ConnEvents are the events collected under an owner's lock, reported
// together once it is released.
type ConnEvents []ConnEvent

// Add keeps e, unless it is nothing.
func (evs *ConnEvents) Add(e ConnEvent) {
	if e.m != nil {
		*evs = append(*evs, e)
	}
}

// Report reports every event, in order. Call it with no lock held.
func (evs ConnEvents) Report() {
	for _, e := range evs {
		e.Report()
	}
}
