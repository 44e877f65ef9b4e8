package httpxds

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/goxds/xds/internal/upstreamtls"
	"github.com/goxds/xds/resources"
)

// Upstream TLS (gRFC A29's rules, as grpcxds applies them): a cluster's
// UpstreamTlsContext becomes an upstreamtls.HandshakeInfo with the
// bootstrap's certificate providers, shared by every cluster with the same
// security, and each new connection to an endpoint of the cluster makes
// its tls.Config from it (ClientTLSConfig): the SNI, the identity
// certificate, and verification of the server's chain and SANs against
// the root provider's roots and the SAN matchers. Key material is read at
// each handshake, so that rotated files serve new connections. A cluster
// whose providers cannot be built gets no endpoints: its requests fail,
// never sent in plaintext.

// clientTLS is one HandshakeInfo and the leaf settings holding it.
// Guarded by Transport.mu.
type clientTLS struct {
	key  string
	hi   *upstreamtls.HandshakeInfo
	refs int // leafConns holding it
}

// tlsFor returns the clientTLS of sc, built if new.
func (t *Transport) tlsFor(sc *resources.SecurityConfig) (*clientTLS, error) {
	key := upstreamtls.Key(sc)
	if c := t.tls[key]; c != nil {
		return c, nil
	}
	hi, err := upstreamtls.New(t.b, sc)
	if err != nil {
		return nil, err
	}
	c := &clientTLS{key: key, hi: hi}
	t.tls[key] = c
	return c, nil
}

// pruneTLSLocked closes the HandshakeInfos no leaf holds.
func (t *Transport) pruneTLSLocked() {
	for key, c := range t.tls {
		if c.refs <= 0 {
			c.hi.Close()
			delete(t.tls, key)
		}
	}
}

// closeTLSLocked closes every HandshakeInfo, at Close.
func (t *Transport) closeTLSLocked() {
	for _, c := range t.tls {
		c.hi.Close()
	}
	t.tls = nil
}

// handshake secures raw, a connection to an endpoint whose EDS hostname
// is hostname, offering the ALPN protocols of proto.
func (c *clientTLS) handshake(ctx context.Context, raw net.Conn, hostname string, proto upstreamProto) (net.Conn, error) {
	var alpn []string
	switch proto {
	case protoHTTP2:
		alpn = []string{"h2"}
	case protoAuto:
		alpn = []string{"h2", "http/1.1"}
	default:
		alpn = []string{"http/1.1"}
	}
	cfg, err := c.hi.ClientTLSConfig(ctx, hostname, alpn)
	if err != nil {
		raw.Close()
		return nil, err
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", raw.RemoteAddr(), err)
	}
	return conn, nil
}
