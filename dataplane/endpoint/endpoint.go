package endpoint

import (
	"strconv"
	"sync/atomic"
)

// State is the state of an endpoint's connection, as the pool's users see
// it.
type State uint8

const (
	// Idle: no connection, or one not asked to connect.
	Idle State = iota
	// Connecting: the connection is being made, and has not failed since
	// it was last ready.
	Connecting
	// Ready: the connection can carry requests.
	Ready
	// TransientFailure: the connection failed, and has not been ready
	// since. It sticks through the transport's retries (a failing endpoint
	// does not look like one connecting each time it tries again).
	TransientFailure
)

// String returns the name gRPC gives the state.
func (s State) String() string {
	switch s {
	case Idle:
		return "IDLE"
	case Connecting:
		return "CONNECTING"
	case Ready:
		return "READY"
	case TransientFailure:
		return "TRANSIENT_FAILURE"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Conn is the connection a transport makes to an endpoint (grpcxds: a
// SubConn). The pool calls its methods under the owner's lock.
type Conn interface {
	// Connect starts connecting, if the connection is idle.
	Connect()
	// Shutdown closes the connection; requests on it may finish.
	Shutdown()
}

// Dialer is the transport's side of a pool.
type Dialer interface {
	// NewConn makes the connection to ep (ep.Addrs, with what the
	// transport keeps in ep.Tag), not yet connecting. The transport then
	// reports its states with Pool.SetState. An error fails the endpoint
	// (TransientFailure, with the error) until it is wanted again.
	NewConn(ep *Endpoint) (Conn, error)
	// Dropped tells the transport the pool dropped ep, after shutting
	// its connection down: the transport lets go of what it kept for it.
	Dropped(ep *Endpoint)
}

// User is what lists endpoints of a pool: a cluster, whose priorities
// name them. The pool keeps the users of each endpoint, so that one no
// user lists is shut down, and a change of its state reaches those that
// list it (NewPool's changed). A User must be comparable: a pointer to the
// owner's cluster. (An interface with a method for the change would have
// each cluster keep a pointer back to its owner: 32 B a cluster at 10k
// clusters, by Go's size classes.)
type User any

// Endpoint is one endpoint of a pool: an address list, and what else
// sets a connection to it apart (the transport's security for it), with
// its connection, shared by every user that lists the same key.
//
// All its fields but the in-flight count are guarded by the owner's lock
// (see Pool); its methods may be called under it, and the in-flight ones
// from anywhere.
type Endpoint struct {
	key   string
	addrs []string
	// Tag is the transport's: what it needs to connect besides the
	// addresses (grpcxds: the endpoint's TLS, its hostname, the DNS name
	// the addresses came from). Set when Pool.Get reports a new endpoint;
	// the pool never reads it.
	Tag any

	// users are those that list the endpoint; none, and it is an orphan,
	// shut down at the next Prune unless one lists it again.
	users userSet
	// wanted counts the users that want the endpoint connected. The
	// connection is made when first wanted, and reconnected whenever it
	// goes idle while still wanted once its users have looked at that
	// (Pool.Reconnect); unwanted, it stays (warm for a user that
	// fails back to it) as long as the endpoint is listed.
	wanted  int
	conn    Conn
	removed bool
	// raw is the state the connection last reported; state is what users
	// go by (TransientFailure sticks until Ready); err is the last error.
	raw   State
	state State
	err   error
	// inflight counts the requests on the endpoint (least_request's).
	inflight atomic.Int64
	// scale is its users' connection scaling (scale.go), nil for none.
	scale *scaling
}

// Key is the endpoint's key in its pool: the addresses joined by ",",
// then "|" and the key's extra part if there is one. It stays the same
// while the endpoint lives, and ring_hash hashes it.
func (e *Endpoint) Key() string { return e.key }

// Addrs are the endpoint's addresses, in order; not to be changed.
func (e *Endpoint) Addrs() []string { return e.addrs }

// State is the endpoint's state.
func (e *Endpoint) State() State { return e.state }

// Reported is the state the endpoint's connection last reported, where
// State sticks in TransientFailure until it is ready: Idle once a failed
// connection's backoff is over and it is not trying; TransientFailure
// when the dialer could make none; Idle with no connection otherwise.
func (e *Endpoint) Reported() State { return e.raw }

// Err is the endpoint's last connection error; nil once it is ready.
func (e *Endpoint) Err() error { return e.err }

// Conn is the endpoint's connection, nil before it is first wanted and
// after Release or its removal. A picker keeps the one it was built with.
func (e *Endpoint) Conn() Conn { return e.conn }

// Usable reports whether the endpoint may yet become ready without a
// change of configuration: it is not failing.
func (e *Endpoint) Usable() bool { return e.state != TransientFailure }

// Ready reports whether the endpoint can take requests: its connection
// is ready and the pool has not dropped it.
func (e *Endpoint) Ready() bool { return e.state == Ready && e.conn != nil && !e.removed }

// Wanted counts the users that want the endpoint connected.
func (e *Endpoint) Wanted() int { return e.wanted }

// Listed reports whether some user lists the endpoint.
func (e *Endpoint) Listed() bool { return e.users.one != nil }

// InFlight counts the requests a policy started on the endpoint and has
// not seen finish (CallStarted, CallFinished). Safe without the lock.
func (e *Endpoint) InFlight() int64 { return e.inflight.Load() }

// CallStarted counts a request started on the endpoint.
func (e *Endpoint) CallStarted() { e.inflight.Add(1) }

// CallFinished counts a request started on the endpoint as finished.
func (e *Endpoint) CallFinished() { e.inflight.Add(-1) }
