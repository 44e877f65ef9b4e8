// Package serverconn holds the connection plumbing both xDS servers
// (xdsserver for gRPC, httpxds for net/http) use to feed each Listener
// version's server with the connections their accept loop (in
// internal/serverlds, which they share) matched to a filter chain.
package serverconn

import (
	"net"
	"net/netip"
	"sync"
)

// ChanListener is the net.Listener of one Listener version's server: the
// accept loop hands it connections (Deliver), the server accepts them.
type ChanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewChanListener returns a ChanListener whose Addr is addr.
func NewChanListener(addr net.Addr) *ChanListener {
	return &ChanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Deliver hands conn to the server, waiting until it accepts it; false if
// the listener closed first (the caller then closes conn).
func (c *ChanListener) Deliver(conn net.Conn) bool {
	select {
	case c.conns <- conn:
		return true
	case <-c.done:
		return false
	}
}

// Accept implements net.Listener.
func (c *ChanListener) Accept() (net.Conn, error) {
	select {
	case conn := <-c.conns:
		return conn, nil
	case <-c.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener; it may be called more than once.
func (c *ChanListener) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

// Addr implements net.Listener.
func (c *ChanListener) Addr() net.Addr { return c.addr }

// Handoff gives conn to the server of the Listener version in force, as
// current reads it (the zero G: not serving). deliver hands conn to one
// version's server, reporting whether it took it: false when no filter
// chain matched, or when that version's server no longer accepts because
// it was replaced between the look and the handing over. Then the version
// in force by then gets it: closing a fresh connection before its first
// request leaves the client nothing to go on (an HTTP client does not
// retry it; a gRPC one backs off). conn is closed when no version takes
// it.
func Handoff[G comparable](conn net.Conn, current func() G, deliver func(G) bool) {
	var zero, tried G
	for {
		g := current()
		if g == zero || g == tried {
			conn.Close()
			return
		}
		if deliver(g) {
			return
		}
		tried = g
	}
}

// AddrPort is a connection's address as filter chain matching and RBAC
// take it; false when it is not an IP address and port.
func AddrPort(a net.Addr) (netip.AddrPort, bool) {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort(), true
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap, err == nil
}
