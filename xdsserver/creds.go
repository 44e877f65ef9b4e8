package xdsserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/goxds/xds/internal/serverlds"
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
}

var _ xdsconn.FilterChainConn = (*chainConn)(nil)

// FilterChainTLS implements xdsconn.FilterChainConn: nil for a chain
// without a DownstreamTlsContext. It reads the providers' current key
// material, so that rotated files are used from the next handshake on,
// and gives up when the connection's generation stops, so that a
// handshake waiting for a provider does not hold up its grpc.Server's
// Stop.
func (cc *chainConn) FilterChainTLS(ctx context.Context) (*tls.Config, error) {
	c, err := cc.gen.TLSConfig(ctx, cc.fc, []string{"h2"})
	if err != nil {
		return nil, fmt.Errorf("xdsserver: %w", err)
	}
	return c, nil
}
