package bootstrap_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goxds/xds/bootstrap"
)

// withCallCreds returns a bootstrap whose only server has the given
// channel_creds and call_creds.
func withCallCreds(channel, call string) string {
	return `{"xds_servers": [{"server_uri": "s:1", "channel_creds": ` + channel + `, "call_creds": ` + call + `}]}`
}

func TestCallCredsParse(t *testing.T) {
	c, err := bootstrap.Parse([]byte(withCallCreds(`[{"type": "tls"}]`,
		`[{"type": "mystery", "config": {"x": 1}}, {"type": "jwt_token_file", "config": {"jwt_token_file": "/var/run/token", "other": 1}}]`)))
	if err != nil {
		t.Fatal(err)
	}
	cc := c.Servers[0].CallCreds
	if len(cc) != 2 || cc[0].Type != "mystery" || string(cc[0].Config) != `{"x":1}` {
		t.Fatalf("CallCreds = %+v, want the unsupported entry kept as written", cc)
	}
	if cc[1].Type != bootstrap.CallCredsJWTTokenFile || cc[1].JWT == nil || cc[1].JWT.TokenFile != "/var/run/token" {
		t.Fatalf("CallCreds[1] = %+v, want jwt_token_file /var/run/token", cc[1])
	}
	if s := c.Servers[0].String(); !strings.Contains(s, "call_creds=jwt_token_file") || strings.Contains(s, "/var/run/token") {
		t.Errorf("String() = %q, want the call_creds type and no file name", s)
	}

	// Unsupported types are ignored, even on an insecure channel: gRPC
	// uses only the types it knows.
	if _, err := bootstrap.Parse([]byte(withCallCreds(`[{"type": "insecure"}]`, `[{"type": "mystery"}]`))); err != nil {
		t.Errorf("unsupported call_creds on insecure: %v", err)
	}
	// FILESYSTEM servers ignore call_creds, as they ignore channel_creds.
	fs := `{"xds_servers": [{"server_uri": "/etc/xds", "api_type": "FILESYSTEM",
		"resource_files": {"type.googleapis.com/envoy.config.listener.v3.Listener": "l.yaml"},
		"call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/t"}}]}]}`
	if _, err := bootstrap.Parse([]byte(fs)); err != nil {
		t.Errorf("FILESYSTEM with call_creds: %v", err)
	}
}

func TestCallCredsParseErrors(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"not an array", withCallCreds(`[{"type": "tls"}]`, `{}`),
			"xds_servers[0].call_creds: must be a JSON array, got object"},
		{"entry not an object", withCallCreds(`[{"type": "tls"}]`, `["jwt_token_file"]`),
			"xds_servers[0].call_creds[0]: must be a JSON object, got string"},
		{"type not a string", withCallCreds(`[{"type": "tls"}]`, `[{"type": 1}]`),
			"xds_servers[0].call_creds[0].type: must be a string, got number"},
		{"jwt without config", withCallCreds(`[{"type": "tls"}]`, `[{"type": "jwt_token_file"}]`),
			`xds_servers[0].call_creds[0].config: required for "jwt_token_file"`},
		{"jwt config not an object", withCallCreds(`[{"type": "tls"}]`, `[{"type": "jwt_token_file", "config": "/t"}]`),
			"xds_servers[0].call_creds[0].config: must be a JSON object, got string"},
		{"jwt file missing", withCallCreds(`[{"type": "tls"}]`, `[{"type": "jwt_token_file", "config": {}}]`),
			"xds_servers[0].call_creds[0].config.jwt_token_file: must name the token file"},
		{"jwt file not a string", withCallCreds(`[{"type": "tls"}]`, `[{"type": "jwt_token_file", "config": {"jwt_token_file": 7}}]`),
			"xds_servers[0].call_creds[0].config.jwt_token_file: must be a string, got number"},
		{"second entry bad", withCallCreds(`[{"type": "tls"}]`,
			`[{"type": "jwt_token_file", "config": {"jwt_token_file": "/a"}}, {"type": "jwt_token_file", "config": {"jwt_token_file": ""}}]`),
			"xds_servers[0].call_creds[1].config.jwt_token_file: must name the token file"},
		{"insecure channel", withCallCreds(`[{"type": "mystery"}, {"type": "insecure"}]`, `[{"type": "jwt_token_file", "config": {"jwt_token_file": "/t"}}]`),
			`xds_servers[0].call_creds[0]: "jwt_token_file" call credentials need a secure channel, and the selected channel_creds[1] is "insecure"`},
		{"REST", `{"xds_servers": [{"server_uri": "https://x", "api_type": "REST", "channel_creds": [{"type": "tls"}],
			"call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/t"}}]}]}`,
			`xds_servers[0].call_creds[0]: "jwt_token_file" call credentials are sent on gRPC streams only, and api_type is REST`},
		{"in an authority", `{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "tls"}]}],
			"authorities": {"a": {"xds_servers": [{"server_uri": "s:2", "channel_creds": [{"type": "tls"}], "call_creds": [{"type": "jwt_token_file"}]}]}}}`,
			`authorities["a"].xds_servers[0].call_creds[0].config: required`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bootstrap.Parse([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse() error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCallCredsValidateBuiltInCode checks that a Config built in code is
// held to the same rules, the decoded JWT or the raw Config either way.
func TestCallCredsValidateBuiltInCode(t *testing.T) {
	server := func(channel string, call ...bootstrap.CallCreds) *bootstrap.Config {
		return &bootstrap.Config{Servers: []bootstrap.ServerConfig{{
			ServerURI: "s:1", ChannelCreds: []bootstrap.ChannelCreds{{Type: channel}}, CallCreds: call,
		}}}
	}
	jwt := bootstrap.CallCreds{Type: bootstrap.CallCredsJWTTokenFile, JWT: &bootstrap.JWTCallCreds{TokenFile: "/t"}}
	raw := bootstrap.CallCreds{Type: bootstrap.CallCredsJWTTokenFile, Config: []byte(`{"jwt_token_file": "/t"}`)}
	for _, c := range []*bootstrap.Config{server("tls", jwt), server("tls", raw), server("google_default", jwt)} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", c.Servers[0].CallCreds, err)
		}
	}
	for _, tc := range []struct {
		c    *bootstrap.Config
		want string
	}{
		{server("insecure", jwt), `xds_servers[0].call_creds[0]: "jwt_token_file" call credentials need a secure channel`},
		{server("tls", bootstrap.CallCreds{Type: bootstrap.CallCredsJWTTokenFile, JWT: &bootstrap.JWTCallCreds{}}),
			"xds_servers[0].call_creds[0].config.jwt_token_file: must name the token file"},
		{server("tls", bootstrap.CallCreds{Type: bootstrap.CallCredsJWTTokenFile}),
			"xds_servers[0].call_creds[0].config: required"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.c.Servers[0].CallCreds, err, tc.want)
		}
	}
}

func TestCallCredsKey(t *testing.T) {
	parse := func(call string) bootstrap.ServerConfig {
		t.Helper()
		c, err := bootstrap.Parse([]byte(withCallCreds(`[{"type": "tls"}]`, call)))
		if err != nil {
			t.Fatal(err)
		}
		return c.Servers[0]
	}
	none := parse(`[]`)
	a := parse(`[{"type": "jwt_token_file", "config": {"jwt_token_file": "/a"}}]`)
	a2 := parse(`[{"type": "mystery"}, {"type": "jwt_token_file", "config": {"jwt_token_file": "/a"}}]`)
	b := parse(`[{"type": "jwt_token_file", "config": {"jwt_token_file": "/b"}}]`)
	if none.Key() == a.Key() || a.Key() == b.Key() {
		t.Errorf("servers with different call_creds share a key: %q, %q, %q", none.Key(), a.Key(), b.Key())
	}
	if a.Key() != a2.Key() {
		t.Errorf("an ignored call_creds entry changed the key: %q vs %q", a.Key(), a2.Key())
	}
}

func TestChannelCredentialsCallCreds(t *testing.T) {
	c, err := bootstrap.Parse([]byte(withCallCreds(`[{"type": "tls"}]`,
		`[{"type": "jwt_token_file", "config": {"jwt_token_file": "/a"}}, {"type": "mystery"}, {"type": "jwt_token_file", "config": {"jwt_token_file": "/b"}}]`)))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := c.Servers[0].ChannelCredentials()
	if err != nil {
		t.Fatal(err)
	}
	defer creds.Close()
	if len(creds.Call) != 2 || creds.PerRPC != nil {
		t.Fatalf("Call = %d credentials, PerRPC = %v; want 2 (every supported entry) and nil", len(creds.Call), creds.PerRPC)
	}
	for i, rpc := range creds.Call {
		if !rpc.RequireTransportSecurity() {
			t.Errorf("Call[%d] does not require transport security", i)
		}
	}

	// Built in code and never validated: refused all the same.
	s := bootstrap.ServerConfig{ServerURI: "s:1", ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}},
		CallCreds: []bootstrap.CallCreds{{Type: "jwt_token_file", JWT: &bootstrap.JWTCallCreds{TokenFile: "/a"}}}}
	if _, err := s.ChannelCredentials(); err == nil || !strings.Contains(err.Error(), `call_creds[0]: "jwt_token_file" call credentials need a secure channel`) {
		t.Errorf("ChannelCredentials() on insecure = %v, want it refused", err)
	}
}

// TestCallCredsSeedCorpus checks that the call_creds seeds of FuzzParse's
// corpus are what their names say.
func TestCallCredsSeedCorpus(t *testing.T) {
	checkSeeds(t, map[string]string{
		"istio_jwt":                 "",
		"jwt_insecure":              `call_creds[0]: "jwt_token_file" call credentials need a secure channel`,
		"jwt_token_file_not_string": "xds_servers[0].call_creds[0].config.jwt_token_file: must be a string, got array",
	})
}

// checkSeeds parses each named seed of FuzzParse's corpus: want maps a
// file to "" if it is valid, else to part of its error.
func checkSeeds(t *testing.T, want map[string]string) {
	for name, wantErr := range want {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzParse", name))
			if err != nil {
				t.Fatal(err)
			}
			_, body, _ := strings.Cut(string(raw), "\n")
			body = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(body), "[]byte("), ")")
			data, err := strconv.Unquote(body)
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
