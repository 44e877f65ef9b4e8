package h2settings

import (
	"net"
	"sync/atomic"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"
)

// Conn is a client's connection whose reads a Follower follows.
type Conn struct {
	net.Conn
	f Follower
}

// Read reads from the connection, and follows what it read.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.f.Feed(p[:n])
	}
	return n, err
}

// Limit is the MAX_CONCURRENT_STREAMS of one connection at a time (grpcxds:
// one SubConn's, whose successive connections each report to it as they
// are made), as the server last announced it.
type Limit struct {
	v atomic.Uint32
	// known: some connection was followed and its server announced the
	// setting; until then the limit is unknown, which HTTP/2 reads as
	// unlimited.
	known atomic.Bool
	// followed: a connection was wrapped for it (Wrap).
	followed atomic.Bool
	// onChange, if set, is called (on the connection's reading goroutine)
	// when the value changes.
	onChange func()
}

// NewLimit returns an unknown limit that calls onChange (nil: nothing) when
// its value changes.
func NewLimit(onChange func()) *Limit { return &Limit{onChange: onChange} }

// Get returns the limit, and whether it is known.
func (l *Limit) Get() (uint32, bool) { return l.v.Load(), l.known.Load() }

// Followed reports whether a connection was wrapped for the limit: false
// when the connection was made by a dialer, or secured by credentials,
// that do not know of it.
func (l *Limit) Followed() bool { return l.followed.Load() }

// set records a value the server announced.
func (l *Limit) set(v uint32) {
	old := l.v.Swap(v)
	wasKnown := l.known.Swap(true)
	if (old != v || !wasKnown) && l.onChange != nil {
		l.onChange()
	}
}

// Wrap returns c with its reads followed, the values reported to l. A new
// connection starts from unknown again: HTTP/2 settings are per
// connection.
func (l *Limit) Wrap(c net.Conn) net.Conn {
	l.known.Store(false)
	l.followed.Store(true)
	w := &Conn{Conn: c}
	w.f.OnMaxStreams = l.set
	return w
}

// Layer says which code follows a connection's frames: the one that sees
// them in the clear.
type Layer uint8

const (
	// Dialer: the connection is plaintext HTTP/2; the dialer wraps it.
	Dialer Layer = iota + 1
	// Handshake: goxds's credentials secure it; they wrap the connection
	// their TLS handshake returns.
	Handshake
)

type limitKey struct{}

type limitAttr struct {
	l     *Limit
	layer Layer
}

// Equal lets resolver.Address compare attributes holding one.
func (a limitAttr) Equal(o any) bool {
	b, ok := o.(limitAttr)
	return ok && a == b
}

// WithLimit returns addr with l in its attributes, to be followed at layer.
func WithLimit(addr resolver.Address, l *Limit, layer Layer) resolver.Address {
	addr.Attributes = addr.Attributes.WithValue(limitKey{}, limitAttr{l: l, layer: layer})
	return addr
}

// LimitFrom returns the Limit that attributes a hold for layer, nil if none.
func LimitFrom(a *attributes.Attributes, layer Layer) *Limit {
	if v, ok := a.Value(limitKey{}).(limitAttr); ok && v.layer == layer {
		return v.l
	}
	return nil
}
