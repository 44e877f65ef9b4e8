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
		{name: "missing file does not fall back to inline", path: missing, content: inline, wantErr: missing, wantIs: fs.ErrNotExist},
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
