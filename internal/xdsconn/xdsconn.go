// Package xdsconn is the contract between the connections an
// xdsserver.GRPCServer accepts and the server credentials of package
// grpcxds/xdscreds. xdsserver may not import grpcxds (nor the reverse), so
// the two meet here, as grpc-go's xDS server and credentials/xds meet on a
// method of the accepted connection.
package xdsconn

import (
	"context"
	"crypto/tls"
)

// FilterChainConn is implemented by every connection an xDS-enabled server
// hands to its grpc.Server. Only xDS server credentials ask for it: other
// transport credentials never see the filter chain's security, which is
// how a server made with plain credentials ignores the Listener's TLS.
type FilterChainConn interface {
	// FilterChainTLS returns the TLS configuration of the filter chain the
	// connection matched, built from its DownstreamTlsContext and the
	// bootstrap's certificate providers. It returns nil and no error for a
	// chain without a transport_socket: the credentials' fallback serves
	// it. An error means the chain asks for TLS it cannot have (a provider
	// that cannot be built, no key material by ctx's end): the connection
	// must be refused, never served in plaintext.
	FilterChainTLS(ctx context.Context) (*tls.Config, error)
}
