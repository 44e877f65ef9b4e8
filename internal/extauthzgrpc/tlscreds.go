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
	c.rootFiles = watchedFiles(t.Bootstrap, t.RootInstance)
	if t.IdentityInstance != "" {
		if c.identity, err = build(t.IdentityInstance, certprovider.BuildOptions{CertName: t.IdentityCertName, WantIdentity: true}); err != nil {
			c.roots.Close()
			return nil, nil, err
		}
		c.identityFiles = watchedFiles(t.Bootstrap, t.IdentityInstance)
	}
	return c, c.close, nil
}

// providerCreds is client-side TLS with key material from certificate
// providers. A file_watcher instance's files are known (rootFiles,
// identityFiles; nil for another plugin), so that a handshake need not
// wait for a provider that has nothing yet.
type providerCreds struct {
	roots, identity          certprovider.Provider
	rootFiles, identityFiles *fileWatcherFiles
}

func (c *providerCreds) close() {
	c.roots.Close()
	if c.identity != nil {
		c.identity.Close()
	}
}

// ClientHandshake takes the providers' key material as it is now. grpc-go's
// file_watcher provider has none until it has read its files, which it
// does at its creation and then every refresh_interval: until then its
// KeyMaterial blocks. Waiting for it with the dial's context would hold
// every call on the channel (a fail-fast check too) for the whole
// connection timeout, saying only that no connection was ready. Instead a
// file_watcher instance with nothing yet has its files read here, so
// that the handshake fails at once naming the instance and the file it
// cannot read (the channel goes TRANSIENT_FAILURE with that error, which
// a fail-fast call reports), and succeeds at the next attempt once the
// files are there, without waiting for the provider's next refresh.
// Another plugin's provider is waited for, bounded by ctx.
func (c *providerCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	km, err := keyMaterial(ctx, c.roots, c.rootFiles, true)
	if err != nil {
		return nil, nil, fmt.Errorf("TlsCredentials: no root certificates: %w", err)
	}
	if km.Roots == nil {
		return nil, nil, errors.New("TlsCredentials: the root certificate provider has no roots (a SPIFFE bundle map is not read on side channels)")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: km.Roots}
	if c.identity != nil {
		id, err := keyMaterial(ctx, c.identity, c.identityFiles, false)
		if err != nil {
			return nil, nil, fmt.Errorf("TlsCredentials: no identity certificate: %w", err)
		}
		cfg.Certificates = id.Certs
	}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

// keyMaterial is p's key material if it has some now; else, for a
// file_watcher instance (files not nil), its files' (roots or identity),
// read now; else p's once it has some, waited for within ctx.
func keyMaterial(ctx context.Context, p certprovider.Provider, files *fileWatcherFiles, roots bool) (*certprovider.KeyMaterial, error) {
	// A provider that has key material returns it even to a done context.
	now, cancel := context.WithCancel(ctx)
	cancel()
	if km, err := p.KeyMaterial(now); err == nil {
		return km, nil
	}
	if files == nil {
		return p.KeyMaterial(ctx)
	}
	if roots {
		return files.roots()
	}
	return files.identity()
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
