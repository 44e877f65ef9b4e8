// Package spiffe verifies a TLS peer's certificate chain the way gRFC A87
// says when a certificate provider hands out a SPIFFE trust bundle map
// instead of root certificates: the leaf must carry exactly one URI SAN,
// a well-formed SPIFFE ID; its trust domain picks the bundle; the chain
// must lead to one of that bundle's X.509 authorities. Without a map, the
// chain is verified against plain roots. internal/upstreamtls (the
// client side: grpcxds/xdscreds and httpxds's client) and
// internal/servertls (the server side: xdsserver and httpxds) share it, so
// that both sides reject the same certificates with the same words.
package spiffe

import (
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// VerifyChain parses the chain raw that the peer presented (leaf first)
// and verifies it for usage (x509.ExtKeyUsageServerAuth for a server's
// certificate, ClientAuth for a client's). When bundles is not nil the
// roots come from the bundle of the leaf's trust domain and roots is not
// used; otherwise roots are the roots. who names the peer in errors
// ("server", "client"). It returns the leaf.
func VerifyChain(raw [][]byte, roots *x509.CertPool, bundles map[string]*spiffebundle.Bundle, usage x509.ExtKeyUsage, who string) (*x509.Certificate, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s sent no certificate", who)
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, der := range raw {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s certificate %d: %w", who, i, err)
		}
		certs[i] = c
	}
	leaf := certs[0]
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	if bundles == nil {
		if _, err := leaf.Verify(opts); err != nil {
			return nil, fmt.Errorf("%s certificate not trusted: %w", who, err)
		}
		return leaf, nil
	}
	id, err := ID(leaf)
	if err != nil {
		return nil, fmt.Errorf("%s certificate is not a SPIFFE certificate, and the roots are a SPIFFE trust bundle map: %w", who, err)
	}
	td := id.TrustDomain().Name()
	b, ok := bundles[td]
	if !ok {
		return nil, fmt.Errorf("%s certificate's SPIFFE ID %s is of trust domain %q, which the SPIFFE trust bundle map lacks (it has %q)",
			who, id, td, slices.Sorted(maps.Keys(bundles)))
	}
	opts.Roots = x509.NewCertPool()
	for _, a := range b.X509Authorities() {
		opts.Roots.AddCert(a)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return nil, fmt.Errorf("%s certificate %s not trusted by the SPIFFE bundle of %q: %w", who, id, td, err)
	}
	return leaf, nil
}

// ID returns the SPIFFE ID of cert: its only URI SAN, which must be a
// well-formed SPIFFE ID.
func ID(cert *x509.Certificate) (spiffeid.ID, error) {
	switch n := len(cert.URIs); {
	case n == 0:
		return spiffeid.ID{}, errors.New("it has no URI SAN")
	case n > 1:
		return spiffeid.ID{}, fmt.Errorf("it has %d URI SANs, and a SPIFFE certificate has one", n)
	}
	id, err := spiffeid.FromURI(cert.URIs[0])
	if err != nil {
		return spiffeid.ID{}, fmt.Errorf("its URI SAN %q is not a SPIFFE ID: %w", cert.URIs[0], err)
	}
	return id, nil
}
