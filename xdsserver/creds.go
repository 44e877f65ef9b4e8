package xdsserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/internal/spiffe"
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

func hasSecurity(cfg *resources.ServerListener) bool {
	for _, fc := range chains(cfg) {
		if fc.Security != nil {
			return true
		}
	}
	return false
}

// newSecurity builds the TLS of each chain of cfg that has a
// DownstreamTlsContext. A chain whose providers cannot be built is left
// out, and so refuses its connections.
func (l *listener) newSecurity(cfg *resources.ServerListener) map[*resources.FilterChain]*chainSecurity {
	sec := make(map[*resources.FilterChain]*chainSecurity)
	for _, fc := range chains(cfg) {
		if fc.Security == nil {
			continue
		}
		cs, err := newChainSecurity(l.s.opts.bootstrap, fc)
		if err != nil {
			l.s.warn("filter chain refuses its connections", "listener", l.name, "filter_chain", fc.Name, "error", err)
			continue
		}
		sec[fc] = cs
	}
	return sec
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

// chainConn is an accepted connection and the TLS of the filter chain it
// matched (nil for plaintext), for serverCreds' handshake.
type chainConn struct {
	net.Conn
	sec *chainSecurity
}

// serverCreds are the transport credentials of every generation's
// grpc.Server: each connection gets the security its filter chain says,
// TLS or mTLS with the chain's certificates, or plaintext for a chain
// without a transport_socket.
type serverCreds struct{}

var errNotChainConn = errors.New("xdsserver: connection not accepted by the xDS listener")

// ServerHandshake implements credentials.TransportCredentials.
func (serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cc, ok := raw.(*chainConn)
	if !ok {
		return nil, nil, errNotChainConn
	}
	if cc.sec == nil {
		return raw, plaintextInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), keyMaterialTimeout)
	defer cancel()
	cfg, err := cc.sec.tlsConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	conn := tls.Server(cc.Conn, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("xdsserver: TLS handshake: %w", err)
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
// grpc-go).
func spiffeID(uris []*url.URL) *url.URL {
	if len(uris) != 1 || uris[0].Scheme != "spiffe" {
		return nil
	}
	return uris[0]
}

// ClientHandshake implements credentials.TransportCredentials; these are
// server credentials only.
func (serverCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("xdsserver: server credentials cannot dial")
}

// Info implements credentials.TransportCredentials.
func (serverCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "xds"}
}

// Clone implements credentials.TransportCredentials.
func (serverCreds) Clone() credentials.TransportCredentials { return serverCreds{} }

// OverrideServerName implements credentials.TransportCredentials.
func (serverCreds) OverrideServerName(string) error { return nil }

// plaintextInfo is the AuthInfo of a connection served without TLS.
type plaintextInfo struct{ credentials.CommonAuthInfo }

// AuthType implements credentials.AuthInfo.
func (plaintextInfo) AuthType() string { return "insecure" }
