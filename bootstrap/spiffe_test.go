package bootstrap_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials/tls/certprovider"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// TestFileWatcherSPIFFEConfig checks the file_watcher configs that name a
// SPIFFE trust bundle map (gRFC A87), which goxds reads itself (grpc-go
// v1.85 reads the field only with GRPC_EXPERIMENTAL_XDS_MTLS_SPIFFE set):
// a map alone is a valid config, and a bad field is an error naming it.
func TestFileWatcherSPIFFEConfig(t *testing.T) {
	for _, tt := range []struct {
		name, config, wantErr string
	}{
		{"map alone", `{"spiffe_trust_bundle_map_file": "/m.json"}`, ""},
		{"map, CA file and identity", `{"spiffe_trust_bundle_map_file": "/m.json", "ca_certificate_file": "/ca",
			"certificate_file": "/d/c.pem", "private_key_file": "/d/k.pem", "refresh_interval": "30s"}`, ""},
		{"zero refresh_interval: the default", `{"spiffe_trust_bundle_map_file": "/m.json", "refresh_interval": "0s"}`, ""},
		{"empty map name: as if absent", `{"spiffe_trust_bundle_map_file": ""}`,
			`certificate_providers["p"].config: plugin "file_watcher": pemfile: at least one credential file`},
		{"map not a string", `{"spiffe_trust_bundle_map_file": 7}`,
			`certificate_providers["p"].config.spiffe_trust_bundle_map_file: must be a string, got number`},
		{"CA file not a string", `{"spiffe_trust_bundle_map_file": "/m.json", "ca_certificate_file": []}`,
			`certificate_providers["p"].config.ca_certificate_file: must be a string, got array`},
		{"certificate without key", `{"spiffe_trust_bundle_map_file": "/m.json", "certificate_file": "/d/c.pem"}`,
			`certificate_providers["p"].config.private_key_file: must be set when certificate_file is set`},
		{"key without certificate", `{"spiffe_trust_bundle_map_file": "/m.json", "private_key_file": "/d/k.pem"}`,
			`certificate_providers["p"].config.certificate_file: must be set when private_key_file is set`},
		{"certificate and key apart", `{"spiffe_trust_bundle_map_file": "/m.json", "certificate_file": "/d/c.pem", "private_key_file": "/e/k.pem"}`,
			`certificate_providers["p"].config.private_key_file: must be in the directory of certificate_file`},
		{"bad refresh_interval", `{"spiffe_trust_bundle_map_file": "/m.json", "refresh_interval": "soon"}`,
			`certificate_providers["p"].config.refresh_interval: invalid duration "soon"`},
		{"negative refresh_interval", `{"spiffe_trust_bundle_map_file": "/m.json", "refresh_interval": "-1s"}`,
			`certificate_providers["p"].config.refresh_interval: must not be negative, got -1s`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			providers := `{"p": {"plugin_name": "file_watcher", "config": ` + tt.config + `}}`
			c, err := bootstrap.Parse([]byte(withServer(`, "certificate_providers": ` + providers)))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Parse() = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Parse() = %v, want an error containing %q", err, tt.wantErr)
			case err != nil:
				// A Config built in code with the same entry says the same
				// thing through CertificateProviderConfig.
				b := &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{
					"p": {PluginName: "file_watcher", Config: []byte(tt.config)}}}
				if _, err := b.CertificateProviderConfig("p"); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("CertificateProviderConfig() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if bc, err := c.CertificateProviderConfig("p"); err != nil || bc == nil {
				t.Errorf("CertificateProviderConfig() = %v, %v", bc, err)
			}
		})
	}
}

// TestFileWatcherSPIFFEProvider builds a file_watcher provider naming a
// map of two trust domains and a CA file: its roots are the map, the CA
// file ignored (gRFC A87), and the identity is still served.
func TestFileWatcherSPIFFEProvider(t *testing.T) {
	a, b := testutils.NewPKI(t), testutils.NewPKI(t)
	id := a.Issue("me", testutils.CertOptions{URIs: []string{"spiffe://a.goxds.test/me"}})
	bundles, err := testutils.WriteSPIFFEBundleMap(t.TempDir(), "bundles.json", map[string]*testutils.PKI{"a.goxds.test": a, "b.goxds.test": b})
	if err != nil {
		t.Fatal(err)
	}
	c := &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{
		"p": {PluginName: "file_watcher", Config: []byte(`{"spiffe_trust_bundle_map_file": "` + bundles + `", "ca_certificate_file": "` + a.CAFile +
			`", "certificate_file": "` + id.CertFile + `", "private_key_file": "` + id.KeyFile + `"}`)},
	}}
	bc, err := c.CertificateProviderConfig("p")
	if err != nil {
		t.Fatal(err)
	}
	p, err := bc.Build(certprovider.BuildOptions{WantRoot: true, WantIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	km, err := p.KeyMaterial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if km.Roots != nil || len(km.SPIFFEBundleMap) != 2 || km.SPIFFEBundleMap["a.goxds.test"] == nil || km.SPIFFEBundleMap["b.goxds.test"] == nil {
		t.Errorf("key material: Roots %v, SPIFFEBundleMap %v; want the map of a.goxds.test and b.goxds.test, no roots", km.Roots, km.SPIFFEBundleMap)
	}
	if len(km.Certs) != 1 {
		t.Errorf("key material has %d identity certificates, want 1", len(km.Certs))
	}
}

// TestSPIFFESeedCorpus checks that the SPIFFE seeds of FuzzParse's corpus
// are what their names say.
func TestSPIFFESeedCorpus(t *testing.T) {
	checkSeeds(t, map[string]string{
		"spiffe_bundle_map":            "",
		"spiffe_bundle_map_not_string": `certificate_providers["spiffe"].config.spiffe_trust_bundle_map_file: must be a string, got object`,
	})
}
