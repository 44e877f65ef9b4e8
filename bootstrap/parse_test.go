package bootstrap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
)

// okServer is a minimal valid server object, for cases about other fields.
const okServer = `{"server_uri": "xds.example.com:443", "channel_creds": [{"type": "insecure"}]}`

// withServer returns a bootstrap with okServer and the given extra top-level
// members (a JSON fragment starting with a comma, or empty).
func withServer(extra string) string {
	return `{"xds_servers": [` + okServer + `]` + extra + `}`
}

// withCreds returns a bootstrap whose only server has the given channel_creds.
func withCreds(creds string) string {
	return `{"xds_servers": [{"server_uri": "s:1", "channel_creds": ` + creds + `}]}`
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		check func(t *testing.T, c *bootstrap.Config)
	}{
		{"minimal insecure", withServer(""), func(t *testing.T, c *bootstrap.Config) {
			s := c.Servers[0]
			if s.ServerURI != "xds.example.com:443" || s.SelectedCreds().Type != "insecure" ||
				s.APIType != bootstrap.APITypeAggregatedGRPC {
				t.Errorf("server = %+v", s)
			}
			if c.ClientDefaultListenerResourceNameTemplate != "%s" {
				t.Errorf("default template = %q, want %%s", c.ClientDefaultListenerResourceNameTemplate)
			}
		}},
		{"servers keep their order", `{"xds_servers": [
			{"server_uri": "first:1", "channel_creds": [{"type": "insecure"}]},
			{"server_uri": "second:1", "channel_creds": [{"type": "insecure"}]}]}`,
			func(t *testing.T, c *bootstrap.Config) {
				if len(c.Servers) != 2 || c.Servers[0].ServerURI != "first:1" || c.Servers[1].ServerURI != "second:1" {
					t.Errorf("servers = %v", c.Servers)
				}
			}},
		{"tls with every field", withCreds(`[{"type": "tls", "config": {
			"ca_certificate_file": "testdata/tls/ca.pem", "certificate_file": "testdata/tls/cert.pem",
			"private_key_file": "testdata/tls/key.pem", "refresh_interval": "600s"}}]`),
			func(t *testing.T, c *bootstrap.Config) {
				got := c.Servers[0].SelectedCreds().TLS
				want := bootstrap.TLSCreds{CACertificateFile: "testdata/tls/ca.pem", CertificateFile: "testdata/tls/cert.pem",
					PrivateKeyFile: "testdata/tls/key.pem", RefreshInterval: 10 * time.Minute}
				if got == nil || *got != want {
					t.Errorf("TLS = %+v, want %+v", got, want)
				}
			}},
		{"tls without config", withCreds(`[{"type": "tls"}]`), func(t *testing.T, c *bootstrap.Config) {
			if got := c.Servers[0].SelectedCreds().TLS; got == nil || *got != (bootstrap.TLSCreds{}) {
				t.Errorf("TLS = %+v, want empty", got)
			}
		}},
		{"tls fractional refresh interval", withCreds(`[{"type": "tls", "config": {"refresh_interval": "1.5s"}}]`),
			func(t *testing.T, c *bootstrap.Config) {
				if got := c.Servers[0].SelectedCreds().TLS.RefreshInterval; got != 1500*time.Millisecond {
					t.Errorf("RefreshInterval = %v", got)
				}
			}},
		{"unsupported creds skipped", withCreds(`[{"type": "mystery"}, {"type": "insecure"}, {"type": "tls"}]`),
			func(t *testing.T, c *bootstrap.Config) {
				s := c.Servers[0]
				if s.SelectedCreds().Type != "insecure" || len(s.ChannelCreds) != 3 {
					t.Errorf("selected %q of %v", s.SelectedCreds().Type, s.ChannelCreds)
				}
			}},
		{"creds after the selected one are not interpreted", withCreds(`[{"type": "insecure"}, {"type": "tls", "config": [1]}]`),
			func(t *testing.T, c *bootstrap.Config) {
				if got := string(c.Servers[0].ChannelCreds[1].Config); got != "[1]" {
					t.Errorf("kept config = %s", got)
				}
			}},
		{"unsupported creds config kept compacted", withCreds(`[{"type": "mystery", "config": { "a" : 1 }}, {"type": "insecure"}]`),
			func(t *testing.T, c *bootstrap.Config) {
				if got := string(c.Servers[0].ChannelCreds[0].Config); got != `{"a":1}` {
					t.Errorf("kept config = %s", got)
				}
			}},
		{"server features", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
			"server_features": ["xds_v3", "ignore_resource_deletion", "trusted_xds_server", "future_thing"]}]}`,
			func(t *testing.T, c *bootstrap.Config) {
				s := c.Servers[0]
				if !s.IgnoreResourceDeletion() || !s.TrustedXDSServer() || len(s.ServerFeatures) != 4 {
					t.Errorf("features = %v", s.ServerFeatures)
				}
			}},
		{"no features", withServer(""), func(t *testing.T, c *bootstrap.Config) {
			if s := c.Servers[0]; s.IgnoreResourceDeletion() || s.TrustedXDSServer() {
				t.Errorf("features = %v", s.ServerFeatures)
			}
		}},
		{"api type delta", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
			"api_type": "AGGREGATED_DELTA_GRPC"}]}`, func(t *testing.T, c *bootstrap.Config) {
			if got := c.Servers[0].APIType; got != bootstrap.APITypeAggregatedDeltaGRPC {
				t.Errorf("APIType = %v", got)
			}
		}},
		{"api type sotw explicit", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
			"api_type": "AGGREGATED_GRPC"}]}`, func(t *testing.T, c *bootstrap.Config) {
			if got := c.Servers[0].APIType; got != bootstrap.APITypeAggregatedGRPC {
				t.Errorf("APIType = %v", got)
			}
		}},
		{"api type null is the default", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
			"api_type": null}]}`, func(t *testing.T, c *bootstrap.Config) {
			if got := c.Servers[0].APIType; got != bootstrap.APITypeAggregatedGRPC {
				t.Errorf("APIType = %v", got)
			}
		}},
		{"node", withServer(`, "node": {"id": "n1", "cluster": "c1",
			"locality": {"region": "r", "zone": "z", "sub_zone": "sz"},
			"metadata": {"a": "b", "n": 1.5, "nested": {"list": [true, null]}},
			"user_agent_name": "ignored", "user_agent_version": "ignored", "client_features": ["x"]}`),
			func(t *testing.T, c *bootstrap.Config) {
				n := c.Node
				if n.ID != "n1" || n.Cluster != "c1" || n.Locality != (bootstrap.Locality{Region: "r", Zone: "z", SubZone: "sz"}) {
					t.Errorf("node = %+v", n)
				}
				f := n.Metadata.GetFields()
				if f["a"].GetStringValue() != "b" || f["n"].GetNumberValue() != 1.5 ||
					!f["nested"].GetStructValue().GetFields()["list"].GetListValue().GetValues()[0].GetBoolValue() {
					t.Errorf("metadata = %v", n.Metadata)
				}
				if p := n.Proto(nil); p.GetUserAgentName() != bootstrap.UserAgentName {
					t.Errorf("user agent = %q", p.GetUserAgentName())
				}
			}},
		{"null node", withServer(`, "node": null`), func(t *testing.T, c *bootstrap.Config) {
			if c.Node.ID != "" || c.Node.Metadata != nil {
				t.Errorf("node = %+v", c.Node)
			}
		}},
		{"authorities", withServer(`, "authorities": {
			"a.example.com": {"client_listener_resource_name_template": "xdstp://a.example.com/envoy.config.listener.v3.Listener/%s",
				"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}]}]},
			"empty": {},
			"no-servers": {"xds_servers": []}}`),
			func(t *testing.T, c *bootstrap.Config) {
				if got, ok := c.ServersForAuthority("a.example.com"); !ok || got[0].ServerURI != "a:1" {
					t.Errorf("a.example.com servers = %v, %v", got, ok)
				}
				for _, name := range []string{"empty", "no-servers"} {
					if got, ok := c.ServersForAuthority(name); !ok || got[0].ServerURI != "xds.example.com:443" {
						t.Errorf("%s servers = %v, %v", name, got, ok)
					}
				}
				if _, ok := c.ServersForAuthority("unknown"); ok {
					t.Error("unknown authority found")
				}
			}},
		{"authority name escaped in template", withServer(`, "authorities": {
			"a b": {"client_listener_resource_name_template": "xdstp://a%20b/l/%s"}}`),
			func(t *testing.T, c *bootstrap.Config) {
				if _, ok := c.Authorities["a b"]; !ok {
					t.Errorf("authorities = %v", c.Authorities)
				}
			}},
		{"templates", withServer(`, "client_default_listener_resource_name_template": "xdstp://a/l/%s",
			"server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%s"`),
			func(t *testing.T, c *bootstrap.Config) {
				if c.ClientDefaultListenerResourceNameTemplate != "xdstp://a/l/%s" ||
					c.ServerListenerResourceNameTemplate != "grpc/server?xds.resource.listening_address=%s" {
					t.Errorf("templates = %q, %q", c.ClientDefaultListenerResourceNameTemplate, c.ServerListenerResourceNameTemplate)
				}
			}},
		{"certificate providers", withServer(`, "certificate_providers": {
			"default": {"plugin_name": "file_watcher", "config": { "certificate_file": "/c.pem", "private_key_file": "/k.pem" }}}`),
			func(t *testing.T, c *bootstrap.Config) {
				p := c.CertificateProviders["default"]
				if p.PluginName != "file_watcher" || string(p.Config) != `{"certificate_file":"/c.pem","private_key_file":"/k.pem"}` {
					t.Errorf("provider = %+v (config %s)", p, p.Config)
				}
			}},
		{"unknown fields ignored", `{"future": 1, "xds_servers": [{"server_uri": "s:1", "whatever": [],
			"channel_creds": [{"type": "tls", "config": {"spiffe_trust_bundle_map_file": "/x"}, "extra": true}],
			"call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/t", "future": 1}}, {"type": "future"}]}], "node": {"weird": {}}, "authorities": {"a": {"x": 1}}}`,
			func(t *testing.T, c *bootstrap.Config) {
				if c.Servers[0].SelectedCreds().Type != "tls" {
					t.Errorf("server = %+v", c.Servers[0])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := bootstrap.Parse([]byte(tt.json))
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() of parsed config = %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string // the error must contain this, which starts with the field path
	}{
		{"empty input", ``, "invalid JSON"},
		{"not JSON", `{"xds_servers": [}`, "invalid JSON"},
		{"trailing data", withServer("") + ` {}`, "invalid JSON"},
		{"top level array", `[]`, "bootstrap: must be a JSON object, got array"},
		{"no servers", `{}`, "xds_servers: must list at least one server"},
		{"empty servers", `{"xds_servers": []}`, "xds_servers: must list at least one server"},
		{"servers object", `{"xds_servers": {}}`, "xds_servers: must be a JSON array, got object"},
		{"server a string", `{"xds_servers": ["s:1"]}`, "xds_servers[0]: must be a JSON object, got string"},
		{"server null", `{"xds_servers": [null]}`, "xds_servers[0]: must be a JSON object, got null"},
		{"server_uri empty", `{"xds_servers": [{"server_uri": "", "channel_creds": [{"type": "insecure"}]}]}`,
			"xds_servers[0].server_uri: must not be empty"},
		{"server_uri number", `{"xds_servers": [{"server_uri": 443, "channel_creds": [{"type": "insecure"}]}]}`,
			"xds_servers[0].server_uri: must be a string, got number"},
		{"second server_uri missing", `{"xds_servers": [` + okServer + `, {"channel_creds": [{"type": "insecure"}]}]}`,
			"xds_servers[1].server_uri: must not be empty"},
		{"channel_creds missing", `{"xds_servers": [{"server_uri": "s:1"}]}`,
			"xds_servers[0].channel_creds: must list at least one of"},
		{"channel_creds empty", withCreds(`[]`), "xds_servers[0].channel_creds: must list at least one of"},
		{"insecure config a number", withCreds(`[{"type": "insecure", "config": 5}]`),
			"xds_servers[0].channel_creds[0].config: must be a JSON object, got number"},
		{"tls config a string", withCreds(`[{"type": "mystery"}, {"type": "tls", "config": "ca.pem"}]`),
			"xds_servers[0].channel_creds[1].config: must be a JSON object, got string"},
		{"channel_creds none supported", withCreds(`[{"type": "mystery"}, {"type": "mtls"}]`),
			`xds_servers[0].channel_creds: no supported type in ["mystery" "mtls"]`},
		{"channel_creds object", withCreds(`{"type": "insecure"}`), "xds_servers[0].channel_creds: must be a JSON array, got object"},
		{"channel_creds entry string", withCreds(`["insecure"]`), "xds_servers[0].channel_creds[0]: must be a JSON object, got string"},
		{"creds type number", withCreds(`[{"type": 1}]`), "xds_servers[0].channel_creds[0].type: must be a string, got number"},
		{"tls config array", withCreds(`[{"type": "mystery"}, {"type": "tls", "config": []}]`),
			"xds_servers[0].channel_creds[1].config: must be a JSON object, got array"},
		{"tls cert without key", withCreds(`[{"type": "tls", "config": {"certificate_file": "/c"}}]`),
			"xds_servers[0].channel_creds[0].config.private_key_file: must be set when certificate_file is set"},
		{"tls key without cert", withCreds(`[{"type": "tls", "config": {"private_key_file": "/k"}}]`),
			"xds_servers[0].channel_creds[0].config.certificate_file: must be set when private_key_file is set"},
		{"tls ca number", withCreds(`[{"type": "tls", "config": {"ca_certificate_file": 7}}]`),
			"xds_servers[0].channel_creds[0].config.ca_certificate_file: must be a string, got number"},
		{"refresh interval words", withCreds(`[{"type": "tls", "config": {"refresh_interval": "ten minutes"}}]`),
			"xds_servers[0].channel_creds[0].config.refresh_interval: invalid duration"},
		{"refresh interval number", withCreds(`[{"type": "tls", "config": {"refresh_interval": 600}}]`),
			"xds_servers[0].channel_creds[0].config.refresh_interval: must be a string, got number"},
		{"refresh interval negative", withCreds(`[{"type": "tls", "config": {"refresh_interval": "-5s"}}]`),
			"xds_servers[0].channel_creds[0].config.refresh_interval: must not be negative"},
		{"server_features object", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "server_features": {}}]}`,
			"xds_servers[0].server_features: must be a JSON array, got object"},
		{"server_features number", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3", 3]}]}`,
			"xds_servers[0].server_features[1]: must be a string, got number"},
		{"api_type unknown", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type": "ADS"}]}`,
			`xds_servers[0].api_type: unknown value "ADS"`},
		{"api_type lower case", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type": "aggregated_grpc"}]}`,
			`xds_servers[0].api_type: unknown value "aggregated_grpc"`},
		{"api_type empty", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type": ""}]}`,
			`xds_servers[0].api_type: unknown value ""`},
		{"api_type number", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type": 5}]}`,
			"xds_servers[0].api_type: must be a string, got number"},
		{"api_type REST with a gRPC target", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type": "REST"}]}`,
			`xds_servers[0].server_uri: "s:1" is not an http:// or https:// URL, which REST needs`},
		{"api_type_per_type array", `{"xds_servers": [` + okServer + `, {"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type_per_type": []}]}`,
			"xds_servers[1].api_type_per_type: must be a JSON object, got array"},
		{"api_type_per_type unknown", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type_per_type": {"type.googleapis.com/x.Y": "ADS"}}]}`,
			`xds_servers[0].api_type_per_type["type.googleapis.com/x.Y"]: unknown value "ADS"`},
		{"resource_files number", `{"xds_servers": [{"server_uri": "/d", "api_type": "FILESYSTEM", "resource_files": {"type.googleapis.com/x.Y": 1}}]}`,
			`xds_servers[0].resource_files["type.googleapis.com/x.Y"]: must be a string, got number`},
		{"refresh_delay garbage", `{"xds_servers": [{"server_uri": "http://h", "channel_creds": [{"type": "insecure"}], "api_type": "REST", "refresh_delay": "soon"}]}`,
			`xds_servers[0].refresh_delay: invalid duration "soon"`},
		{"request_timeout number", `{"xds_servers": [{"server_uri": "http://h", "channel_creds": [{"type": "insecure"}], "api_type": "REST", "request_timeout": 5}]}`,
			`xds_servers[0].request_timeout: must be a string, got number`},
		{"node string", withServer(`, "node": "n1"`), "node: must be a JSON object, got string"},
		{"node id number", withServer(`, "node": {"id": 1}`), "node.id: must be a string, got number"},
		{"node cluster array", withServer(`, "node": {"cluster": []}`), "node.cluster: must be a string, got array"},
		{"node locality string", withServer(`, "node": {"locality": "us"}`), "node.locality: must be a JSON object, got string"},
		{"node locality zone bool", withServer(`, "node": {"locality": {"zone": true}}`), "node.locality.zone: must be a string, got boolean"},
		{"node metadata array", withServer(`, "node": {"metadata": [1]}`), "node.metadata: must be a JSON object, got array"},
		{"node metadata string", withServer(`, "node": {"metadata": "k=v"}`), "node.metadata: must be a JSON object, got string"},
		{"node metadata bad utf8", withServer(`, "node": {"metadata": {"k": "` + "\xff" + `"}}`), "node.metadata: "},
		{"authorities array", withServer(`, "authorities": []`), "authorities: must be a JSON object, got array"},
		{"authority null", withServer(`, "authorities": {"a": null}`), `authorities["a"]: must be a JSON object, got null`},
		{"authority template wrong host", withServer(`, "authorities": {"a": {"client_listener_resource_name_template": "xdstp://b/l/%s"}}`),
			`authorities["a"].client_listener_resource_name_template: "xdstp://b/l/%s" must start with "xdstp://a/"`},
		{"authority template not xdstp", withServer(`, "authorities": {"a": {"client_listener_resource_name_template": "%s"}}`),
			`authorities["a"].client_listener_resource_name_template: "%s" must start with "xdstp://a/"`},
		{"authority template longer host", withServer(`, "authorities": {"a": {"client_listener_resource_name_template": "xdstp://ab/l/%s"}}`),
			`authorities["a"].client_listener_resource_name_template`},
		{"authority template unescaped name", withServer(`, "authorities": {"a/b": {"client_listener_resource_name_template": "xdstp://a/b/l/%s"}}`),
			`authorities["a/b"].client_listener_resource_name_template: "xdstp://a/b/l/%s" must start with "xdstp://a%2Fb/"`},
		{"authority template number", withServer(`, "authorities": {"a": {"client_listener_resource_name_template": 1}}`),
			`authorities["a"].client_listener_resource_name_template: must be a string, got number`},
		{"authority server invalid", withServer(`, "authorities": {"a": {"xds_servers": [{"server_uri": "", "channel_creds": [{"type": "insecure"}]}]}}`),
			`authorities["a"].xds_servers[0].server_uri: must not be empty`},
		{"authority servers object", withServer(`, "authorities": {"a": {"xds_servers": {}}}`),
			`authorities["a"].xds_servers: must be a JSON array, got object`},
		{"authority server api type", withServer(`, "authorities": {"a": {"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}], "api_type": "REST"}]}}`),
			`authorities["a"].xds_servers[0].server_uri: "a:1" is not an http:// or https:// URL`},
		{"client default template number", withServer(`, "client_default_listener_resource_name_template": 1`),
			"client_default_listener_resource_name_template: must be a string, got number"},
		{"server template bool", withServer(`, "server_listener_resource_name_template": false`),
			"server_listener_resource_name_template: must be a string, got boolean"},
		{"certificate providers array", withServer(`, "certificate_providers": []`),
			"certificate_providers: must be a JSON object, got array"},
		{"certificate provider string", withServer(`, "certificate_providers": {"p": "file_watcher"}`),
			`certificate_providers["p"]: must be a JSON object, got string`},
		{"certificate provider plugin number", withServer(`, "certificate_providers": {"p": {"plugin_name": 1}}`),
			`certificate_providers["p"].plugin_name: must be a string, got number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := bootstrap.Parse([]byte(tt.json))
			if err == nil {
				t.Fatalf("Parse() = %+v, want error containing %q", c, tt.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("Parse() error = %q, want it to contain %q", msg, tt.want)
			}
			if !strings.HasPrefix(msg, "bootstrap: ") {
				t.Errorf("Parse() error = %q, want the bootstrap: prefix", msg)
			}
			if strings.HasSuffix(msg, ".") || strings.HasSuffix(msg, "!") {
				t.Errorf("Parse() error = %q ends with punctuation", msg)
			}
		})
	}
}
