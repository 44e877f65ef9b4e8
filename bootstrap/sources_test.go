package bootstrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
)

const (
	ldsURL = "type.googleapis.com/envoy.config.listener.v3.Listener"
	edsURL = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// The settings of the per-type, REST and FILESYSTEM API types, as read from
// JSON.
func TestParseSourceFields(t *testing.T) {
	c, err := bootstrap.Parse([]byte(`{"xds_servers": [
		{"server_uri": "xds:443", "channel_creds": [{"type": "insecure"}], "api_type": "AGGREGATED_GRPC",
		 "api_type_per_type": {"` + edsURL + `": "DELTA_GRPC"}},
		{"server_uri": "http://xds:8080/base/", "channel_creds": [{"type": "insecure"}], "api_type": "REST",
		 "refresh_delay": "0.250s", "request_timeout": "30s"},
		{"server_uri": "file:///etc/xds", "api_type": "FILESYSTEM",
		 "resource_files": {"` + ldsURL + `": "lds.yaml", "` + edsURL + `": "/elsewhere/eds.pb"}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	grpc, rest, files := c.Servers[0], c.Servers[1], c.Servers[2]
	if got := grpc.APITypeFor(edsURL); got != bootstrap.APITypeDeltaGRPC {
		t.Errorf("APITypeFor(EDS) = %v, want DELTA_GRPC", got)
	}
	if got := grpc.APITypeFor(ldsURL); got != bootstrap.APITypeAggregatedGRPC {
		t.Errorf("APITypeFor(LDS) = %v, want the server's AGGREGATED_GRPC", got)
	}
	if !grpc.APITypeFor(edsURL).IsDelta() || grpc.APITypeFor(ldsURL).IsDelta() {
		t.Error("IsDelta is wrong")
	}
	if rest.EffectiveRefreshDelay() != 250*time.Millisecond || rest.EffectiveRequestTimeout() != 30*time.Second {
		t.Errorf("refresh %v, timeout %v", rest.EffectiveRefreshDelay(), rest.EffectiveRequestTimeout())
	}
	if files.EffectiveRefreshDelay() != bootstrap.DefaultRefreshDelay || files.EffectiveRequestTimeout() != bootstrap.DefaultRequestTimeout {
		t.Errorf("defaults: refresh %v, timeout %v", files.EffectiveRefreshDelay(), files.EffectiveRequestTimeout())
	}
	if p, ok := files.FilePath(ldsURL); !ok || p != filepath.FromSlash("/etc/xds/lds.yaml") {
		t.Errorf("FilePath(LDS) = %q, %v", p, ok)
	}
	if p, _ := files.FilePath(edsURL); p != filepath.FromSlash("/elsewhere/eds.pb") {
		t.Errorf("FilePath(EDS) = %q, want the absolute path as written", p)
	}
	if _, ok := files.FilePath("type.googleapis.com/x.Y"); ok {
		t.Error("FilePath of a type with no file")
	}
	if s := grpc.String(); !strings.Contains(s, "per_type=ClusterLoadAssignment=DELTA_GRPC") {
		t.Errorf("String() = %q, want the per-type override", s)
	}
	if s := files.String(); !strings.Contains(s, "api_type=FILESYSTEM files=2") {
		t.Errorf("String() = %q", s)
	}
}

// Every misuse of the new fields is an error naming the field.
func TestValidateSourceFields(t *testing.T) {
	grpcServer := func() bootstrap.ServerConfig { return insecureServer("xds:443") }
	restServer := func() bootstrap.ServerConfig {
		s := insecureServer("http://xds:8080")
		s.APIType = bootstrap.APITypeREST
		return s
	}
	fileServer := func() bootstrap.ServerConfig {
		return bootstrap.ServerConfig{ServerURI: "/etc/xds", APIType: bootstrap.APITypeFilesystem,
			ResourceFiles: map[string]string{ldsURL: "lds.yaml"}}
	}
	tests := []struct {
		name   string
		server func() bootstrap.ServerConfig
		modify func(s *bootstrap.ServerConfig)
		want   string // empty: valid
	}{
		{"per-type override", grpcServer, func(s *bootstrap.ServerConfig) {
			s.APITypePerType = map[string]bootstrap.APIType{edsURL: bootstrap.APITypeDeltaGRPC}
		}, ""},
		{"per-type override to REST", grpcServer, func(s *bootstrap.ServerConfig) {
			s.APITypePerType = map[string]bootstrap.APIType{edsURL: bootstrap.APITypeREST}
		}, `xds_servers[0].api_type_per_type["` + edsURL + `"]: REST cannot be mixed with gRPC`},
		{"per-type key not a type URL", grpcServer, func(s *bootstrap.ServerConfig) {
			s.APITypePerType = map[string]bootstrap.APIType{"Listener": bootstrap.APITypeGRPC}
		}, `xds_servers[0].api_type_per_type["Listener"]: "Listener" is not a type URL`},
		{"per-type override out of range", grpcServer, func(s *bootstrap.ServerConfig) {
			s.APITypePerType = map[string]bootstrap.APIType{edsURL: 42}
		}, `cannot be mixed with gRPC`},
		{"refresh delay on gRPC", grpcServer, func(s *bootstrap.ServerConfig) { s.RefreshDelay = time.Second },
			"xds_servers[0].refresh_delay: applies only to REST and FILESYSTEM servers"},
		{"files on gRPC", grpcServer, func(s *bootstrap.ServerConfig) { s.ResourceFiles = map[string]string{ldsURL: "x"} },
			"xds_servers[0].resource_files: applies only to FILESYSTEM servers"},
		{"rest", restServer, func(*bootstrap.ServerConfig) {}, ""},
		{"rest https with tls", restServer, func(s *bootstrap.ServerConfig) {
			s.ServerURI = "https://xds"
			s.ChannelCreds = []bootstrap.ChannelCreds{{Type: "tls"}}
		}, ""},
		{"rest https with insecure", restServer, func(s *bootstrap.ServerConfig) { s.ServerURI = "https://xds" },
			`xds_servers[0].server_uri: "https://xds": "insecure" channel_creds need an http:// URL`},
		{"rest without host", restServer, func(s *bootstrap.ServerConfig) { s.ServerURI = "http://" },
			`xds_servers[0].server_uri: "http://" is not an http:// or https:// URL`},
		{"rest negative timeout", restServer, func(s *bootstrap.ServerConfig) { s.RequestTimeout = -time.Second },
			"xds_servers[0].request_timeout: must not be negative"},
		{"rest per-type", restServer, func(s *bootstrap.ServerConfig) {
			s.APITypePerType = map[string]bootstrap.APIType{edsURL: bootstrap.APITypeGRPC}
		}, "xds_servers[0].api_type_per_type: applies only to gRPC servers, not REST"},
		{"files", fileServer, func(*bootstrap.ServerConfig) {}, ""},
		{"files with creds of any kind", fileServer, func(s *bootstrap.ServerConfig) {
			s.ChannelCreds = []bootstrap.ChannelCreds{{Type: "mystery"}}
		}, ""},
		{"files none named", fileServer, func(s *bootstrap.ServerConfig) { s.ResourceFiles = nil },
			"xds_servers[0].resource_files: must name at least one file"},
		{"files empty path", fileServer, func(s *bootstrap.ServerConfig) { s.ResourceFiles[edsURL] = "" },
			`xds_servers[0].resource_files["` + edsURL + `"]: must not be empty`},
		{"files relative file URI", fileServer, func(s *bootstrap.ServerConfig) { s.ServerURI = "file://etc/xds" },
			`xds_servers[0].server_uri: "file://etc/xds": a file:// URI must hold an absolute path`},
		{"files request timeout", fileServer, func(s *bootstrap.ServerConfig) { s.RequestTimeout = time.Second },
			"xds_servers[0].request_timeout: applies only to REST servers, not FILESYSTEM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.server()
			tt.modify(&s)
			err := (&bootstrap.Config{Servers: []bootstrap.ServerConfig{s}}).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Servers that differ only in their API type settings do not share a key.
func TestKeyCoversSourceFields(t *testing.T) {
	base := bootstrap.ServerConfig{ServerURI: "/d", APIType: bootstrap.APITypeFilesystem, ResourceFiles: map[string]string{ldsURL: "a"}}
	keys := map[string]string{"base": base.Key()}
	other := base
	other.ResourceFiles = map[string]string{ldsURL: "b"}
	keys["files"] = other.Key()
	other = base
	other.RefreshDelay = time.Second
	keys["refresh"] = other.Key()
	g := insecureServer("xds:443")
	keys["grpc"] = g.Key()
	g.APITypePerType = map[string]bootstrap.APIType{edsURL: bootstrap.APITypeDeltaGRPC}
	keys["per-type"] = g.Key()
	seen := map[string]string{}
	for name, k := range keys {
		if prev, ok := seen[k]; ok {
			t.Errorf("%s and %s have the same key %s", name, prev, k)
		}
		seen[k] = name
	}
}

// Load takes the relative directory of a FILESYSTEM server relative to the
// bootstrap file, so that a bootstrap and its files can move together.
func TestLoadResolvesFilesystemDirAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bootstrap.json")
	err := os.WriteFile(path, []byte(`{"xds_servers": [{"server_uri": "xds", "api_type": "FILESYSTEM",
		"resource_files": {"`+ldsURL+`": "lds.yaml"}}]}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bootstrap.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Servers[0].FilePath(ldsURL); p != filepath.Join(dir, "xds", "lds.yaml") {
		t.Fatalf("FilePath = %q, want it under the bootstrap's directory", p)
	}
	// Parse has no file to go by: the working directory.
	c, err = bootstrap.Parse([]byte(`{"xds_servers": [{"server_uri": "xds", "api_type": "FILESYSTEM",
		"resource_files": {"` + ldsURL + `": "lds.yaml"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Servers[0].FilePath(ldsURL); p != filepath.Join("xds", "lds.yaml") {
		t.Fatalf("FilePath = %q, want it relative", p)
	}
}
