package xdsserver

import (
	"crypto/x509"
	"net"
	"net/netip"
	"testing"
)

// A connection's served certificate is found by its addresses until it
// closes, and a handshake that records one after (or while) the
// connection closes leaves nothing behind: the map holds only open
// connections.
func TestServedCertsForgetClosedConnections(t *testing.T) {
	var served servedCerts
	local, remote := netip.MustParseAddrPort("127.0.0.1:443"), netip.MustParseAddrPort("127.0.0.1:5000")
	leaf := &x509.Certificate{}
	newConn := func() *chainConn {
		c, _ := net.Pipe()
		return &chainConn{Conn: c, served: &served, key: connKey{local, remote}}
	}

	cc := newConn()
	if served.leaf(local, remote) != nil {
		t.Fatal("a leaf before any handshake")
	}
	cc.record(leaf)
	if served.leaf(local, remote) != leaf {
		t.Fatal("the recorded leaf is not found by the connection's addresses")
	}
	// A later connection on the same addresses (the old one closing late)
	// is not forgotten by the old one's Close.
	next := newConn()
	next.record(leaf)
	cc.Close()
	if served.leaf(local, remote) != leaf {
		t.Error("an old connection's Close forgot the new one's leaf")
	}
	next.Close()
	if served.leaf(local, remote) != nil {
		t.Error("the leaf outlived its connection")
	}

	late := newConn()
	late.Close()
	late.record(leaf)
	n := 0
	served.m.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Errorf("%d connections kept after a record following Close, want 0", n)
	}
}
