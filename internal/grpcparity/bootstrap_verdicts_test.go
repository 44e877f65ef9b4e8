package grpcparity

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/xds"

	"github.com/goxds/xds/bootstrap"
)

// grpc-go reads call_creds (gRFC A97), spiffe_trust_bundle_map_file (A87)
// and allowed_grpc_services (A102) only with these set when it starts;
// goxds always reads them.
var bootstrapEnv = []string{
	"GRPC_EXPERIMENTAL_XDS_BOOTSTRAP_CALL_CREDS=true",
	"GRPC_EXPERIMENTAL_XDS_MTLS_SPIFFE=true",
	"GRPC_EXPERIMENTAL_XDS_EXT_PROC_ON_CLIENT=true",
}

// TestBootstrapVerdicts compares goxds's verdicts on the bootstrap fields
// of gRFCs A97, A87 and A102 with grpc-go's, in a child process of this
// test binary with grpc-go's switches on (it reads them once, at init).
func TestBootstrapVerdicts(t *testing.T) {
	if os.Getenv("GRPC_EXPERIMENTAL_XDS_BOOTSTRAP_CALL_CREDS") != "true" {
		ctx, cancel := context.WithTimeout(context.Background(), 4*verdictTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBootstrapVerdicts$", "-test.v")
		cmd.Env = append(os.Environ(), bootstrapEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with %v: %v\n%s", bootstrapEnv, err, out)
		}
		t.Logf("with %v:\n%s", bootstrapEnv, out)
		return
	}
	server := func(channel, call string) string {
		s := `{"server_uri": "127.0.0.1:1", "channel_creds": ` + channel
		if call != "" {
			s += `, "call_creds": ` + call
		}
		return `{"node": {"id": "parity"}, "xds_servers": [` + s + `}]`
	}
	const tls, insecure = `[{"type": "tls"}]`, `[{"type": "insecure"}]`
	withServer := func(channel, call string) string { return server(channel, call) + `}` }
	withProviders := func(cfg string) string {
		return server(insecure, "") + `, "certificate_providers": {"p": {"plugin_name": "file_watcher", "config": ` + cfg + `}}}`
	}
	withAllowed := func(services string) string {
		return server(insecure, "") + `, "allowed_grpc_services": ` + services + `}`
	}
	const jwt = `{"type": "jwt_token_file", "config": {"jwt_token_file": "/var/run/token"}}`
	tests := []struct {
		name, json string
		differs    string
	}{
		{name: "A97 jwt on tls", json: withServer(tls, `[`+jwt+`]`)},
		{name: "A97 unknown type ignored", json: withServer(tls, `[{"type": "future", "config": [1]}]`)},
		{name: "A97 jwt without config", json: withServer(tls, `[{"type": "jwt_token_file"}]`)},
		{name: "A97 jwt without file", json: withServer(tls, `[{"type": "jwt_token_file", "config": {}}]`)},
		{name: "A97 jwt file not a string", json: withServer(tls, `[{"type": "jwt_token_file", "config": {"jwt_token_file": 1}}]`)},
		{name: "A97 jwt config not an object", json: withServer(tls, `[{"type": "jwt_token_file", "config": "/t"}]`)},
		{name: "A97 call_creds not an array", json: withServer(tls, `{}`)},
		{name: "A97 jwt on insecure", json: withServer(insecure, `[`+jwt+`]`),
			differs: "grpc-go accepts the bootstrap and then fails every stream (the token may not go in plaintext); goxds refuses the bootstrap"},
		{name: "A87 map alone", json: withProviders(`{"spiffe_trust_bundle_map_file": "/m.json"}`)},
		{name: "A87 map and CA file", json: withProviders(`{"spiffe_trust_bundle_map_file": "/m.json", "ca_certificate_file": "/ca.pem"}`)},
		{name: "A87 map not a string", json: withProviders(`{"spiffe_trust_bundle_map_file": 1}`)},
		{name: "A87 map, certificate without key", json: withProviders(`{"spiffe_trust_bundle_map_file": "/m.json", "certificate_file": "/d/c.pem"}`)},
		{name: "A102 entries", json: withAllowed(`{"dns:///a.example:443": {"channel_creds": [{"type": "insecure"}]},
			"dns:///b.example:443": {"channel_creds": [{"type": "future"}, {"type": "tls"}], "call_creds": [` + jwt + `]}}`)},
		{name: "A102 not an object", json: withAllowed(`[]`)},
		{name: "A102 entry null", json: withAllowed(`{"dns:///a.example:443": null}`)},
		{name: "A102 no channel_creds", json: withAllowed(`{"dns:///a.example:443": {}}`)},
		{name: "A102 no supported channel_creds", json: withAllowed(`{"dns:///a.example:443": {"channel_creds": [{"type": "future"}]}}`)},
		{name: "A102 jwt without file", json: withAllowed(`{"dns:///a.example:443": {"channel_creds": [{"type": "tls"}], "call_creds": [{"type": "jwt_token_file", "config": {}}]}}`)},
		{name: "A102 key without scheme", json: withAllowed(`{"a.example": {"channel_creds": [{"type": "insecure"}]}}`),
			differs: "grpc-go does not look at the key; goxds wants the fully-qualified target URI the gRFC asks for"},
		{name: "A102 jwt on insecure", json: withAllowed(`{"dns:///a.example:443": {"channel_creds": [{"type": "insecure"}], "call_creds": [` + jwt + `]}}`),
			differs: "as for a server's call_creds: grpc-go would fail the side channel's calls, goxds refuses the bootstrap"},
		{name: "A95 knob", json: server(insecure, "") + `, "authorities": {"ep.example.com": {"fallback_on_reachability_only": true}}}`},
		{name: "A95 knob not a boolean", json: server(insecure, "") + `, "authorities": {"ep.example.com": {"fallback_on_reachability_only": "yes"}}}`,
			differs: "grpc-go v1.85 has no A95 and ignores the field; goxds checks it whether or not GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK is set, so that a bootstrap is valid or not whatever the environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, goxds := bootstrap.Parse([]byte(tt.json))
			grpcGo := grpcGoBootstrapVerdict(t, tt.json)
			t.Logf("goxds %v; grpc-go %v", goxds, grpcGo)
			if tt.differs != "" {
				if (goxds != nil) == (grpcGo != nil) {
					t.Errorf("known difference gone: goxds %v, grpc-go %v; drop the note: %s", goxds, grpcGo, tt.differs)
				}
				return
			}
			switch {
			case goxds != nil && grpcGo == nil:
				t.Errorf("goxds rejects, grpc-go accepts: %v", goxds)
			case goxds == nil && grpcGo != nil:
				t.Errorf("goxds accepts, grpc-go rejects: %v", grpcGo)
			case goxds != nil && !strings.Contains(goxds.Error(), "bootstrap: "):
				t.Errorf("goxds error %q does not say it is the bootstrap's", goxds)
			}
		})
	}
}

// grpcGoBootstrapVerdict has grpc-go's xDS resolver read the bootstrap
// data: it does so when it is built, making its xDS client, which fails
// on a bootstrap it refuses. A resolver built is closed at once.
func grpcGoBootstrapVerdict(t *testing.T, data string) error {
	t.Helper()
	b, err := xds.NewXDSResolverWithConfigForTesting([]byte(data))
	if err != nil {
		return err
	}
	r, err := b.Build(resolver.Target{URL: *testURL(t, "xds:///"+listenerName)}, nopClientConn{}, resolver.BuildOptions{})
	if err != nil {
		return err
	}
	r.Close()
	return nil
}

func testURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// nopClientConn is the channel of a resolver built only to see whether
// it can be: what the resolver tells it is dropped.
type nopClientConn struct{}

func (nopClientConn) UpdateState(resolver.State) error { return nil }
func (nopClientConn) ReportError(error)                {}
func (nopClientConn) NewAddress([]resolver.Address)    {}
func (nopClientConn) ParseServiceConfig(string) *serviceconfig.ParseResult {
	return &serviceconfig.ParseResult{}
}
