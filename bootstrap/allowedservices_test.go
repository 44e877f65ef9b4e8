package bootstrap_test

import (
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
)

// withAllowed returns a bootstrap with okServer and the given
// allowed_grpc_services.
func withAllowed(services string) string {
	return withServer(`, "allowed_grpc_services": ` + services)
}

func TestAllowedGRPCServicesParse(t *testing.T) {
	c, err := bootstrap.Parse([]byte(withAllowed(`{
		"dns:///ratelimit.example.org:443": {
			"channel_creds": [{"type": "mystery"}, {"type": "tls", "config": {"ca_certificate_file": "/ca.pem"}}],
			"call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/token"}}, {"type": "future"}]},
		"xds:///authz": {"channel_creds": [{"type": "google_default"}]},
		"unix:///run/proc.sock": {"channel_creds": [{"type": "insecure"}], "future_field": 1}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.AllowedGRPCServices) != 3 {
		t.Fatalf("AllowedGRPCServices = %+v, want 3 entries", c.AllowedGRPCServices)
	}
	s, ok := c.AllowedGRPCService("dns:///ratelimit.example.org:443")
	if !ok || s.Target != "dns:///ratelimit.example.org:443" || len(s.ChannelCreds) != 2 || s.ChannelCreds[1].TLS == nil ||
		s.ChannelCreds[1].TLS.CACertificateFile != "/ca.pem" || len(s.CallCreds) != 2 || s.CallCreds[0].JWT.TokenFile != "/token" {
		t.Errorf("AllowedGRPCService(ratelimit) = %+v, %v", s, ok)
	}
	if _, ok := c.AllowedGRPCService("dns:///other:443"); ok {
		t.Error("AllowedGRPCService(a target not listed) = ok")
	}
	// Looked up as written: the same service spelt otherwise is not listed.
	if _, ok := c.AllowedGRPCService("ratelimit.example.org:443"); ok {
		t.Error("AllowedGRPCService(the target without its scheme) = ok")
	}

	// An absent field is an empty map, and is valid.
	c, err = bootstrap.Parse([]byte(withServer("")))
	if err != nil || len(c.AllowedGRPCServices) != 0 {
		t.Errorf("no allowed_grpc_services: %+v, %v", c.AllowedGRPCServices, err)
	}
}

func TestAllowedGRPCServicesParseErrors(t *testing.T) {
	const jwt = `{"type": "jwt_token_file", "config": {"jwt_token_file": "/t"}}`
	for _, tc := range []struct{ name, services, want string }{
		{"not an object", `[]`, "allowed_grpc_services: must be a JSON object, got array"},
		{"entry null", `{"dns:///x": null}`, `allowed_grpc_services["dns:///x"]: must be a JSON object, got null`},
		{"no channel_creds", `{"dns:///x": {}}`,
			`allowed_grpc_services["dns:///x"].channel_creds: must list at least one of "insecure", "tls", "google_default"`},
		{"no supported channel_creds", `{"dns:///x": {"channel_creds": [{"type": "mystery"}]}}`,
			`allowed_grpc_services["dns:///x"].channel_creds: no supported type in ["mystery"]`},
		{"channel_creds not an array", `{"dns:///x": {"channel_creds": {"type": "tls"}}}`,
			`allowed_grpc_services["dns:///x"].channel_creds: must be a JSON array, got object`},
		{"bad tls config", `{"dns:///x": {"channel_creds": [{"type": "tls", "config": {"certificate_file": "/c"}}]}}`,
			`allowed_grpc_services["dns:///x"].channel_creds[0].config.private_key_file: must be set when certificate_file is set`},
		{"tls config wrong type", `{"dns:///x": {"channel_creds": [{"type": "tls", "config": {"ca_certificate_file": 1}}]}}`,
			`allowed_grpc_services["dns:///x"].channel_creds[0].config.ca_certificate_file: must be a string, got number`},
		{"call_creds without file", `{"dns:///x": {"channel_creds": [{"type": "tls"}], "call_creds": [{"type": "jwt_token_file", "config": {}}]}}`,
			`allowed_grpc_services["dns:///x"].call_creds[0].config.jwt_token_file: must name the token file`},
		{"call_creds on insecure", `{"dns:///x": {"channel_creds": [{"type": "insecure"}], "call_creds": [` + jwt + `]}}`,
			`allowed_grpc_services["dns:///x"].call_creds[0]: "jwt_token_file" call credentials need a secure channel`},
		{"key without scheme", `{"ratelimit": {"channel_creds": [{"type": "insecure"}]}}`,
			`allowed_grpc_services["ratelimit"]: the key must be a fully-qualified target URI, with a scheme, such as "dns:///ratelimit.example.org:443"`},
		{"empty key", `{"": {"channel_creds": [{"type": "insecure"}]}}`,
			`allowed_grpc_services[""]: the key must be a fully-qualified target URI`},
		{"unparsable key", `{"dns://[bad/x": {"channel_creds": [{"type": "insecure"}]}}`,
			`allowed_grpc_services["dns://[bad/x"]: the key must be a fully-qualified target URI`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bootstrap.Parse([]byte(withAllowed(tc.services)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse() error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAllowedGRPCServicesBuiltInCode: Validate holds a Config built in
// code to the same rules, and the credentials of an entry are built as a
// server's are.
func TestAllowedGRPCServicesBuiltInCode(t *testing.T) {
	c := &bootstrap.Config{
		Servers: []bootstrap.ServerConfig{{ServerURI: "s:1", ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}}}},
		AllowedGRPCServices: map[string]bootstrap.AllowedGRPCService{
			"dns:///authz:443": {
				ChannelCreds: []bootstrap.ChannelCreds{{Type: "tls"}},
				CallCreds:    []bootstrap.CallCreds{{Type: "jwt_token_file", JWT: &bootstrap.JWTCallCreds{TokenFile: "/t"}}},
			},
		},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, ok := c.AllowedGRPCService("dns:///authz:443")
	if !ok {
		t.Fatal("entry not found")
	}
	creds, err := s.ChannelCredentials()
	if err != nil {
		t.Fatal(err)
	}
	defer creds.Close()
	if creds.Transport == nil || creds.Transport.Info().SecurityProtocol != "tls" || len(creds.Call) != 1 {
		t.Errorf("ChannelCredentials() = transport %v, %d call credentials; want TLS and 1", creds.Transport, len(creds.Call))
	}

	c.AllowedGRPCServices["dns:///authz:443"] = bootstrap.AllowedGRPCService{}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `allowed_grpc_services["dns:///authz:443"].channel_creds: must list at least one`) {
		t.Errorf("Validate() with an entry without channel_creds = %v", err)
	}
}

// TestAllowedGRPCServicesSeedCorpus checks that the allowed_grpc_services
// seeds of FuzzParse's corpus are what their names say.
func TestAllowedGRPCServicesSeedCorpus(t *testing.T) {
	checkSeeds(t, map[string]string{
		"allowed_grpc_services":               "",
		"allowed_grpc_services_no_creds":      `allowed_grpc_services["dns:///ext-proc.example.org:443"].channel_creds: no supported type in ["mtls_v2"]`,
		"allowed_grpc_services_trusted":       "",
		"allowed_grpc_services_key_no_scheme": `allowed_grpc_services["ratelimit.example.org"]: the key must be a fully-qualified target URI, with a scheme`,
		"allowed_grpc_services_jwt_insecure":  `allowed_grpc_services["dns:///ext-authz.example.org:443"].call_creds[0]: "jwt_token_file" call credentials need a secure channel`,
	})
}
