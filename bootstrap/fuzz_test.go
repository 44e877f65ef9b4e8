package bootstrap_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
)

// FuzzParse checks that Parse never panics, and that whatever it accepts is a
// Config that Validate accepts and whose helpers work. Its seed corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(serverJSON("xds:443")))
	f.Add([]byte(`{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "tls", "config": {"refresh_interval": "1s"}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := bootstrap.Parse(data)
		if err != nil {
			if !json.Valid(data) && !strings.HasPrefix(err.Error(), "bootstrap: invalid JSON") {
				t.Fatalf("Parse(%q) = %v, want an invalid JSON error", data, err)
			}
			return
		}
		if !slices.IsSorted(c.UnknownFields) {
			t.Fatalf("UnknownFields not sorted: %q", c.UnknownFields)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted %q but Validate says %v", data, err)
		}
		for _, s := range c.Servers {
			_ = s.Key()
			_ = s.String()
		}
		for name := range c.Authorities {
			if _, ok := c.ServersForAuthority(name); !ok {
				t.Fatalf("authority %q listed but not found", name)
			}
			_, _ = c.AuthorityListenerResourceName(name, "svc/[::1]:80")
			_ = c.Authorities[name].FallbackOnReachabilityOnly
		}
		// gRFC A102: every allowed_grpc_services entry is found under its
		// key and names it; a server's trust is a plain lookup.
		for target := range c.AllowedGRPCServices {
			if a, ok := c.AllowedGRPCService(target); !ok || a.Target != target || len(a.ChannelCreds) == 0 {
				t.Fatalf("allowed_grpc_services[%q] read back as %+v, %v", target, a, ok)
			}
		}
		for _, s := range c.Servers {
			_ = s.TrustedXDSServer()
		}
		_ = c.ListenerResourceName("svc/[::1]:80")
		_ = c.Node.Proto([]string{"f"})
	})
}

// TestSeedCorpus checks that the realistic bootstraps in the fuzz corpus
// parse, and that the broken ones fail, so the seeds stay what they claim.
func TestSeedCorpus(t *testing.T) {
	want := map[string]string{ // file → "" if valid, else part of the error
		"traffic_director":       "",
		"istio_agent":            "",
		"mtls_delta":             "",
		"federation":             "",
		"per_type_delta":         "",
		"filesystem":             "",
		"rest":                   "",
		"bad_per_type":           `xds_servers[0].api_type_per_type["type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"]: REST cannot be mixed with gRPC`,
		"wrong_types":            "xds_servers[0].server_uri: must be a string, got number",
		"typo_top":               `xds_servers: must list at least one server (unknown field at the top level: "xds_server", did you mean "xds_servers"?)`,
		"typo_server":            `xds_servers[0].server_uri: must not be empty (unknown fields in xds_servers[0]: "channel_cred", did you mean "channel_creds"?; "server_feature", did you mean "server_features"?; "server_url", did you mean "server_uri"?)`,
		"syntax_error":           "invalid JSON at line 3, column 71: invalid character '}'",
		"unknown_kept":           "",
		"endpoint_fallback":      "",
		"fallback_knob_not_bool": `authorities["a"].fallback_on_reachability_only: must be a boolean, got string`,
	}
	for name, wantErr := range want {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzParse", name))
			if err != nil {
				t.Fatal(err)
			}
			header, body, _ := strings.Cut(string(raw), "\n")
			body = strings.TrimSpace(body)
			if header != "go test fuzz v1" || !strings.HasPrefix(body, "[]byte(") || !strings.HasSuffix(body, ")") {
				t.Fatalf("not a corpus file: %q", raw)
			}
			data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(body, "[]byte("), ")"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = bootstrap.Parse([]byte(data))
			switch {
			case wantErr == "" && err != nil:
				t.Errorf("Parse() error = %v", err)
			case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
				t.Errorf("Parse() error = %v, want %q", err, wantErr)
			}
		})
	}
}
