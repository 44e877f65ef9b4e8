package xdsserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/spiffe"
	"github.com/goxds/xds/internal/xdsconn"
	"github.com/goxds/xds/resources"
)

// keyMaterialTimeout bounds how long a handshake waits for a certificate
// provider that has not read its files yet.
const keyMaterialTimeout = 10 * time.Second

// chainSecurity is the TLS of one filter chain of a generation: the
// certificate providers its DownstreamTlsContext names, built from the
// server's bootstrap (gRFC A29).
type chainSecurity struct {
	identity          certprovider.Provider
	roots             certprovider.Provider // nil: clients are not verified
	requireClientCert bool
}

// newChainSecurity builds the providers of sc. An instance the bootstrap
// does not define is an error: the chain's connections are then closed,
// never served in plaintext.
func newChainSecurity(b *bootstrap.Config, fc *resources.FilterChain) (*chainSecurity, error) {
	sc := fc.Security
	cs := &chainSecurity{requireClientCert: fc.RequireClientCert}
	var err error
	if cs.identity, err = buildProvider(b, sc.IdentityInstance, certprovider.BuildOptions{CertName: sc.IdentityCertName, WantIdentity: true}); err != nil {
		return nil, err
	}
	if sc.RootInstance != "" {
		if cs.roots, err = buildProvider(b, sc.RootInstance, certprovider.BuildOptions{CertName: sc.RootCertName, WantRoot: true}); err != nil {
			cs.close()
			return nil, err
		}
	}
	return cs, nil
}

// chains are cfg's filter chains, the default one included.
func chains(cfg *resources.ServerListener) []*resources.FilterChain {
	out := cfg.FilterChains
	if cfg.DefaultFilterChain != nil {
		out = append(out[:len(out):len(out)], cfg.DefaultFilterChain)
	}
	return out
}

// chainTLS is the TLS of one filter chain of a generation. Its
// certificate providers are built when the first handshake asks for them,
// which only xDS server credentials do (grpc-go builds them as late): a
// server made with other credentials never builds them, and serves the
// chain with those credentials. The build runs on a goroutine of its own,
// never counted by Stop: a plugin that blocks holds up only the handshakes
// that wait for it, which end when their generation stops.
type chainTLS struct {
	s     *GRPCServer
	lname string // the Listener's name, for the warning
	fc    *resources.FilterChain
	once  sync.Once
	built chan struct{} // closed once sec or err is set

	mu    sync.Mutex
	sec   *chainSecurity
	err   error
	ended bool // the generation stopped: what is built is closed
}

func newChainTLS(s *GRPCServer, lname string, fc *resources.FilterChain) *chainTLS {
	return &chainTLS{s: s, lname: lname, fc: fc, built: make(chan struct{})}
}

// get returns the chain's security, starting its build on the first call,
// and waits for it until ctx ends.
func (c *chainTLS) get(ctx context.Context) (*chainSecurity, error) {
	c.once.Do(func() { go c.build() })
	select {
	case <-c.built:
	case <-ctx.Done():
		return nil, fmt.Errorf("xdsserver: certificate providers of filter chain %q: %w", c.fc.Name, context.Cause(ctx))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.ended {
		return nil, fmt.Errorf("xdsserver: filter chain %q: %w", c.fc.Name, errGenerationStopped)
	}
	return c.sec, c.err
}

var errGenerationStopped = errors.New("the Listener version it belongs to is no longer served")

func (c *chainTLS) build() {
	sec, err := newChainSecurity(c.s.opts.bootstrap, c.fc)
	if err != nil {
		c.s.warn("filter chain refuses its connections", "listener", c.lname, "filter_chain", c.fc.Name, "error", err)
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
		sec.close()
	}
}

// end closes the providers once the generation's server has stopped; a
// build still under way closes them when it is done.
func (c *chainTLS) end() {
	c.mu.Lock()
	c.ended = true
	sec := c.sec
	c.sec = nil
	c.mu.Unlock()
	if sec != nil {
		sec.close()
	}
}

func buildProvider(b *bootstrap.Config, instance string, opts certprovider.BuildOptions) (certprovider.Provider, error) {
	bc, err := b.CertificateProviderConfig(instance)
	if err != nil {
		return nil, fmt.Errorf("xdsserver: %w", err)
	}
	p, err := bc.Build(opts)
	if err != nil {
		return nil, fmt.Errorf("xdsserver: certificate provider %q: %w", instance, err)
	}
	return p, nil
}

func (cs *chainSecurity) close() {
	if cs.identity != nil {
		cs.identity.Close()
	}
	if cs.roots != nil {
		cs.roots.Close()
	}
}

// tlsConfig reads the providers' current key material, so that rotated
// files are used from the next handshake on.
func (cs *chainSecurity) tlsConfig(ctx context.Context) (*tls.Config, error) {
	id, err := cs.identity.KeyMaterial(ctx)
	if err != nil {
		return nil, fmt.Errorf("xdsserver: server certificate: %w", err)
	}
	c := &tls.Config{Certificates: id.Certs, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if cs.roots != nil {
		r, err := cs.roots.KeyMaterial(ctx)
		if err != nil {
			return nil, fmt.Errorf("xdsserver: roots to verify clients: %w", err)
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
func (cs *chainSecurity) verifyBySPIFFE(c *tls.Config, bundles map[string]*spiffebundle.Bundle) {
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

// chainConn is an accepted connection and the filter chain it matched,
// for xDS server credentials (package grpcxds/xdscreds) to ask for the
// chain's TLS. Other credentials use it as the plain connection it embeds.
type chainConn struct {
	net.Conn
	tls *chainTLS // nil: the chain has no DownstreamTlsContext
	// stopped ends when the connection's generation stops, so that a
	// handshake waiting for a provider does not hold up its grpc.Server's
	// Stop.
	stopped context.Context
}

var _ xdsconn.FilterChainConn = (*chainConn)(nil)

// FilterChainTLS implements xdsconn.FilterChainConn. It reads the
// providers' current key material, so that rotated files are used from
// the next handshake on.
func (cc *chainConn) FilterChainTLS(ctx context.Context) (*tls.Config, error) {
	if cc.tls == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, keyMaterialTimeout)
	defer cancel()
	stop := context.AfterFunc(cc.stopped, cancel)
	defer stop()
	sec, err := cc.tls.get(ctx)
	if err != nil {
		return nil, err
	}
	return sec.tlsConfig(ctx)
}
