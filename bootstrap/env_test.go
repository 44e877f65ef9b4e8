package bootstrap_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
)

func writeFile(t *testing.T, contents string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func serverJSON(uri string) string {
	return `{"xds_servers": [{"server_uri": "` + uri + `", "channel_creds": [{"type": "insecure"}]}]}`
}

func TestLoad(t *testing.T) {
	c, err := bootstrap.Load(writeFile(t, serverJSON("file:1")))
	if err != nil || c.Servers[0].ServerURI != "file:1" {
		t.Fatalf("Load() = %v, %v", c, err)
	}

	bad := writeFile(t, `{"xds_servers": [{"server_uri": 1}]}`)
	_, err = bootstrap.Load(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "xds_servers[0].server_uri") {
		t.Errorf("Load(%s) error = %v, want it to name the file and the field", bad, err)
	}

	missing := filepath.Join(t.TempDir(), "nope.json")
	_, err = bootstrap.Load(missing)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(%s) error = %v, want fs.ErrNotExist naming the file", missing, err)
	}
}

func tlsJSON(config string) string {
	return `{"xds_servers": [{"server_uri": "xds:443", "channel_creds": [{"type": "mystery"}, {"type": "tls", "config": ` + config + `}]}]}`
}

// A TLS file that cannot be opened fails Load and Parse alike, naming the
// field. (Parse once did not look, and a bootstrap it took failed in Load.)
func TestLoadChecksTLSFiles(t *testing.T) {
	dir := t.TempDir()
	pem := filepath.Join(dir, "present.pem")
	if err := os.WriteFile(pem, []byte("not read until credentials are built"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tt := range []struct {
		config, wantField string
	}{
		{`{"ca_certificate_file": "` + pem + `", "certificate_file": "` + pem + `", "private_key_file": "` + pem + `"}`, ""},
		{`{"ca_certificate_file": "` + missing + `"}`, "xds_servers[0].channel_creds[1].config.ca_certificate_file"},
		{`{"certificate_file": "` + missing + `", "private_key_file": "` + pem + `"}`, "xds_servers[0].channel_creds[1].config.certificate_file"},
		{`{"certificate_file": "` + pem + `", "private_key_file": "` + missing + `"}`, "xds_servers[0].channel_creds[1].config.private_key_file"},
	} {
		_, parseErr := bootstrap.Parse([]byte(tlsJSON(tt.config)))
		_, loadErr := bootstrap.Load(writeFile(t, tlsJSON(tt.config)))
		for _, r := range []struct {
			fn  string
			err error
		}{{"Parse", parseErr}, {"Load", loadErr}} {
			switch err := r.err; {
			case tt.wantField == "" && err != nil:
				t.Errorf("%s with %s: %v", r.fn, tt.config, err)
			case tt.wantField != "" && (!errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), tt.wantField+": open "+missing)):
				t.Errorf("%s with %s: error %v, want fs.ErrNotExist naming %s and the file", r.fn, tt.config, err, tt.wantField)
			}
		}
	}
	authority := `{"xds_servers": [` + okServerJSON + `], "authorities": {"a": {"xds_servers": [{"server_uri": "a:443", "channel_creds": [{"type": "tls", "config": {"private_key_file": "` + missing + `", "certificate_file": "` + pem + `"}}]}]}}}`
	if _, err := bootstrap.Load(writeFile(t, authority)); err == nil || !strings.Contains(err.Error(), `authorities["a"].xds_servers[0].channel_creds[0].config.private_key_file`) {
		t.Errorf("Load with an authority's missing key: error %v, want it to name the field", err)
	}
}

const okServerJSON = `{"server_uri": "xds:443", "channel_creds": [{"type": "insecure"}]}`

func TestFromEnv(t *testing.T) {
	file := writeFile(t, serverJSON("from-file:1"))
	inline := serverJSON("from-inline:1")
	missing := filepath.Join(t.TempDir(), "nope.json")
	tests := []struct {
		name          string
		path, content string
		wantURI       string
		wantErr       string
		wantIs        error
	}{
		{name: "file wins over inline", path: file, content: inline, wantURI: "from-file:1"},
		{name: "file only", path: file, wantURI: "from-file:1"},
		{name: "inline only", content: inline, wantURI: "from-inline:1"},
		{name: "neither", wantIs: bootstrap.ErrNoBootstrap},
		{name: "missing file does not fall back to inline", path: missing, content: inline, wantErr: "GRPC_XDS_BOOTSTRAP=" + missing, wantIs: fs.ErrNotExist},
		{name: "inline naming a missing TLS file", content: tlsJSON(`{"ca_certificate_file": "` + missing + `"}`),
			wantErr: "GRPC_XDS_BOOTSTRAP_CONFIG: xds_servers[0].channel_creds[1].config.ca_certificate_file: open " + missing, wantIs: fs.ErrNotExist},
		{name: "bad inline", content: `{"xds_servers": []}`, wantErr: "GRPC_XDS_BOOTSTRAP_CONFIG: xds_servers: must list at least one server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(bootstrap.EnvFile, tt.path)
			t.Setenv(bootstrap.EnvConfig, tt.content)
			c, err := bootstrap.FromEnv()
			if tt.wantURI != "" {
				if err != nil || c.Servers[0].ServerURI != tt.wantURI {
					t.Fatalf("FromEnv() = %v, %v, want server %s", c, err, tt.wantURI)
				}
				return
			}
			if err == nil {
				t.Fatalf("FromEnv() = %v, want an error", c)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("FromEnv() error = %v, want errors.Is %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("FromEnv() error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
