package endpoint

import (
	"sync"
	"sync/atomic"
)

// Connection scaling (gRFC A105), the transport-neutral half: a Group is
// the connections of one endpoint its users allow several (MaxConns), the
// endpoint's own (the pool's Conn) first, and which of them takes each
// request. The transport (grpcxds: SubConns) makes and connects them,
// reports their states, reads each one's MAX_CONCURRENT_STREAMS
// (StreamLimit) and holds the requests the Group says to queue; the Group
// decides, the same for any transport:
//   - a request goes to the oldest ready connection with a stream free;
//   - with none, it is queued while a connection attempt is under way or
//     can start (one attempt at a time, none while the last one's backoff
//     runs, fewer ready connections than allowed), and the attempt is
//     asked for; otherwise it goes to the connection with the most
//     streams to spare, to wait there for one (in grpc-go's transport, in
//     order), as every request did before the gRFC;
//   - queued requests are released (the transport picks them again) when
//     a connection changes state, a stream is freed or a server raises its
//     limit (Release, Woken), only if some were queued since the last
//     release: requests queue only during an attempt, so the releases are
//     bounded by the attempts, not by the requests that end (the
//     quadratic cost the gRFC's rationale gives for not scaling in an LB
//     policy, whose only queue is released whole at each new picker);
//   - the endpoint is ready while any connection is (gRFC A105: "If there
//     is at least one connection established, report READY."), its own
//     connection's state otherwise, so that the pool reconnects that one as
//     any endpoint's; an extra connection failing never fails the endpoint;
//   - an extra connection lost while the endpoint has more than it is
//     allowed now goes (the gRFC closes none, and reconnects none above
//     the setting).
//
// A Group has a lock of its own: pickers, which hold no lock of the
// owner's, call Pick and Release; every other method needs the owner's
// lock held too (the transport's state reports come under it).

// StreamLimit is a connection's MAX_CONCURRENT_STREAMS as its server last
// announced it, known false until it has (HTTP/2: unlimited). grpcxds
// reads it off the connection (internal/h2settings.Limit).
type StreamLimit interface {
	// Get returns the limit the server last announced, and whether it
	// has announced one.
	Get() (v uint32, known bool)
}

// Member is one connection of a Group: the transport's handle for it, its
// stream limit, its requests in flight and its last state.
type Member[C any] struct {
	// Conn is the transport's connection (grpcxds: a SubConn and its
	// metrics). Set before the Member is added to its Group.
	Conn C
	lim  StreamLimit
	// inflight counts the requests picked for the connection and not yet
	// released.
	inflight atomic.Int64
	// state is the connection's last; guarded by the group's mu.
	state State
}

// NewMember returns a connection, connecting, whose stream limit is lim,
// for Group.Add.
func NewMember[C any](conn C, lim StreamLimit) *Member[C] {
	return &Member[C]{Conn: conn, lim: lim, state: Connecting}
}

// InFlight counts the requests picked for m and not released.
func (m *Member[C]) InFlight() int64 { return m.inflight.Load() }

// Group is the connections of a scaled endpoint. See the comment at the
// top of group.go.
type Group[C any] struct {
	first *Member[C]
	// attempt asks the transport to start a connection attempt (Attempt),
	// later, under its lock; Pick calls it with no lock of the group's.
	attempt func()
	// queued: a pick was queued since the queued picks were last
	// released.
	queued atomic.Bool
	// QueueAtLimit makes a request with no stream free queue when no
	// connection can be added too, as the gRFC's subchannel queues it:
	// for grpcxds's benchmark of that choice. Set before the first Pick.
	QueueAtLimit bool

	mu  sync.Mutex
	max int // connections allowed; at least 1
	// members are the connections, first first; ready those of them that
	// are ready, oldest first.
	members []*Member[C]
	ready   []*Member[C]
	// attempting: Pick asked for an attempt (attempt) that Attempt has not
	// yet started, or Attempt said to add a connection that Add has not
	// yet added: no other attempt starts meanwhile.
	attempting bool
}

// NewGroup returns the group of an endpoint whose own connection is own,
// of limit lim, in state s. attempt is called (from a picker, holding no
// lock) when a connection attempt is to start: the transport then calls
// Attempt, under its lock.
func NewGroup[C any](own C, lim StreamLimit, s State, attempt func()) *Group[C] {
	g := &Group[C]{first: &Member[C]{Conn: own, lim: lim, state: s}, attempt: attempt, max: 1}
	g.members = []*Member[C]{g.first}
	if s == Ready {
		g.ready = []*Member[C]{g.first}
	}
	return g
}

// First is the endpoint's own connection.
func (g *Group[C]) First() *Member[C] { return g.first }

// SetMax sets how many connections the endpoint is allowed (below 1: 1).
// Lowering it closes none.
func (g *Group[C]) SetMax(n int) {
	g.mu.Lock()
	g.max = max(n, 1)
	g.mu.Unlock()
}

// Len is the number of the group's connections, ready or not.
func (g *Group[C]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.members)
}

// Pick chooses the connection for a request, counting it in flight until
// Release: the oldest ready one with a stream free. With none, it queues
// the request (queue true) if an attempt is under way or can start
// (asking for it); otherwise it returns the one with the most streams to
// spare. nil, false: no connection is ready (the picker's view was older
// than the endpoint's state): the transport picks again once it sees so.
func (g *Group[C]) Pick() (m *Member[C], queue bool) {
	g.mu.Lock()
	var best *Member[C]
	var bestSpare int64
	for _, m := range g.ready {
		n := m.inflight.Load()
		v, known := m.lim.Get()
		if !known || n < int64(v) {
			m.inflight.Add(1)
			g.mu.Unlock()
			return m, false
		}
		if spare := int64(v) - n; best == nil || spare > bestSpare {
			best, bestSpare = m, spare
		}
	}
	if best == nil {
		g.mu.Unlock()
		return nil, false
	}
	under, start := g.attemptLocked()
	if under || g.QueueAtLimit {
		g.queued.Store(true)
		g.mu.Unlock()
		if start {
			g.attempt()
		}
		return nil, true
	}
	best.inflight.Add(1)
	g.mu.Unlock()
	return best, false
}

// attemptLocked reports whether a connection attempt is under way, and
// start when it is one to ask for now: none is, the endpoint may have
// another ready connection, and no connection's backoff runs.
func (g *Group[C]) attemptLocked() (under, start bool) {
	if g.attempting {
		return true, false
	}
	for _, m := range g.members {
		switch m.state {
		case Connecting:
			return true, false
		case TransientFailure:
			return false, false // backoff, as after any failed attempt
		}
	}
	if len(g.ready) >= g.max {
		return false, false
	}
	g.attempting = true
	return true, true
}

// Attempt starts the attempt Pick asked for, under the transport's lock:
// idle is a connection of the group to connect again (marked connecting
// now: one attempt at a time); add says there is none and the endpoint
// may have another, for the transport to make it and Add it. Neither: the
// endpoint has all it is allowed, and the queued requests are to go to
// the open ones (the transport releases them).
func (g *Group[C]) Attempt() (idle *Member[C], add bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		if m.state == Idle {
			m.state = Connecting // before the transport reports it
			g.attempting = false
			return m, false
		}
	}
	if len(g.members) < g.max {
		return nil, true // attempting until Add
	}
	g.attempting = false
	return nil, false
}

// Add adds m, a connection Attempt asked for (NewMember), connecting; nil
// when the transport could not make it.
func (g *Group[C]) Add(m *Member[C]) {
	g.mu.Lock()
	g.attempting = false
	if m != nil {
		g.members = append(g.members, m)
	}
	g.mu.Unlock()
}

// SetState records m's state s, under the transport's lock. drop says the
// group let m go: an extra connection lost while the endpoint has more
// than it is allowed, for the transport to shut it down. wake says the
// transport is to pick again the requests it holds: picks were queued,
// and a connection that becomes ready, fails or is lost changes where
// they go; or a ready connection was lost, which a request may have
// picked just before, to find it gone (the gRFC's race of a pick with a
// disconnection: the request waits for a new pick, and the endpoint,
// ready on another connection, may not change state to give it one).
func (g *Group[C]) SetState(m *Member[C], s State) (drop, wake bool) {
	g.mu.Lock()
	if !contains(g.members, m) {
		g.mu.Unlock()
		return false, false // dropped, or shut down with the group
	}
	was := m.state
	m.state = s
	if s == Ready && was != Ready {
		g.ready = append(g.ready, m)
	} else if was == Ready && s != Ready {
		g.ready = remove(g.ready, m)
	}
	if s == Idle && m != g.first && len(g.members) > g.max {
		g.members = remove(g.members, m)
		drop = true
	}
	g.mu.Unlock()
	if s == was {
		return drop, false
	}
	return drop, g.Woken() || was == Ready
}

// State is the endpoint's state, own being its own connection's: ready
// while any connection is, own otherwise.
func (g *Group[C]) State(own State) State {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ready) > 0 {
		return Ready
	}
	return own
}

// Release gives back the stream of a request m was picked for (Pick), and
// reports whether picks were queued, for the transport to release them:
// a stream is free.
func (g *Group[C]) Release(m *Member[C]) (wake bool) {
	m.inflight.Add(-1)
	return g.Woken()
}

// Woken reports whether picks were queued since the queued picks were
// last released, and counts them released: for the transport to release
// them when a server raised its limit, and by Release and SetState. Safe
// without any lock.
func (g *Group[C]) Woken() bool {
	return g.queued.Load() && g.queued.Swap(false)
}

// Shutdown takes the extra connections out of the group, for the
// transport to shut them down with the endpoint's own.
func (g *Group[C]) Shutdown() (extras []*Member[C]) {
	g.mu.Lock()
	extras = g.members[1:]
	g.members, g.ready = g.members[:1:1], nil
	g.mu.Unlock()
	return extras
}

// contains reports whether ms holds m.
func contains[C any](ms []*Member[C], m *Member[C]) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// remove returns ms without m, in the same order, in a new array: the old
// one may still be read through a slice of it (Shutdown's extras).
func remove[C any](ms []*Member[C], m *Member[C]) []*Member[C] {
	for i, x := range ms {
		if x == m {
			return append(ms[:i:i], ms[i+1:]...)
		}
	}
	return ms
}
