package xdsserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/internal/xdsconn"
)

// keyMaterialTimeout bounds how long a handshake waits for a certificate
// provider that has not read its files yet.
const keyMaterialTimeout = 10 * time.Second

// chainConn is an accepted connection and the filter chain it matched,
// for xDS server credentials (package grpcxds/xdscreds) to ask for the
// chain's TLS. Other credentials use it as the plain connection it embeds.
type chainConn struct {
	net.Conn
	tls *servertls.Chain // nil: the chain has no DownstreamTlsContext
	// stopped ends when the connection's generation stops, so that a
	// handshake waiting for a provider does not hold up its grpc.Server's
	// Stop.
	stopped context.Context
}

var _ xdsconn.FilterChainConn = (*chainConn)(nil)

// FilterChainTLS implements xdsconn.FilterChainConn. It reads the
// providers' current key material, so that rotated files are used from
// the next handshake on.
func (cc *chainConn) FilterChainTLS(ctx context.Context) (*tls.Config, error) {
	if cc.tls == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, keyMaterialTimeout)
	defer cancel()
	stop := context.AfterFunc(cc.stopped, cancel)
	defer stop()
	sec, err := cc.tls.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("xdsserver: %w", err)
	}
	c, err := sec.Config(ctx, []string{"h2"})
	if err != nil {
		return nil, fmt.Errorf("xdsserver: %w", err)
	}
	return c, nil
}
