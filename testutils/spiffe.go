package testutils

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// WriteSPIFFEBundleMap writes dir/name, a SPIFFE trust bundle map file
// (gRFC A87: {"trust_domains": {"<domain>": <SPIFFE bundle>}}) in which each
// trust domain of domains trusts the CA of its PKI, and returns its path,
// for a file_watcher certificate provider's spiffe_trust_bundle_map_file.
// Writing again to the same name replaces the file atomically.
func WriteSPIFFEBundleMap(dir, name string, domains map[string]*PKI) (string, error) {
	out := map[string]json.RawMessage{}
	for domain, p := range domains {
		td, err := spiffeid.TrustDomainFromString(domain)
		if err != nil {
			return "", fmt.Errorf("testutils: trust domain %q: %w", domain, err)
		}
		ca, err := p.caCert()
		if err != nil {
			return "", err
		}
		b, err := spiffebundle.FromX509Authorities(td, []*x509.Certificate{ca}).Marshal()
		if err != nil {
			return "", fmt.Errorf("testutils: bundle of %q: %w", domain, err)
		}
		out[domain] = b
	}
	data, err := json.Marshal(map[string]any{"trust_domains": out})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, WriteFileAtomically(path, data)
}

// caCert reads back the CA certificate of p.
func (p *PKI) caCert() (*x509.Certificate, error) {
	data, err := os.ReadFile(p.CAFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("testutils: no PEM in %s", p.CAFile)
	}
	return x509.ParseCertificate(block.Bytes)
}
