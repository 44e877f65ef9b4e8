package xdscreds

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/internal/h2settings"
)

// ClientOptions configure NewClientCredentials.
type ClientOptions struct {
	// FallbackCreds secure connections to the endpoints of clusters that
	// have no security config (no transport_socket). Required: choose
	// insecure.NewCredentials() explicitly if plaintext is what they get.
	FallbackCreds credentials.TransportCredentials
}

// NewClientCredentials returns transport credentials for channels of the
// goxds resolver (dial option grpc.WithTransportCredentials): the
// connections to a cluster with an UpstreamTlsContext use TLS, or mutual
// TLS, with the certificates of its certificate providers, and check the
// server's certificate against its roots and SAN matchers; the others use
// FallbackCreds. A cluster whose security config cannot be honoured never
// gets a connection, in plaintext or otherwise.
func NewClientCredentials(opts ClientOptions) (credentials.TransportCredentials, error) {
	if opts.FallbackCreds == nil {
		return nil, errors.New("xdscreds: ClientOptions.FallbackCreds is required")
	}
	return &clientCreds{fallback: opts.FallbackCreds}, nil
}

// UsesXDS reports whether c came from NewClientCredentials: the balancer
// honours clusters' security configs only then, and otherwise lets the
// channel's own credentials decide, as grpc-go does.
func UsesXDS(c credentials.TransportCredentials) bool {
	_, ok := c.(*clientCreds)
	return ok
}

// clientCreds are the credentials of NewClientCredentials.
type clientCreds struct {
	fallback credentials.TransportCredentials
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	ai, ok := handshakeInfoFrom(credentials.ClientHandshakeInfoFromContext(ctx).Attributes)
	if !ok {
		return c.fallback.ClientHandshake(ctx, authority, raw)
	}
	conn, err := ai.hi.Handshake(ctx, raw, ai.hostname, []string{"h2"})
	if err != nil {
		return nil, nil, fmt.Errorf("xdscreds: %w", err)
	}
	info := credentials.TLSInfo{
		State:          conn.ConnectionState(),
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}
	if l := h2settings.LimitFrom(credentials.ClientHandshakeInfoFromContext(ctx).Attributes, h2settings.Handshake); l != nil {
		// gRFC A105: the server's MAX_CONCURRENT_STREAMS, which only this
		// side of the TLS sees, for the balancer's connection scaling.
		return l.Wrap(conn), info, nil
	}
	return conn, info, nil
}

// Plaintext reports whether c leaves a connection in plaintext when no
// cluster security config applies to it: c is insecure, or xdscreds' with
// insecure fallback credentials. Connection scaling (gRFC A105, package
// grpcxds) reads such a connection's HTTP/2 settings at its dialer.
func Plaintext(c credentials.TransportCredentials) bool {
	if x, ok := c.(*clientCreds); ok {
		c = x.fallback
	}
	return c == nil || c.Info().SecurityProtocol == "insecure"
}

func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("xdscreds: client credentials cannot serve")
}

// Info reports "xds", as grpc-go's xDS credentials do: what the
// connection really is depends on the cluster.
func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "xds"}
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	return &clientCreds{fallback: c.fallback.Clone()}
}

// OverrideServerName is deprecated in grpc-go; it is passed on to the
// fallback credentials.
func (c *clientCreds) OverrideServerName(name string) error {
	return c.fallback.OverrideServerName(name) //nolint:staticcheck // the interface requires it
}
