package xdscreds_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/testutils"
)

// TestClientHandshakeSPIFFEBundleMap: with a file_watcher root provider
// whose config names a SPIFFE trust bundle map (gRFC A87), the server's
// certificate is verified against the bundle of its SPIFFE ID's trust
// domain, of two in the map; the provider's ca_certificate_file, also set,
// is ignored. SAN matchers still apply.
func TestClientHandshakeSPIFFEBundleMap(t *testing.T) {
	a, b, stranger := testutils.NewPKI(t), testutils.NewPKI(t), testutils.NewPKI(t)
	bundles, err := testutils.WriteSPIFFEBundleMap(t.TempDir(), "bundles.json", map[string]*testutils.PKI{
		"a.goxds.test": a, "b.goxds.test": b,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{
		// ca_certificate_file trusts only a: a server of b is accepted only
		// if the map is what is used.
		"roots": {PluginName: "file_watcher", Config: json.RawMessage(`{"spiffe_trust_bundle_map_file": "` + bundles +
			`", "ca_certificate_file": "` + a.CAFile + `", "refresh_interval": "0.05s"}`)},
	}}
	serve := func(p *testutils.PKI, uris ...string) *server {
		return startServer(t, p.Issue("server", testutils.CertOptions{DNSNames: []string{"svc.goxds.test"}, URIs: uris}).TLS)
	}
	tests := []struct {
		name    string
		server  *server
		sans    []string // exact SAN matchers
		wantErr string
	}{
		{name: "trust domain b", server: serve(b, "spiffe://b.goxds.test/ns/x/sa/server")},
		{name: "trust domain a", server: serve(a, "spiffe://a.goxds.test/ns/x/sa/server")},
		{name: "SAN matcher on the SPIFFE ID", server: serve(b, "spiffe://b.goxds.test/ns/x/sa/server"),
			sans: []string{"spiffe://b.goxds.test/ns/x/sa/server"}},
		{name: "SAN matcher still applies", server: serve(b, "spiffe://b.goxds.test/ns/x/sa/server"),
			sans: []string{"spiffe://b.goxds.test/ns/x/sa/other"}, wantErr: "do not match any of the accepted SANs"},
		{name: "issued by b, claims a", server: serve(b, "spiffe://a.goxds.test/ns/x/sa/server"),
			wantErr: `server certificate spiffe://a.goxds.test/ns/x/sa/server not trusted by the SPIFFE bundle of "a.goxds.test"`},
		{name: "trust domain not in the map", server: serve(stranger, "spiffe://c.goxds.test/ns/x/sa/server"),
			wantErr: `trust domain "c.goxds.test", which the SPIFFE trust bundle map lacks (it has ["a.goxds.test" "b.goxds.test"])`},
		{name: "no URI SAN", server: serve(a),
			wantErr: "server certificate is not a SPIFFE certificate, and the roots are a SPIFFE trust bundle map: it has no URI SAN"},
		{name: "two URI SANs", server: serve(a, "spiffe://a.goxds.test/one", "spiffe://a.goxds.test/two"),
			wantErr: "it has 2 URI SANs, and a SPIFFE certificate has one"},
		{name: "URI SAN not SPIFFE", server: serve(a, "https://a.goxds.test/server"),
			wantErr: `its URI SAN "https://a.goxds.test/server" is not a SPIFFE ID`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := upstream("", false, false)
			for _, s := range tt.sans {
				u = upstream("", false, false, exact(s))
			}
			hi, err := xdscreds.NewHandshakeInfo(cfg, securityOf(t, u))
			if err != nil {
				t.Fatal(err)
			}
			defer hi.Close()
			err = rpc(t, tt.server.addr, hi, "")
			text := strings.ReplaceAll(status.Convert(err).Message(), `\"`, `"`)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("RPC failed: %v", err)
			case tt.wantErr != "" && (status.Code(err) != codes.Unavailable || !strings.Contains(text, tt.wantErr)):
				t.Fatalf("RPC error = %v, want UNAVAILABLE containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestClientHandshakeSPIFFEBundleMapRotated: the provider reads the map
// file again (every refresh_interval), so a trust domain added to the map
// is accepted by the next connections, and one removed is refused.
func TestClientHandshakeSPIFFEBundleMapRotated(t *testing.T) {
	a, b := testutils.NewPKI(t), testutils.NewPKI(t)
	dir := t.TempDir()
	writeMap := func(domains map[string]*testutils.PKI) string {
		path, err := testutils.WriteSPIFFEBundleMap(dir, "bundles.json", domains)
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	bundles := writeMap(map[string]*testutils.PKI{"a.goxds.test": a})
	cfg := &bootstrap.Config{CertificateProviders: map[string]bootstrap.CertificateProvider{
		"roots": {PluginName: "file_watcher", Config: json.RawMessage(`{"spiffe_trust_bundle_map_file": "` + bundles + `", "refresh_interval": "0.02s"}`)},
	}}
	hi, err := xdscreds.NewHandshakeInfo(cfg, securityOf(t, upstream("", false, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer hi.Close()
	srvB := startServer(t, b.Issue("server", testutils.CertOptions{URIs: []string{"spiffe://b.goxds.test/server"}}).TLS)
	if err := rpc(t, srvB.addr, hi, ""); !strings.Contains(strings.ReplaceAll(status.Convert(err).Message(), `\"`, `"`), `which the SPIFFE trust bundle map lacks`) {
		t.Fatalf("server of b before b is in the map: %v, want it refused", err)
	}

	// until calls rpc on fresh connections until ok says it has the
	// outcome wanted: the provider reads the file within 20ms, and each
	// connection's handshake uses what it read last.
	until := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := rpc(t, srvB.addr, hi, "")
			if ok(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %v", what, err)
			}
		}
	}
	writeMap(map[string]*testutils.PKI{"a.goxds.test": a, "b.goxds.test": b})
	until("b added to the map", func(err error) bool { return err == nil })
	writeMap(map[string]*testutils.PKI{"a.goxds.test": a})
	until("b removed from the map", func(err error) bool {
		return status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), "lacks")
	})
}
