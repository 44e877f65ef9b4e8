// Package servertls is the TLS of a server Listener's filter chain (gRFC
// A29's server half): the certificate providers its DownstreamTlsContext
// names, built from the bootstrap when a first handshake asks for them,
// and the tls.Config of each handshake from their current key material.
// Both xDS servers share it: xdsserver (gRPC, through xDS server
// credentials) and httpxds (net/http), each of which records at the
// handshake the certificate it served ([Served]), ext_authz's
// destination principal (gRFC A92).
package servertls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/spiffe"
	"github.com/goxds/xds/resources"
)

// Security is the built TLS of one filter chain: the certificate
// providers its DownstreamTlsContext names (gRFC A29).
type Security struct {
	identity          certprovider.Provider
	roots             certprovider.Provider // nil: clients are not verified
	requireClientCert bool
}

// Build builds the providers of fc's security. An instance the bootstrap
// does not define is an error: the chain's connections are then closed,
// never served in plaintext.
func Build(b *bootstrap.Config, fc *resources.FilterChain) (*Security, error) {
	sc := fc.Security
	cs := &Security{requireClientCert: fc.RequireClientCert}
	var err error
	if cs.identity, err = buildProvider(b, sc.IdentityInstance, certprovider.BuildOptions{CertName: sc.IdentityCertName, WantIdentity: true}); err != nil {
		return nil, err
	}
	if sc.RootInstance != "" {
		if cs.roots, err = buildProvider(b, sc.RootInstance, certprovider.BuildOptions{CertName: sc.RootCertName, WantRoot: true}); err != nil {
			cs.Close()
			return nil, err
		}
	}
	return cs, nil
}

func buildProvider(b *bootstrap.Config, instance string, opts certprovider.BuildOptions) (certprovider.Provider, error) {
	bc, err := b.CertificateProviderConfig(instance)
	if err != nil {
		return nil, err
	}
	p, err := bc.Build(opts)
	if err != nil {
		return nil, fmt.Errorf("certificate provider %q: %w", instance, err)
	}
	return p, nil
}

// Close closes the providers.
func (cs *Security) Close() {
	if cs.identity != nil {
		cs.identity.Close()
	}
	if cs.roots != nil {
		cs.roots.Close()
	}
}

// Config reads the providers' current key material, so that rotated files
// are used from the next handshake on, into a server tls.Config offering
// nextProtos by ALPN.
func (cs *Security) Config(ctx context.Context, nextProtos []string) (*tls.Config, error) {
	id, err := cs.identity.KeyMaterial(ctx)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	c := &tls.Config{Certificates: id.Certs, NextProtos: nextProtos, MinVersion: tls.VersionTLS12}
	if cs.roots != nil {
		r, err := cs.roots.KeyMaterial(ctx)
		if err != nil {
			return nil, fmt.Errorf("roots to verify clients: %w", err)
		}
		if r.SPIFFEBundleMap != nil {
			cs.verifyBySPIFFE(c, r.SPIFFEBundleMap)
			return c, nil
		}
		c.ClientCAs = r.Roots
		c.ClientAuth = tls.VerifyClientCertIfGiven
		if cs.requireClientCert {
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return c, nil
}

// verifyBySPIFFE makes c verify the client's certificate against the
// bundle of its SPIFFE ID's trust domain (gRFC A87), with the same
// requirement as for plain roots: a certificate is verified if given, and
// must be given when the chain requires one. crypto/tls cannot pick roots
// by the certificate it is verifying, so it only asks for the certificate
// and VerifyPeerCertificate does the verification.
func (cs *Security) verifyBySPIFFE(c *tls.Config, bundles map[string]*spiffebundle.Bundle) {
	c.ClientAuth = tls.RequestClientCert
	if cs.requireClientCert {
		c.ClientAuth = tls.RequireAnyClientCert
	}
	c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return nil // none given, and none required: RequireAnyClientCert would have refused it
		}
		_, err := spiffe.VerifyChain(raw, nil, bundles, x509.ExtKeyUsageClientAuth, "client")
		return err
	}
}

// Chains are cfg's filter chains, the default one included.
func Chains(cfg *resources.ServerListener) []*resources.FilterChain {
	out := cfg.FilterChains
	if cfg.DefaultFilterChain != nil {
		out = append(out[:len(out):len(out)], cfg.DefaultFilterChain)
	}
	return out
}

// ErrEnded is the error of a Chain whose Listener version is no longer
// served.
var ErrEnded = errors.New("the Listener version it belongs to is no longer served")

// Chain is the TLS of one filter chain of one Listener version. Its
// certificate providers are built when the first handshake asks for them
// (grpc-go builds them as late): a server that never serves the chain in
// TLS never builds them. The build runs on a goroutine of its own, which
// no server's stop waits for: a plugin that blocks holds up only the
// handshakes that wait for it, which end when their context does.
type Chain struct {
	b     *bootstrap.Config
	fc    *resources.FilterChain
	warn  func(error) // told when the build fails
	once  sync.Once
	built chan struct{} // closed once sec or err is set

	mu    sync.Mutex
	sec   *Security
	err   error
	ended bool // the Listener version stopped: what is built is closed
}

// NewChain returns fc's TLS, built from b's certificate providers on
// demand; warn (not nil) is told if the build fails, once.
func NewChain(b *bootstrap.Config, fc *resources.FilterChain, warn func(error)) *Chain {
	return &Chain{b: b, fc: fc, warn: warn, built: make(chan struct{})}
}

// Get returns the chain's security, starting its build on the first call,
// and waits for it until ctx ends.
func (c *Chain) Get(ctx context.Context) (*Security, error) {
	c.once.Do(func() { go c.build() })
	select {
	case <-c.built:
	case <-ctx.Done():
		return nil, fmt.Errorf("certificate providers of filter chain %q: %w", c.fc.Name, context.Cause(ctx))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.ended {
		return nil, fmt.Errorf("filter chain %q: %w", c.fc.Name, ErrEnded)
	}
	return c.sec, c.err
}

func (c *Chain) build() {
	sec, err := Build(c.b, c.fc)
	if err != nil {
		c.warn(err)
	}
	c.mu.Lock()
	ended := c.ended
	c.err = err
	if !ended {
		c.sec = sec
	}
	c.mu.Unlock()
	close(c.built)
	if ended && sec != nil {
		sec.Close()
	}
}

// End closes the providers once the Listener version has stopped; a build
// still under way closes them when it is done.
func (c *Chain) End() {
	c.mu.Lock()
	c.ended = true
	sec := c.sec
	c.sec = nil
	c.mu.Unlock()
	if sec != nil {
		sec.Close()
	}
}

// Served returns the leaf certificate a handshake with cfg serves to the
// client of hello, chosen among cfg.Certificates as crypto/tls chooses
// (the only one; else the first the client supports, by its SNI,
// signature schemes and curves; else the first), for gRFC A92's
// destination principal. A resumed session sends no certificate: its
// answer is then the one a full handshake would serve now. Called from
// GetConfigForClient, which every handshake runs, resumed or not; cfg is
// one of Security.Config's (no GetCertificate). Nil when cfg has none or
// the leaf cannot be parsed.
func Served(cfg *tls.Config, hello *tls.ClientHelloInfo) *x509.Certificate {
	certs := cfg.Certificates
	if len(certs) == 0 {
		return nil
	}
	chosen := &certs[0]
	if len(certs) > 1 {
		for i := range certs {
			if hello.SupportsCertificate(&certs[i]) == nil {
				chosen = &certs[i]
				break
			}
		}
	}
	if chosen.Leaf != nil {
		return chosen.Leaf
	}
	if len(chosen.Certificate) == 0 {
		return nil
	}
	// Key material built without tls.X509KeyPair (or under GODEBUG
	// x509keypairleaf=0) has no parsed leaf.
	leaf, err := x509.ParseCertificate(chosen.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}
