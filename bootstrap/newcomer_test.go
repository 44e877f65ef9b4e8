package bootstrap_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
)

// TestInvalidJSONPosition holds that a syntax error names its line and
// column (in characters), as an editor shows them, not just what
// encoding/json says ("invalid character '}' looking for beginning of
// object key string", with no place).
func TestInvalidJSONPosition(t *testing.T) {
	for _, tt := range []struct {
		name, data, want string
	}{
		{"trailing comma", "{\n  \"xds_servers\": [\n    {\"server_uri\": \"xds:443\",}\n  ]\n}\n",
			"bootstrap: invalid JSON at line 3, column 30: invalid character '}' looking for beginning of object key string"},
		{"first byte", "xds_servers: []",
			"bootstrap: invalid JSON at line 1, column 1: invalid character 'x' looking for beginning of value"},
		{"characters not bytes", "{\"node\": {\"id\": \"nœud-é\" \"x\"}}",
			"bootstrap: invalid JSON at line 1, column 26: invalid character '\"' after object key:value pair"}, // byte 28
		{"cut short", "{\n  \"xds_servers\": [",
			"bootstrap: invalid JSON at line 2, column 18: unexpected end of JSON input"},
		{"empty", " \n\t", "bootstrap: invalid JSON: the document is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bootstrap.Parse([]byte(tt.data))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse(%q) error =\n  %v\nwant\n  %s", tt.data, err, tt.want)
			}
		})
	}
	path := writeFile(t, "{\n  \"xds_servers\": []\n  \"node\": {}\n}")
	_, err := bootstrap.Load(path)
	if want := "bootstrap: " + path + ": invalid JSON at line 3, column 3: invalid character '\"' after object key:value pair"; err == nil || err.Error() != want {
		t.Errorf("Load error =\n  %v\nwant\n  %s", err, want)
	}
}

// TestLoadEmptyPath holds that Load("") says no file was named, not
// "open : no such file or directory".
func TestLoadEmptyPath(t *testing.T) {
	_, err := bootstrap.Load("")
	if err == nil || !strings.Contains(err.Error(), "no file name given") || !strings.Contains(err.Error(), bootstrap.EnvFile) {
		t.Errorf("Load(\"\") error = %v, want it to say no file was named", err)
	}
}

// TestUnknownFieldNamed holds that an error about an object with fields
// goxds does not know names them, with the known field each resembles: a
// misspelt field is the likeliest cause. Fields of other objects are not
// named.
func TestUnknownFieldNamed(t *testing.T) {
	for _, tt := range []struct {
		name, data, want string
	}{
		{"top-level typo", `{"xds_server": [{"server_uri": "xds:443", "channel_creds": [{"type": "insecure"}]}]}`,
			`bootstrap: xds_servers: must list at least one server (unknown field at the top level: "xds_server", did you mean "xds_servers"?)`},
		{"several, one unlike any", `{"XDS_Servers": [], "nodes": {}, "extension": 1}`,
			`bootstrap: xds_servers: must list at least one server (unknown fields at the top level: "XDS_Servers", did you mean "xds_servers"?; "extension"; "nodes", did you mean "node"?)`},
		{"server typo", `{"xds_servers": [{"server_url": "xds:443", "channel_creds": [{"type": "insecure"}]}]}`,
			`bootstrap: xds_servers[0].server_uri: must not be empty (unknown field in xds_servers[0]: "server_url", did you mean "server_uri"?)`},
		{"authority's server typo", `{"xds_servers": [{"server_uri": "xds:443", "channel_creds": [{"type": "insecure"}]}],
			"authorities": {"a.example": {"xds_servers": [{"server_uri": "a:443", "channel_cred": [{"type": "insecure"}]}]}}}`,
			`bootstrap: authorities["a.example"].xds_servers[0].channel_creds: must list at least one of "insecure", "tls", "google_default" (unknown field in authorities["a.example"].xds_servers[0]: "channel_cred", did you mean "channel_creds"?)`},
		{"tls config typo", `{"xds_servers": [{"server_uri": "xds:443", "channel_creds": [{"type": "tls", "config": {"certificate_file": "testdata/tls/cert.pem", "private_key": "k.pem"}}]}]}`,
			`bootstrap: xds_servers[0].channel_creds[0].config.private_key_file: must be set when certificate_file is set (unknown field in xds_servers[0].channel_creds[0].config: "private_key", did you mean "private_key_file"?)`},
		{"elsewhere is not named", `{"xds_server": 1, "xds_servers": [{"server_uri": 443}]}`,
			`bootstrap: xds_servers[0].server_uri: must be a string, got number`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bootstrap.Parse([]byte(tt.data))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse error =\n  %v\nwant\n  %s", err, tt.want)
			}
		})
	}
}

// TestUnknownFieldsListed holds that a valid bootstrap with unknown fields
// loads, as in gRPC, and lists them for tools to warn about; fields gRPC
// reads and goxds ignores on purpose are not listed.
func TestUnknownFieldsListed(t *testing.T) {
	c, err := bootstrap.Parse([]byte(`{"future": 1, "allowed_grpc_services": {},
		"xds_servers": [{"server_uri": "s:1", "server_feature": ["ignore_resource_deletion"], "call_creds": [],
			"channel_creds": [{"type": "insecure", "extra": true}]}],
		"node": {"id": "n", "user_agent_name": "x", "locality": {"zon": "z"}},
		"authorities": {"a": {"xds_server": []}},
		"certificate_providers": {"p": {"plugin": "file_watcher"}}}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []string{
		`authorities["a"].xds_server`, `certificate_providers["p"].plugin`, "future", "node.locality.zon",
		"xds_servers[0].channel_creds[0].extra", "xds_servers[0].server_feature",
	}
	if !slices.Equal(c.UnknownFields, want) {
		t.Errorf("UnknownFields =\n  %q\nwant\n  %q", c.UnknownFields, want)
	}
}
