package xdscreds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"

	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/internal/xdsconn"
)

// ServerOptions configure NewServerCredentials.
type ServerOptions struct {
	// FallbackCreds secure the connections whose filter chain has no
	// DownstreamTlsContext (no transport_socket), and every connection of
	// a server that is not xDS-enabled. Required: choose
	// insecure.NewCredentials() explicitly if plaintext is what they get.
	FallbackCreds credentials.TransportCredentials
}

// NewServerCredentials returns transport credentials for an xDS-enabled
// server (grpc.Creds passed to xdsserver.NewGRPCServer): each connection
// whose filter chain has a DownstreamTlsContext is served over TLS, or
// mutual TLS, with the certificates of the chain's certificate providers;
// the others use FallbackCreds. A chain whose TLS cannot be honoured (a
// provider that cannot be built, or has no certificate) refuses its
// connections, in plaintext or otherwise.
//
// An xdsserver.GRPCServer made without these credentials ignores the
// Listeners' TLS and serves with its own grpc.Creds (plaintext without
// any), as grpc-go's does.
func NewServerCredentials(opts ServerOptions) (credentials.TransportCredentials, error) {
	if opts.FallbackCreds == nil {
		return nil, errors.New("xdscreds: ServerOptions.FallbackCreds is required")
	}
	return &serverCreds{fallback: opts.FallbackCreds}, nil
}

// serverCreds are the credentials of NewServerCredentials.
type serverCreds struct {
	fallback credentials.TransportCredentials
}

// ServerHandshake asks the connection for its filter chain's TLS; a
// connection that was not accepted by an xDS-enabled server, or whose
// chain has none, is the fallback's.
func (c *serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	fc, ok := raw.(xdsconn.FilterChainConn)
	if !ok {
		return c.fallback.ServerHandshake(raw)
	}
	// The handshake's deadline is the one grpc set on raw (its connection
	// timeout); FilterChainTLS bounds the wait for key material itself.
	cfg, err := fc.FilterChainTLS(context.Background())
	if err != nil {
		return nil, nil, err
	}
	if cfg == nil {
		return c.fallback.ServerHandshake(raw)
	}
	conn := tls.Server(raw, cfg)
	if err := conn.Handshake(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("xdscreds: TLS handshake with %s: %w", raw.RemoteAddr(), err)
	}
	state := conn.ConnectionState()
	info := credentials.TLSInfo{State: state, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	if len(state.PeerCertificates) > 0 {
		info.SPIFFEID = spiffeID(state.PeerCertificates[0].URIs)
	}
	return conn, info, nil
}

// spiffeID is the certificate's SPIFFE ID: its only URI SAN, if that is a
// spiffe:// URI (a certificate with several URI SANs has none, as in
// grpc-go), for RBAC's principal and the handlers' peer.
func spiffeID(uris []*url.URL) *url.URL {
	if len(uris) != 1 || uris[0].Scheme != "spiffe" {
		return nil
	}
	return uris[0]
}

// ClientHandshake fails: these are server credentials.
func (c *serverCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("xdscreds: server credentials cannot dial")
}

// Info reports "xds", as the client credentials do: what each connection
// is depends on its filter chain.
func (c *serverCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "xds"}
}

func (c *serverCreds) Clone() credentials.TransportCredentials {
	return &serverCreds{fallback: c.fallback.Clone()}
}

// OverrideServerName is deprecated in grpc-go; it is passed on to the
// fallback credentials.
func (c *serverCreds) OverrideServerName(name string) error {
	return c.fallback.OverrideServerName(name) //nolint:staticcheck // the interface requires it
}
