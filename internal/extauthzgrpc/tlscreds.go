package extauthzgrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/resources"
)

// tlsCredentials builds gRFC A102's TlsCredentials: TLS whose roots, and
// client certificate when an identity instance is named, come from the
// bootstrap's certificate provider instances, read at each handshake so
// that rotated files serve the next connection. The plugin has no SAN
// matchers, so the server's certificate is checked as any TLS channel's
// is: against the roots and the channel's authority. The func releases
// the providers.
func tlsCredentials(gs *resources.GrpcService) (credentials.TransportCredentials, func(), error) {
	t := gs.TLS
	if t == nil || t.Bootstrap == nil {
		return nil, nil, fmt.Errorf("channel credentials TlsCredentials for %q: no bootstrap to build certificate provider instances from", gs.TargetURI)
	}
	build := func(instance string, opts certprovider.BuildOptions) (certprovider.Provider, error) {
		bc, err := t.Bootstrap.CertificateProviderConfig(instance)
		if err != nil {
			return nil, fmt.Errorf("channel credentials TlsCredentials for %q: %w", gs.TargetURI, err)
		}
		p, err := bc.Build(opts)
		if err != nil {
			return nil, fmt.Errorf("channel credentials TlsCredentials for %q: certificate provider %q: %w", gs.TargetURI, instance, err)
		}
		return p, nil
	}
	c := &providerCreds{}
	var err error
	if c.roots, err = build(t.RootInstance, certprovider.BuildOptions{CertName: t.RootCertName, WantRoot: true}); err != nil {
		return nil, nil, err
	}
	if t.IdentityInstance != "" {
		if c.identity, err = build(t.IdentityInstance, certprovider.BuildOptions{CertName: t.IdentityCertName, WantIdentity: true}); err != nil {
			c.roots.Close()
			return nil, nil, err
		}
	}
	return c, c.close, nil
}

// providerCreds is client-side TLS with key material from certificate
// providers.
type providerCreds struct {
	roots, identity certprovider.Provider
}

func (c *providerCreds) close() {
	c.roots.Close()
	if c.identity != nil {
		c.identity.Close()
	}
}

func (c *providerCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	km, err := c.roots.KeyMaterial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("TlsCredentials: no root certificates: %w", err)
	}
	if km.Roots == nil {
		return nil, nil, errors.New("TlsCredentials: the root certificate provider has no roots (a SPIFFE bundle map is not read on side channels)")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: km.Roots}
	if c.identity != nil {
		id, err := c.identity.KeyMaterial(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("TlsCredentials: no identity certificate: %w", err)
		}
		cfg.Certificates = id.Certs
	}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

func (c *providerCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("TlsCredentials are for clients only")
}

func (c *providerCreds) Info() credentials.ProtocolInfo { return credentials.NewTLS(nil).Info() }

func (c *providerCreds) Clone() credentials.TransportCredentials {
	return &providerCreds{roots: c.roots, identity: c.identity}
}

// OverrideServerName is deprecated in grpc-go and not used.
func (c *providerCreds) OverrideServerName(string) error { return nil }
