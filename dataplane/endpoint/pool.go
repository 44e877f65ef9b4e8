package endpoint

import "strings"

// Pool holds the endpoints of a channel (or client), one per key, shared
// by every user that lists the key: a cluster update that keeps an
// endpoint keeps its connection, and a 10k-cluster channel whose clusters
// share backends has one connection per backend.
//
// A Pool has no lock of its own: it is guarded by its owner's lock (the
// grpcxds balancer's mu), which every method but the endpoints' in-flight
// counts needs held. Every change of an endpoint's state must mark its
// users for a new picker in the same critical section that applies it,
// and users (clusters) are the owner's state under that lock; a pool lock
// taken inside it would only add a second lock to every acquire (tens of
// thousands per configuration) and a lock order for transports' state
// callbacks to keep, for no concurrency gained. Pickers never read the
// pool: they keep what they were built with.
type Pool struct {
	dialer Dialer
	// changed is told of each user of an endpoint whose state changed.
	changed func(u User, ep *Endpoint)
	eps     map[string]*Endpoint
	// orphans are the endpoints that lost their last user since the last
	// Prune. Looking at every endpoint instead made each update, state
	// change and failover cost every endpoint (most of their cost at
	// 10,000 clusters).
	orphans map[*Endpoint]struct{}
	// idled are the endpoints whose connections went idle while wanted
	// since the last Reconnect.
	idled []*Endpoint
}

// NewPool returns an empty pool whose connections d makes. changed is
// called, under the owner's lock, for each user of an endpoint whose
// state or error changed (for the owner to build that user's picker
// again; nil: no one is told); it must not call back into the pool.
func NewPool(d Dialer, changed func(u User, ep *Endpoint)) *Pool {
	return &Pool{dialer: d, changed: changed, eps: make(map[string]*Endpoint), orphans: make(map[*Endpoint]struct{})}
}

// Get returns the endpoint of addrs and extra (the rest of the key, opaque
// to the pool: the transport's security and hostname, say), creating it
// (idle, with no connection) if the pool has none; isNew says it did, for
// the caller to set its Tag. addrs must not be changed after.
func (p *Pool) Get(addrs []string, extra string) (ep *Endpoint, isNew bool) {
	key := strings.Join(addrs, ",")
	if extra != "" {
		key += "|" + extra
	}
	if ep := p.eps[key]; ep != nil {
		return ep, false
	}
	ep = &Endpoint{key: key, addrs: addrs}
	p.eps[key] = ep
	return ep, true
}

// Lookup returns the endpoint of key (Endpoint.Key), nil if none.
func (p *Pool) Lookup(key string) *Endpoint { return p.eps[key] }

// Len is the number of endpoints in the pool.
func (p *Pool) Len() int { return len(p.eps) }

// AddUser lists ep as used by u.
func (p *Pool) AddUser(ep *Endpoint, u User) { ep.users.add(u) }

// RemoveUser takes u off ep's users; ep, left with none, is an orphan for
// Prune to drop unless some user takes it again.
func (p *Pool) RemoveUser(ep *Endpoint, u User) {
	ep.users.remove(u)
	p.SetMaxConns(ep, u, 0)
	if ep.users.one == nil {
		p.orphans[ep] = struct{}{}
	}
}

// Want marks ep wanted by one more user, making its connection if it has
// none and connecting it if idle.
func (p *Pool) Want(ep *Endpoint) {
	ep.wanted++
	if ep.conn == nil && !ep.removed {
		c, err := p.dialer.NewConn(ep)
		if err != nil {
			ep.raw, ep.state, ep.err = TransientFailure, TransientFailure, err
			p.tell(ep)
			return
		}
		ep.conn = c
	}
	if ep.conn != nil && ep.raw == Idle {
		ep.conn.Connect()
	}
}

// Unwant undoes Want. The connection stays, connected or not, while the
// endpoint is listed: a user failing back to it finds it warm.
func (p *Pool) Unwant(ep *Endpoint) { ep.wanted-- }

// Release shuts ep's connection down and forgets it, keeping the
// endpoint: a user that wants it again makes a new one. For the endpoints
// of users gone idle.
func (p *Pool) Release(ep *Endpoint) {
	if ep.conn == nil {
		return
	}
	ep.conn.Shutdown()
	ep.conn = nil
	ep.raw, ep.state, ep.err = Idle, Idle, nil
	p.tell(ep)
}

// SetState is the transport's report that conn, ep's connection, is in
// state s, with err its connection error (for TransientFailure). It
// reports false, and ignores the report, if conn is not ep's connection
// any more (released, or the endpoint dropped): a connection let go may
// still report before its shutdown. A connection gone idle while wanted
// is connected again at the next Reconnect.
func (p *Pool) SetState(ep *Endpoint, conn Conn, s State, err error) bool {
	if ep.removed || conn == nil || ep.conn != conn {
		return false
	}
	oldState, oldErr := ep.state, ep.err
	ep.raw = s
	switch s {
	case Ready:
		ep.state, ep.err = Ready, nil
	case TransientFailure:
		ep.state, ep.err = TransientFailure, err
	case Idle:
		if ep.wanted > 0 {
			p.idled = append(p.idled, ep)
		}
		if ep.state != TransientFailure {
			ep.state = Idle
		}
	case Connecting:
		if ep.state != TransientFailure {
			ep.state = Connecting
		}
	}
	if ep.state != oldState || ep.err != oldErr {
		p.tell(ep)
	}
	return true
}

// Reconnect connects again the connections that went idle while wanted
// (SetState) and are wanted still. The owner calls it once the users told
// of the change have chosen again what they want: a user may want no
// more an endpoint it lost (pick_first goes idle, gRFC A62), and a
// connection started before it said so would be one it never asked for.
func (p *Pool) Reconnect() {
	for i, ep := range p.idled {
		if ep.wanted > 0 && ep.conn != nil && !ep.removed && ep.raw == Idle {
			ep.conn.Connect()
		}
		p.idled[i] = nil
	}
	p.idled = p.idled[:0]
}

// tell tells ep's users that its state changed.
func (p *Pool) tell(ep *Endpoint) {
	if p.changed != nil {
		ep.users.each(func(u User) { p.changed(u, ep) })
	}
}

// Prune drops the orphans no user took again since they lost their last
// user: their connections are shut down, and the dialer told.
func (p *Pool) Prune() {
	for ep := range p.orphans {
		if ep.users.one == nil && p.eps[ep.key] == ep {
			p.drop(ep)
			delete(p.eps, ep.key)
		}
	}
	if len(p.orphans) > smallMap {
		// A Go map keeps its size once grown, and ranging over it costs
		// that size: one that once held every endpoint (a configuration
		// dropped whole) would make every later Prune cost as much.
		p.orphans = make(map[*Endpoint]struct{})
	} else {
		clear(p.orphans)
	}
}

// smallMap is the size up to which a map emptied is kept for reuse.
const smallMap = 64

// drop shuts ep's connection down for good.
func (p *Pool) drop(ep *Endpoint) {
	ep.removed = true
	if ep.conn != nil {
		ep.conn.Shutdown()
	}
	p.dialer.Dropped(ep)
}

// ExitIdle connects the wanted endpoints whose connections are idle.
// (They are reconnected at the Reconnect after they go idle anyway.)
func (p *Pool) ExitIdle() {
	for _, ep := range p.eps {
		if ep.wanted > 0 && ep.conn != nil && ep.raw == Idle {
			ep.conn.Connect()
		}
	}
}

// Close drops every endpoint. The pool is empty after, and can be used
// again.
func (p *Pool) Close() {
	for _, ep := range p.eps {
		p.drop(ep)
	}
	p.eps = make(map[string]*Endpoint)
	p.orphans = make(map[*Endpoint]struct{})
	p.idled = nil
}
