package xdscreds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/internal/spiffe"
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
	hi := ai.hi
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		ServerName: hi.sni,
		// crypto/tls would check the certificate against the server name;
		// gRFC A29 replaces that check with the SAN matchers, so the chain
		// and the SANs are checked by verify below, never skipped.
		InsecureSkipVerify: true,
	}
	if hi.autoHost && ai.hostname != "" {
		cfg.ServerName = ai.hostname
	}
	roots, bundles, err := hi.rootPool(ctx)
	if err != nil {
		return nil, nil, err
	}
	if hi.identity != nil {
		km, err := hi.identity.KeyMaterial(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("xdscreds: no identity certificate: %w", err)
		}
		cfg.Certificates = km.Certs
	}
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		return hi.verify(raw, roots, bundles, cfg.ServerName)
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("xdscreds: TLS handshake with %s: %w", raw.RemoteAddr(), err)
	}
	info := credentials.TLSInfo{
		State:          conn.ConnectionState(),
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}
	return conn, info, nil
}

// rootPool returns the roots to verify the server with: certificates, or
// a SPIFFE trust bundle map (gRFC A87) when the root provider has one.
func (hi *HandshakeInfo) rootPool(ctx context.Context) (*x509.CertPool, map[string]*spiffebundle.Bundle, error) {
	if hi.roots == nil {
		pool, err := x509.SystemCertPool()
		if err != nil {
			return nil, nil, fmt.Errorf("xdscreds: system roots: %w", err)
		}
		return pool, nil, nil
	}
	km, err := hi.roots.KeyMaterial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("xdscreds: no root certificates: %w", err)
	}
	if km.SPIFFEBundleMap != nil {
		return nil, km.SPIFFEBundleMap, nil
	}
	if km.Roots == nil {
		return nil, nil, errors.New("xdscreds: the root certificate provider has no roots")
	}
	return km.Roots, nil, nil
}

// verify checks the server's chain against roots, or against the bundle
// of its trust domain when bundles is not nil (gRFC A87), then its DNS SANs
// against sni (auto_sni_san_validation) or its SANs against the matchers,
// whichever the roots were.
func (hi *HandshakeInfo) verify(raw [][]byte, roots *x509.CertPool, bundles map[string]*spiffebundle.Bundle, sni string) error {
	leaf, err := spiffe.VerifyChain(raw, roots, bundles, x509.ExtKeyUsageServerAuth, "server")
	if err != nil {
		return err
	}
	// gRFC A101, "Server SAN validation against SNI used": with
	// auto_sni_san_validation and a server name sent, that name is what
	// the certificate must be for (an exact DNS match, wildcards allowed)
	// and the matchers are not used. With no name sent (no sni, and no
	// auto_host_sni hostname) the flag changes nothing: the matchers
	// check the SANs as in gRFC A29. grpc-go v1.85 reads it the same way
	// (its TestClientSideXDS_FallbackSANMatchers). An endpoint's address,
	// even a name such as "localhost", is never the SNI: only EDS's
	// hostname field is, and only with auto_host_sni.
	if hi.autoSAN && sni != "" {
		for _, dns := range leaf.DNSNames {
			if strings.EqualFold(dns, sni) || wildcardCovers(dns, sni) {
				return nil
			}
		}
		return fmt.Errorf("server certificate SANs %v do not match the SNI %q (auto_sni_san_validation)", sanList(leaf), sni)
	}
	if len(hi.sans) > 0 && !hi.sanMatches(leaf) {
		// grpc-go's words, which tests and alerts written against it look
		// for, then the matchers.
		return fmt.Errorf("server certificate: received SANs %v do not match any of the accepted SANs %s", sanList(leaf), hi.matcherList())
	}
	return nil
}

func (hi *HandshakeInfo) matcherList() string {
	parts := make([]string, len(hi.sans))
	for i, m := range hi.sans {
		parts[i] = m.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
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
