package httpxds

import (
	"context"
	"net"

	"github.com/goxds/xds/internal/upstreamtls"
)

// Upstream TLS (gRFC A29's rules, as grpcxds applies them): a cluster's
// UpstreamTlsContext becomes an upstreamtls.HandshakeInfo with the
// bootstrap's certificate providers, shared by every cluster with the same
// security (upstreamtls.Cache, held by the leaves' connection settings),
// and each new connection to an endpoint of the cluster makes
// its tls.Config from it (ClientTLSConfig): the SNI, the identity
// certificate, and verification of the server's chain and SANs against
// the root provider's roots and the SAN matchers. Key material is read at
// each handshake, so that rotated files serve new connections. A cluster
// whose providers cannot be built gets no endpoints: its requests fail,
// never sent in plaintext.

// handshake secures raw, a connection to an endpoint whose EDS hostname
// is hostname, offering the ALPN protocols of proto.
func handshake(ctx context.Context, hi *upstreamtls.HandshakeInfo, raw net.Conn, hostname string, proto upstreamProto) (net.Conn, error) {
	var alpn []string
	switch proto {
	case protoHTTP2:
		alpn = []string{"h2"}
	case protoAuto:
		alpn = []string{"h2", "http/1.1"}
	default:
		alpn = []string{"http/1.1"}
	}
	conn, err := hi.Handshake(ctx, raw, hostname, alpn)
	if err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}
