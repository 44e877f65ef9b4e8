package extproc

import (
	"fmt"
	"time"
)

// Event is one of the RPC's events whose time in the filter gRFC A93's
// metrics measure: from when the filter sees it to when it lets it
// continue (grpc.client_ext_proc.<event>_duration on a client,
// grpc.server_ext_proc.<event>_duration on a server).
type Event int

// The events measured.
const (
	// ClientHeadersEvent: ClientHeaders, from its call to its return.
	ClientHeadersEvent Event = iota + 1
	// ClientHalfCloseEvent: from ClientHalfClose to NextClientMessage
	// reporting the end of the client's messages. A half-close the
	// processor made before the client's (its end_of_stream) is not
	// measured: the client's comes after the fact.
	ClientHalfCloseEvent
	// ServerHeadersEvent: ServerHeaders, from its call to its return.
	ServerHeadersEvent
	// ServerTrailersEvent: ServerTrailers, from its call to its return;
	// for a Trailers-Only response, ServerHeaders (the headers are the
	// trailers), as grpc-go measures it.
	ServerTrailersEvent
)

// String is the event as the metrics' names spell it ("client_headers").
func (e Event) String() string {
	switch e {
	case ClientHeadersEvent:
		return "client_headers"
	case ClientHalfCloseEvent:
		return "client_half_close"
	case ServerHeadersEvent:
		return "server_headers"
	case ServerTrailersEvent:
		return "server_trailers"
	}
	return fmt.Sprintf("Event(%d)", int(e))
}

// Metrics hears how long each event of an RPC spent in the filter. An
// event is reported when it continues: one that fails the RPC is not.
// The adapter labels the measurements (a client's target and cluster).
// Implementations must be safe for concurrent use and quick: they run on
// the RPC's goroutines, outside the Call's locks.
type Metrics interface {
	EventDuration(e Event, d time.Duration)
}

// WithMetrics returns p with the RPCs' events reported to m (nil: not
// measured).
func (p *Processor) WithMetrics(m Metrics) *Processor {
	q := *p
	q.metrics = m
	return &q
}

// WithNow returns p reading the time from now (tests; time.Now
// otherwise). Only durations are taken from it.
func (p *Processor) WithNow(now func() time.Time) *Processor {
	q := *p
	q.now = now
	return &q
}

// timing is what a Call keeps of its events' times; guarded by its mu.
type timing struct {
	// halfCloseAt is when ClientHalfClose was called; zero before.
	halfCloseAt time.Time
	// halfCloseDone: the end of the client's messages went on.
	halfCloseDone bool
}

func (p *Processor) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// since starts the measure of event e (and, with trailers, of the
// trailers too: a Trailers-Only response's headers); the function it
// returns reports it when err is nil (the event goes on).
func (c *Call) since(e Event, trailers bool) func(err error) {
	m := c.p.metrics
	if m == nil {
		return func(error) {}
	}
	start := c.p.clock()
	return func(err error) {
		if err != nil {
			return
		}
		d := c.p.clock().Sub(start)
		m.EventDuration(e, d)
		if trailers {
			m.EventDuration(ServerTrailersEvent, d)
		}
	}
}

// seeHalfClose marks the client's half-close seen.
func (c *Call) seeHalfClose() {
	if c.p.metrics == nil {
		return
	}
	now := c.p.clock()
	c.mu.Lock()
	if c.halfCloseAt.IsZero() {
		c.halfCloseAt = now
	}
	c.mu.Unlock()
}

// halfCloseGoesOn reports the client's half-close, the data plane having
// taken the end of its messages, if the client's half-close was seen.
func (c *Call) halfCloseGoesOn() {
	m := c.p.metrics
	if m == nil {
		return
	}
	c.mu.Lock()
	at, done := c.halfCloseAt, c.halfCloseDone
	c.halfCloseDone = true
	c.mu.Unlock()
	if !at.IsZero() && !done {
		m.EventDuration(ClientHalfCloseEvent, c.p.clock().Sub(at))
	}
}
