package xdsserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/goxds/xds/internal/serverlds"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/internal/xdsconn"
	"github.com/goxds/xds/resources"
)

// chainConn is an accepted connection and the filter chain it matched,
// for xDS server credentials (package grpcxds/xdscreds) to ask for the
// chain's TLS. Other credentials use it as the plain connection it embeds.
type chainConn struct {
	net.Conn
	gen *serverlds.Generation
	fc  *resources.FilterChain
	// served is where its handshake records the certificate it served
	// (gRFC A92's destination principal), by key.
	served *servedCerts
	key    connKey
	leaf   atomic.Pointer[x509.Certificate] // set once, in the handshake
	closed atomic.Bool
}

var _ xdsconn.FilterChainConn = (*chainConn)(nil)

// FilterChainTLS implements xdsconn.FilterChainConn: nil for a chain
// without a DownstreamTlsContext. It reads the providers' current key
// material, so that rotated files are used from the next handshake on,
// and gives up when the connection's generation stops, so that a
// handshake waiting for a provider does not hold up its grpc.Server's
// Stop. The configuration records the certificate the handshake serves:
// grpc-go's peer carries credentials.TLSInfo, which has no place for it,
// and a type of our own there would fail every `.(credentials.TLSInfo)`
// (grpc/authz's principals, users' handlers).
func (cc *chainConn) FilterChainTLS(ctx context.Context) (*tls.Config, error) {
	c, err := cc.gen.TLSConfig(ctx, cc.fc, []string{"h2"})
	if err != nil {
		return nil, fmt.Errorf("xdsserver: %w", err)
	}
	if c != nil && cc.served != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if leaf := servertls.Served(c, hello); leaf != nil {
				cc.record(leaf)
			}
			return nil, nil // c itself
		}
	}
	return c, nil
}

// record keeps leaf as the certificate the connection served, until it
// closes: a Close racing with it (a server stopping mid-handshake) sees
// the leaf, or is seen after it is stored, so no closed connection stays.
func (cc *chainConn) record(leaf *x509.Certificate) {
	if cc.closed.Load() || !cc.leaf.CompareAndSwap(nil, leaf) {
		return
	}
	cc.served.m.Store(cc.key, cc)
	if cc.closed.Load() {
		cc.served.m.CompareAndDelete(cc.key, cc)
	}
}

// Close forgets the certificate served, then closes the connection.
func (cc *chainConn) Close() error {
	cc.closed.Store(true)
	if cc.leaf.Load() != nil {
		cc.served.m.CompareAndDelete(cc.key, cc)
	}
	return cc.Conn.Close()
}

// connKey is a connection's local and remote addresses, by which an RPC
// (whose peer has only them) finds its connection's served certificate.
type connKey struct{ local, remote netip.AddrPort }

// servedCerts are the certificates a generation's TLS connections served,
// by connection: written once per handshake and removed on close, read
// only by RPCs that run an ext_authz filter.
type servedCerts struct {
	m sync.Map // connKey → *chainConn
}

// leaf is the certificate the connection from remote to local served;
// nil when it is not TLS (or not over xDS server credentials).
func (s *servedCerts) leaf(local, remote netip.AddrPort) *x509.Certificate {
	v, ok := s.m.Load(connKey{local, remote})
	if !ok {
		return nil
	}
	return v.(*chainConn).leaf.Load()
}
