package bootstrap_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
	"google.golang.org/grpc/credentials/tls/certprovider"
)

// TestCertificateProviders checks that certificate_providers entries are
// parsed by their plugin when the bootstrap is read, that a bad
// file_watcher config fails the load naming the instance, and that unknown
// plugins and undefined instances are told apart from good ones.
func TestCertificateProviders(t *testing.T) {
	for _, tt := range []struct {
		name, providers, wantErr string
	}{
		{"file_watcher without files", `{"p": {"plugin_name": "file_watcher", "config": {}}}`,
			`certificate_providers["p"].config: plugin "file_watcher": pemfile: at least one credential file`},
		{"file_watcher without config", `{"p": {"plugin_name": "file_watcher"}}`,
			`certificate_providers["p"].config: plugin "file_watcher": pemfile: at least one credential file`},
		{"file_watcher key without certificate", `{"p": {"plugin_name": "file_watcher", "config": {"private_key_file": "/k"}}}`,
			`certificate_providers["p"].config: plugin "file_watcher": pemfile: private key file and identity cert file should be both specified`},
		{"file_watcher bad refresh_interval", `{"p": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/ca", "refresh_interval": "soon"}}}`,
			`certificate_providers["p"].config: plugin "file_watcher":`},
		{"file_watcher ok", `{"p": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/ca", "refresh_interval": "1s"}}}`, ""},
		{"unknown plugin is kept, as gRPC ignores it", `{"m": {"plugin_name": "mesh_ca", "config": {"anything": 1}}}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bootstrap.Parse([]byte(withServer(`, "certificate_providers": ` + tt.providers)))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Parse() = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Parse() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}

	c, err := bootstrap.Parse([]byte(withServer(`, "certificate_providers": {
		"p": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/ca"}},
		"m": {"plugin_name": "mesh_ca", "config": {}}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if bc, err := c.CertificateProviderConfig("p"); err != nil || bc == nil {
		t.Errorf(`CertificateProviderConfig("p") = %v, %v; want a config`, bc, err)
	}
	for instance, want := range map[string]string{
		"m":       `certificate_providers["m"]: plugin "mesh_ca" is not registered`,
		"missing": `certificate_providers has no instance "missing"`,
	} {
		_, err := c.CertificateProviderConfig(instance)
		if !errors.Is(err, bootstrap.ErrUnknownCertificateProvider) || !strings.Contains(err.Error(), want) {
			t.Errorf("CertificateProviderConfig(%q) = %v, want ErrUnknownCertificateProvider containing %q", instance, err, want)
		}
	}
	// HasCertificateProvider agrees with CertificateProviderConfig, asked
	// twice (the second answer comes from what the first learnt).
	for range 2 {
		for instance, want := range map[string]bool{"p": true, "m": false, "missing": false} {
			if got := c.HasCertificateProvider(instance); got != want {
				t.Errorf("HasCertificateProvider(%q) = %v, want %v", instance, got, want)
			}
		}
	}
	// The text the package relies on to recognise an unregistered plugin.
	if _, err := certprovider.ParseConfig("mesh_ca", nil); err == nil || !strings.HasPrefix(err.Error(), "no certificate provider builder found") {
		t.Errorf("certprovider.ParseConfig of an unregistered plugin = %v; bootstrap's unregisteredPrefix is out of date", err)
	}
}
