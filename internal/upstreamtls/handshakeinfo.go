// Package upstreamtls is the client side of xDS TLS (gRFC A29, A87, A101),
// shared by grpcxds's credentials (package xdscreds) and httpxds's HTTP
// client: a cluster's UpstreamTlsContext with the bootstrap's certificate
// providers becomes a HandshakeInfo, which makes each handshake's
// tls.Config and verifies the server's chain and SANs; a Cache shares one
// HandshakeInfo between the clusters with equal security, for as long as
// an endpoint holds it. It knows nothing of the transport that carries
// the connection.
package upstreamtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/spiffe"
	"github.com/goxds/xds/resources"
)

// HandshakeInfo is the security of the connections to one cluster's
// endpoints, made from the cluster's SecurityConfig and the bootstrap's
// certificate providers by New. gRPC's balancer puts it on each SubConn
// address (xdscreds.SetHandshakeInfo) for xdscreds' credentials to read in
// the handshake; httpxds's client asks it for each connection's
// tls.Config (ClientTLSConfig).
//
// A HandshakeInfo holds certificate providers (each may run a goroutine
// that watches files); Close releases them. It is safe for concurrent use.
type HandshakeInfo struct {
	// Read-only after New.
	roots    certprovider.Provider // nil: the system's roots
	identity certprovider.Provider // nil: no client certificate
	sans     []resources.StringMatcher
	sni      string
	autoHost bool // send the endpoint's hostname as SNI when it has one
	autoSAN  bool // no SAN matchers: check the SNI against the certificate
	desc     string

	closeOnce sync.Once
}

// New builds the certificate providers sc names from the
// bootstrap's certificate_providers: the root provider with the root
// certificate name, the identity provider (if any) with its own. An
// instance the bootstrap does not define is an error wrapping
// bootstrap.ErrUnknownCertificateProvider: the cluster cannot be reached
// securely, so it must not be reached at all.
//
// The server side (DownstreamTlsContext) will use the same providers of
// the same bootstrap: certprovider shares one provider per config.
func New(b *bootstrap.Config, sc *resources.SecurityConfig) (*HandshakeInfo, error) {
	if sc == nil {
		return nil, errors.New("upstream TLS: no security config")
	}
	if b == nil {
		return nil, fmt.Errorf("upstream TLS: the cluster's TLS needs certificate provider %q, and there is no bootstrap to define it: %w",
			sc.RootInstance, bootstrap.ErrUnknownCertificateProvider)
	}
	hi := &HandshakeInfo{
		sans:     sc.SANMatchers,
		sni:      sc.SNI,
		autoHost: sc.AutoHostSNI,
		autoSAN:  sc.AutoSNISANValidation,
		desc:     describe(sc),
	}
	var err error
	if sc.RootInstance != "" {
		if hi.roots, err = buildProvider(b, sc.RootInstance, certprovider.BuildOptions{CertName: sc.RootCertName, WantRoot: true}); err != nil {
			return nil, err
		}
	}
	if sc.IdentityInstance != "" {
		if hi.identity, err = buildProvider(b, sc.IdentityInstance, certprovider.BuildOptions{CertName: sc.IdentityCertName, WantIdentity: true}); err != nil {
			hi.Close()
			return nil, err
		}
	}
	return hi, nil
}

func buildProvider(b *bootstrap.Config, instance string, opts certprovider.BuildOptions) (certprovider.Provider, error) {
	bc, err := b.CertificateProviderConfig(instance)
	if err != nil {
		return nil, fmt.Errorf("upstream TLS: %w", err)
	}
	p, err := bc.Build(opts)
	if err != nil {
		return nil, fmt.Errorf("upstream TLS: certificate provider %q: %w", instance, err)
	}
	return p, nil
}

// Close releases the certificate providers. Handshakes that start later
// fail. It is idempotent.
func (hi *HandshakeInfo) Close() {
	hi.closeOnce.Do(func() {
		if hi.roots != nil {
			hi.roots.Close()
		}
		if hi.identity != nil {
			hi.identity.Close()
		}
	})
}

// UsesHostname reports whether the endpoint's hostname matters to the
// handshake (auto_host_sni): if not, endpoints that differ only by
// hostname can share a connection.
func (hi *HandshakeInfo) UsesHostname() bool { return hi.autoHost }

// String describes the security for logs: instance names and matchers,
// no key material.
func (hi *HandshakeInfo) String() string { return hi.desc }

// Key returns a string equal for two SecurityConfigs exactly when one
// HandshakeInfo serves both, to share HandshakeInfos between clusters.
func Key(sc *resources.SecurityConfig) string { return describe(sc) }

func describe(sc *resources.SecurityConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "roots=%q/%q system=%t identity=%q/%q sni=%q auto_host_sni=%t auto_sni_san_validation=%t sans=[",
		sc.RootInstance, sc.RootCertName, sc.UseSystemRoots, sc.IdentityInstance, sc.IdentityCertName, sc.SNI, sc.AutoHostSNI, sc.AutoSNISANValidation)
	for i, m := range sc.SANMatchers {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(m.String())
	}
	b.WriteString("]")
	return b.String()
}

// ClientTLSConfig returns the configuration of one TLS handshake with an
// endpoint of the cluster hi secures, for a transport other than gRPC's
// (httpxds's HTTP client): the SNI (the security's, or hostname, the EDS
// endpoint's, with auto_host_sni), the identity certificate if any, and
// verification of the server's chain against the root provider's roots
// (or SPIFFE bundles) and of its SANs against the matchers, in place of
// crypto/tls's own name check, which gRFC A29 replaces. The key material
// is read now, so that rotated files serve the next handshake. nextProtos
// are the ALPN protocols to offer.
func (hi *HandshakeInfo) ClientTLSConfig(ctx context.Context, hostname string, nextProtos []string) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		ServerName: hi.sni,
		// crypto/tls would check the certificate against the server name;
		// gRFC A29 replaces that check with the SAN matchers, so the chain
		// and the SANs are checked by verify below, never skipped.
		InsecureSkipVerify: true,
	}
	if hi.autoHost && hostname != "" {
		cfg.ServerName = hostname
	}
	roots, bundles, err := hi.rootPool(ctx)
	if err != nil {
		return nil, err
	}
	if hi.identity != nil {
		km, err := hi.identity.KeyMaterial(ctx)
		if err != nil {
			return nil, fmt.Errorf("upstream TLS: no identity certificate: %w", err)
		}
		cfg.Certificates = km.Certs
	}
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		return hi.verify(raw, roots, bundles, cfg.ServerName)
	}
	return cfg, nil
}

// Handshake secures raw, a connection to an endpoint of the cluster hi
// secures whose EDS hostname is hostname, offering the ALPN protocols
// nextProtos: ClientTLSConfig's configuration, then the TLS handshake, an
// error of which names the peer. It leaves raw to the caller, open or
// not, when it fails.
func (hi *HandshakeInfo) Handshake(ctx context.Context, raw net.Conn, hostname string, nextProtos []string) (*tls.Conn, error) {
	cfg, err := hi.ClientTLSConfig(ctx, hostname, nextProtos)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", raw.RemoteAddr(), err)
	}
	return conn, nil
}

// rootPool returns the roots to verify the server with: certificates, or
// a SPIFFE trust bundle map (gRFC A87) when the root provider has one.
func (hi *HandshakeInfo) rootPool(ctx context.Context) (*x509.CertPool, map[string]*spiffebundle.Bundle, error) {
	if hi.roots == nil {
		pool, err := x509.SystemCertPool()
		if err != nil {
			return nil, nil, fmt.Errorf("upstream TLS: system roots: %w", err)
		}
		return pool, nil, nil
	}
	km, err := hi.roots.KeyMaterial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("upstream TLS: no root certificates: %w", err)
	}
	if km.SPIFFEBundleMap != nil {
		return nil, km.SPIFFEBundleMap, nil
	}
	if km.Roots == nil {
		return nil, nil, errors.New("upstream TLS: the root certificate provider has no roots")
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
