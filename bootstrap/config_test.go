package bootstrap_test

import (
	"strings"
	"testing"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/goxds/xds/bootstrap"
)

func insecureServer(uri string) bootstrap.ServerConfig {
	return bootstrap.ServerConfig{ServerURI: uri, ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}}}
}

func TestValidateGoConfig(t *testing.T) {
	valid := func() *bootstrap.Config {
		return &bootstrap.Config{
			Servers: []bootstrap.ServerConfig{insecureServer("xds:443")},
			Authorities: map[string]bootstrap.Authority{
				"a": {ClientListenerResourceNameTemplate: "xdstp://a/l/%s", Servers: []bootstrap.ServerConfig{insecureServer("a:443")}},
				"b": {},
			},
			CertificateProviders: map[string]bootstrap.CertificateProvider{"p": {PluginName: "file_watcher", Config: []byte(`{"ca_certificate_file":"/ca.pem"}`)}},
		}
	}
	tests := []struct {
		name   string
		modify func(c *bootstrap.Config)
		want   string // empty: valid
	}{
		{"valid", func(*bootstrap.Config) {}, ""},
		{"zero template is fine", func(c *bootstrap.Config) { c.ClientDefaultListenerResourceNameTemplate = "" }, ""},
		{"delta", func(c *bootstrap.Config) { c.Servers[0].APIType = bootstrap.APITypeAggregatedDeltaGRPC }, ""},
		{"tls struct", func(c *bootstrap.Config) {
			c.Servers[0].ChannelCreds = []bootstrap.ChannelCreds{{Type: "tls", TLS: &bootstrap.TLSCreds{CACertificateFile: "/ca"}}}
		}, ""},
		{"no servers", func(c *bootstrap.Config) { c.Servers = nil }, "xds_servers: must list at least one server"},
		{"empty uri", func(c *bootstrap.Config) { c.Servers = append(c.Servers, insecureServer("")) },
			"xds_servers[1].server_uri: must not be empty"},
		{"no creds", func(c *bootstrap.Config) { c.Servers[0].ChannelCreds = nil },
			"xds_servers[0].channel_creds: must list at least one of"},
		{"per-type sotw", func(c *bootstrap.Config) { c.Servers[0].APIType = bootstrap.APITypeGRPC }, ""},
		{"per-type delta", func(c *bootstrap.Config) { c.Servers[0].APIType = bootstrap.APITypeDeltaGRPC }, ""},
		{"out of range api type", func(c *bootstrap.Config) { c.Servers[0].APIType = 42 },
			"xds_servers[0].api_type: unknown value APIType(42)"},
		{"tls key without cert", func(c *bootstrap.Config) {
			c.Servers[0].ChannelCreds = []bootstrap.ChannelCreds{{Type: "tls", TLS: &bootstrap.TLSCreds{PrivateKeyFile: "/k"}}}
		}, "xds_servers[0].channel_creds[0].config.certificate_file: must be set when private_key_file is set"},
		{"tls negative refresh", func(c *bootstrap.Config) {
			c.Servers[0].ChannelCreds = []bootstrap.ChannelCreds{{Type: "tls", TLS: &bootstrap.TLSCreds{RefreshInterval: -time.Second}}}
		}, "xds_servers[0].channel_creds[0].config.refresh_interval: must not be negative"},
		{"tls raw config wrong type", func(c *bootstrap.Config) {
			c.Servers[0].ChannelCreds = []bootstrap.ChannelCreds{{Type: "x"}, {Type: "tls", Config: []byte(`{"certificate_file": 1}`)}}
		}, "xds_servers[0].channel_creds[1].config.certificate_file: must be a string, got number"},
		{"tls raw config not JSON", func(c *bootstrap.Config) {
			c.Servers[0].ChannelCreds = []bootstrap.ChannelCreds{{Type: "tls", Config: []byte(`{`)}}
		}, "xds_servers[0].channel_creds[0].config: "},
		{"authority template", func(c *bootstrap.Config) {
			c.Authorities["a"] = bootstrap.Authority{ClientListenerResourceNameTemplate: "xdstp://b/%s"}
		}, `authorities["a"].client_listener_resource_name_template: "xdstp://b/%s" must start with "xdstp://a/"`},
		{"authority server", func(c *bootstrap.Config) {
			c.Authorities["b"] = bootstrap.Authority{Servers: []bootstrap.ServerConfig{{ServerURI: "b:1"}}}
		}, `authorities["b"].xds_servers[0].channel_creds: must list at least one of`},
		{"certificate provider config", func(c *bootstrap.Config) {
			c.CertificateProviders["p"] = bootstrap.CertificateProvider{PluginName: "x", Config: []byte("{")}
		}, `certificate_providers["p"].config: not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.modify(c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "bootstrap: ") {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	var nilConfig *bootstrap.Config
	if err := nilConfig.Validate(); err == nil {
		t.Error("Validate() on a nil config succeeded")
	}
}

func TestServerKey(t *testing.T) {
	base := func() bootstrap.ServerConfig {
		return bootstrap.ServerConfig{
			ServerURI:      "xds:443",
			ChannelCreds:   []bootstrap.ChannelCreds{{Type: "mystery"}, {Type: "tls", TLS: &bootstrap.TLSCreds{CACertificateFile: "testdata/tls/ca.pem"}}},
			ServerFeatures: []string{"xds_v3", "ignore_resource_deletion"},
		}
	}
	tests := []struct {
		name   string
		modify func(s *bootstrap.ServerConfig)
		same   bool
	}{
		{"identical", func(*bootstrap.ServerConfig) {}, true},
		{"features reordered and repeated", func(s *bootstrap.ServerConfig) {
			s.ServerFeatures = []string{"ignore_resource_deletion", "xds_v3", "xds_v3"}
		}, true},
		{"entries after the selected one", func(s *bootstrap.ServerConfig) {
			s.ChannelCreds = append(s.ChannelCreds, bootstrap.ChannelCreds{Type: "insecure"})
		}, true},
		{"unsupported entries before it", func(s *bootstrap.ServerConfig) { s.ChannelCreds = s.ChannelCreds[1:] }, true},
		{"tls given as raw config", func(s *bootstrap.ServerConfig) {
			s.ChannelCreds[1] = bootstrap.ChannelCreds{Type: "tls", Config: []byte(`{"ca_certificate_file": "testdata/tls/ca.pem"}`)}
		}, true},
		{"uri", func(s *bootstrap.ServerConfig) { s.ServerURI = "xds:444" }, false},
		{"creds type", func(s *bootstrap.ServerConfig) { s.ChannelCreds[1] = bootstrap.ChannelCreds{Type: "insecure"} }, false},
		{"ca file", func(s *bootstrap.ServerConfig) {
			s.ChannelCreds[1].TLS = &bootstrap.TLSCreds{CACertificateFile: "/other"}
		}, false},
		{"client cert", func(s *bootstrap.ServerConfig) {
			s.ChannelCreds[1].TLS = &bootstrap.TLSCreds{CACertificateFile: "/ca", CertificateFile: "/c", PrivateKeyFile: "/k"}
		}, false},
		{"features", func(s *bootstrap.ServerConfig) { s.ServerFeatures = []string{"xds_v3"} }, false},
		{"api type", func(s *bootstrap.ServerConfig) { s.APIType = bootstrap.APITypeAggregatedDeltaGRPC }, false},
		{"uri that looks like a separator", func(s *bootstrap.ServerConfig) { s.ServerURI = `xds:443";"tls` }, false},
	}
	want := base().Key()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.modify(&s)
			if got := s.Key(); (got == want) != tt.same {
				t.Errorf("Key() = %s, base = %s, want equal = %v", got, want, tt.same)
			}
		})
	}
	parsed, err := bootstrap.Parse([]byte(`{"xds_servers": [{"server_uri": "xds:443",
		"channel_creds": [{"type": "mystery"}, {"type": "tls", "config": {"ca_certificate_file": "testdata/tls/ca.pem"}}],
		"server_features": ["xds_v3", "ignore_resource_deletion"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := parsed.Servers[0].Key(); got != want {
		t.Errorf("parsed Key() = %s, want %s", got, want)
	}
}

func TestServerString(t *testing.T) {
	s := bootstrap.ServerConfig{
		ServerURI:      "xds.example.com:443",
		ChannelCreds:   []bootstrap.ChannelCreds{{Type: "tls", TLS: &bootstrap.TLSCreds{PrivateKeyFile: "/secret.key"}}},
		ServerFeatures: []string{"xds_v3", "trusted_xds_server"},
		APIType:        bootstrap.APITypeAggregatedDeltaGRPC,
	}
	want := "xds.example.com:443 [creds=tls api_type=AGGREGATED_DELTA_GRPC features=xds_v3,trusted_xds_server]"
	if got := s.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (bootstrap.ServerConfig{ServerURI: "s:1"}).String(); got != "s:1 [creds=none api_type=AGGREGATED_GRPC]" {
		t.Errorf("String() = %q", got)
	}
}

func TestAPITypeString(t *testing.T) {
	for typ, want := range map[bootstrap.APIType]string{
		bootstrap.APITypeAggregatedGRPC:      "AGGREGATED_GRPC",
		bootstrap.APITypeAggregatedDeltaGRPC: "AGGREGATED_DELTA_GRPC",
		bootstrap.APITypeGRPC:                "GRPC",
		bootstrap.APITypeDeltaGRPC:           "DELTA_GRPC",
		bootstrap.APITypeREST:                "REST",
		-1:                                   "APIType(-1)",
		99:                                   "APIType(99)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("APIType(%d).String() = %q, want %q", int(typ), got, want)
		}
	}
}

func TestListenerResourceName(t *testing.T) {
	tests := []struct {
		template, target, want string
	}{
		{"", "foo.example.com:8080", "foo.example.com:8080"},
		{"%s", "[::1]:8080", "[::1]:8080"},
		{"/listeners/%s", "[::1]:8080", "/listeners/[::1]:8080"},
		{"fixed-name", "anything", "fixed-name"},
		{"xdstp://auth/envoy.config.listener.v3.Listener/%s", "svc.ns:8080", "xdstp://auth/envoy.config.listener.v3.Listener/svc.ns:8080"},
		{"xdstp://auth/l/%s", "[::1]:8080", "xdstp://auth/l/%5B::1%5D:8080"},
		{"xdstp://auth/l/%s", "my/service/name", "xdstp://auth/l/my/service/name"},
		{"xdstp://auth/l/%s", "a b?c#d%", "xdstp://auth/l/a%20b%3Fc%23d%25"},
		{"xdstp://auth/l/%s/%s", "x y", "xdstp://auth/l/x%20y/x%20y"},
	}
	for _, tt := range tests {
		c := &bootstrap.Config{ClientDefaultListenerResourceNameTemplate: tt.template}
		if got := c.ListenerResourceName(tt.target); got != tt.want {
			t.Errorf("template %q: ListenerResourceName(%q) = %q, want %q", tt.template, tt.target, got, tt.want)
		}
	}
}

func TestAuthorityListenerResourceName(t *testing.T) {
	c := &bootstrap.Config{Authorities: map[string]bootstrap.Authority{
		"td.example.com": {},
		"with space":     {},
		"custom":         {ClientListenerResourceNameTemplate: "xdstp://custom/listeners/%s"},
	}}
	tests := []struct {
		authority, target, want string
		ok                      bool
	}{
		{"td.example.com", "svc:80", "xdstp://td.example.com/envoy.config.listener.v3.Listener/svc:80", true},
		{"td.example.com", "[::1]:80", "xdstp://td.example.com/envoy.config.listener.v3.Listener/%5B::1%5D:80", true},
		{"with space", "svc", "xdstp://with%20space/envoy.config.listener.v3.Listener/svc", true},
		{"custom", "a/b c", "xdstp://custom/listeners/a/b%20c", true},
		{"unknown", "svc", "", false},
	}
	for _, tt := range tests {
		got, ok := c.AuthorityListenerResourceName(tt.authority, tt.target)
		if got != tt.want || ok != tt.ok {
			t.Errorf("AuthorityListenerResourceName(%q, %q) = %q, %v, want %q, %v", tt.authority, tt.target, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNodeProto(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{"ISTIO_VERSION": "1.24", "labels": map[string]any{"app": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	n := bootstrap.Node{
		ID:       "node-1",
		Cluster:  "cluster-1",
		Locality: bootstrap.Locality{Region: "us-central1", Zone: "us-central1-a", SubZone: "rack7"},
		Metadata: md,
	}
	features := []string{"xds.config.resource-in-sotw", "xds.config.supports-resource-ttl"}
	got := n.Proto(features)
	want := &corepb.Node{
		Id:                   "node-1",
		Cluster:              "cluster-1",
		Locality:             &corepb.Locality{Region: "us-central1", Zone: "us-central1-a", SubZone: "rack7"},
		Metadata:             md,
		UserAgentName:        "goxds",
		UserAgentVersionType: &corepb.Node_UserAgentVersion{UserAgentVersion: bootstrap.Version},
		ClientFeatures:       features,
	}
	if !proto.Equal(got, want) {
		t.Fatalf("Proto() = %v, want %v", got, want)
	}
	// The result must not share memory with its inputs.
	features[0] = "changed"
	md.Fields["ISTIO_VERSION"] = structpb.NewStringValue("changed")
	if got.GetClientFeatures()[0] == "changed" || got.GetMetadata().GetFields()["ISTIO_VERSION"].GetStringValue() == "changed" {
		t.Error("Proto() result shares memory with its inputs")
	}

	empty := bootstrap.Node{}.Proto(nil)
	if empty.GetLocality() != nil || empty.GetMetadata() != nil || len(empty.GetClientFeatures()) != 0 {
		t.Errorf("Proto() of an empty node = %v", empty)
	}
	if empty.GetUserAgentName() != bootstrap.UserAgentName || empty.GetUserAgentVersion() != bootstrap.Version {
		t.Errorf("Proto() user agent = %q %q", empty.GetUserAgentName(), empty.GetUserAgentVersion())
	}
}

func TestServerListenerResourceName(t *testing.T) {
	tests := []struct {
		template, addr, want string
	}{
		{"grpc/server?xds.resource.listening_address=%s", "0.0.0.0:8080", "grpc/server?xds.resource.listening_address=0.0.0.0:8080"},
		{"grpc/server?xds.resource.listening_address=%s", "[::]:8080", "grpc/server?xds.resource.listening_address=[::]:8080"},
		{"xdstp://auth/envoy.config.listener.v3.Listener/grpc/server/%s", "[::]:8080", "xdstp://auth/envoy.config.listener.v3.Listener/grpc/server/%5B::%5D:8080"},
		{"fixed", "127.0.0.1:1", "fixed"},
	}
	for _, tt := range tests {
		c := &bootstrap.Config{ServerListenerResourceNameTemplate: tt.template}
		if got, ok := c.ServerListenerResourceName(tt.addr); !ok || got != tt.want {
			t.Errorf("template %q: ServerListenerResourceName(%q) = %q, %v; want %q", tt.template, tt.addr, got, ok, tt.want)
		}
	}
	if _, ok := (&bootstrap.Config{}).ServerListenerResourceName("127.0.0.1:1"); ok {
		t.Error("no template: ok, want false")
	}
}
