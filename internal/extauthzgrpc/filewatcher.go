package extauthzgrpc

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/bootstrap"
)

// fileWatcherFiles are the files of a file_watcher certificate provider
// instance, read by a handshake while the provider has none yet
// (providerCreds.ClientHandshake).
type fileWatcherFiles struct {
	instance            string
	CertFile            string `json:"certificate_file"`
	KeyFile             string `json:"private_key_file"`
	CAFile              string `json:"ca_certificate_file"`
	SPIFFEBundleMapFile string `json:"spiffe_trust_bundle_map_file"`
}

// watchedFiles are the files of b's instance if it is a file_watcher one,
// else nil (another plugin, whose source is its own). The config was
// validated when the provider was built.
func watchedFiles(b *bootstrap.Config, instance string) *fileWatcherFiles {
	p, ok := b.CertificateProviders[instance]
	if !ok || p.PluginName != "file_watcher" {
		return nil
	}
	f := &fileWatcherFiles{instance: instance}
	if err := json.Unmarshal(p.Config, f); err != nil {
		return nil
	}
	return f
}

// roots are the CA certificates of ca_certificate_file, as the provider
// would read them.
func (f *fileWatcherFiles) roots() (*certprovider.KeyMaterial, error) {
	if f.CAFile == "" {
		// A bundle map only, which side channels do not read: the caller
		// says so.
		return &certprovider.KeyMaterial{}, nil
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, f.errorf("ca_certificate_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, f.errorf("ca_certificate_file %q: no PEM certificate", f.CAFile)
	}
	return &certprovider.KeyMaterial{Roots: pool}, nil
}

// identity is the certificate and key of certificate_file and
// private_key_file, as the provider would read them.
func (f *fileWatcherFiles) identity() (*certprovider.KeyMaterial, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, f.errorf("no certificate_file and private_key_file")
	}
	cert, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, f.errorf("certificate_file: %w", err)
	}
	key, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, f.errorf("private_key_file: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, f.errorf("certificate_file %q and private_key_file %q: %w", f.CertFile, f.KeyFile, err)
	}
	return &certprovider.KeyMaterial{Certs: []tls.Certificate{pair}}, nil
}

// errorf names the instance: its provider has not read its files either.
func (f *fileWatcherFiles) errorf(format string, args ...any) error {
	return fmt.Errorf("certificate provider instance %q (file_watcher) has none yet: %w", f.instance, fmt.Errorf(format, args...))
}
