package xdscreds

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/credentials/tls/certprovider"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
)

// HandshakeInfo is the security of the connections to one cluster's
// endpoints, made from the cluster's SecurityConfig and the bootstrap's
// certificate providers by NewHandshakeInfo. The balancer puts it on each
// SubConn address (SetHandshakeInfo) and the credentials of
// NewClientCredentials read it in the handshake.
//
// A HandshakeInfo holds certificate providers (each may run a goroutine
// that watches files); Close releases them. It is safe for concurrent use.
type HandshakeInfo struct {
	// Read-only after NewHandshakeInfo.
	roots    certprovider.Provider // nil: the system's roots
	identity certprovider.Provider // nil: no client certificate
	sans     []resources.StringMatcher
	sni      string
	autoHost bool // send the endpoint's hostname as SNI when it has one
	autoSAN  bool // no SAN matchers: check the SNI against the certificate
	desc     string

	closeOnce sync.Once
}

// NewHandshakeInfo builds the certificate providers sc names from the
// bootstrap's certificate_providers: the root provider with the root
// certificate name, the identity provider (if any) with its own. An
// instance the bootstrap does not define is an error wrapping
// bootstrap.ErrUnknownCertificateProvider: the cluster cannot be reached
// securely, so it must not be reached at all.
//
// The server side (DownstreamTlsContext) will use the same providers of
// the same bootstrap: certprovider shares one provider per config.
func NewHandshakeInfo(b *bootstrap.Config, sc *resources.SecurityConfig) (*HandshakeInfo, error) {
	if sc == nil {
		return nil, errors.New("xdscreds: no security config")
	}
	if b == nil {
		return nil, fmt.Errorf("xdscreds: the cluster's TLS needs certificate provider %q, and there is no bootstrap to define it: %w",
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
		return nil, fmt.Errorf("xdscreds: %w", err)
	}
	p, err := bc.Build(opts)
	if err != nil {
		return nil, fmt.Errorf("xdscreds: certificate provider %q: %w", instance, err)
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

// addrInfo is what an address carries: the cluster's HandshakeInfo and the
// endpoint's hostname (for auto_host_sni).
type addrInfo struct {
	hi       *HandshakeInfo
	hostname string
}

type addrInfoKey struct{}

// SetHandshakeInfo returns addr with hi in its Attributes, and the
// endpoint's hostname (from EDS; "" if none), which becomes the SNI when
// the cluster asks for auto_host_sni. A nil hi means the cluster has no
// security config: the fallback credentials are used.
func SetHandshakeInfo(addr resolver.Address, hi *HandshakeInfo, hostname string) resolver.Address {
	if hi == nil {
		return addr
	}
	addr.Attributes = addr.Attributes.WithValue(addrInfoKey{}, addrInfo{hi: hi, hostname: hostname})
	return addr
}

// handshakeInfoFrom returns what SetHandshakeInfo put into a.
func handshakeInfoFrom(a *attributes.Attributes) (addrInfo, bool) {
	v, ok := a.Value(addrInfoKey{}).(addrInfo)
	return v, ok && v.hi != nil
}
