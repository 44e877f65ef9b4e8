// Package serverconn holds the connection plumbing both xDS servers
// (xdsserver for gRPC, httpxds for net/http) use to feed each Listener
// version's server with the connections their accept loop matched to a
// filter chain.
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

// AddrPort is a connection's address as filter chain matching and RBAC
// take it; false when it is not an IP address and port.
func AddrPort(a net.Addr) (netip.AddrPort, bool) {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort(), true
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap, err == nil
}
