package xdsserver_test

import (
	"crypto/tls"
	"encoding/json"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// spiffeEnv is an env whose "roots" provider is a SPIFFE trust bundle map
// (gRFC A87) of two trust domains, a (which also issued the server's
// certificate) and b.
type spiffeEnv struct {
	*env
	a, b *testutils.PKI
}

func newSPIFFEEnv(t *testing.T) *spiffeEnv {
	t.Helper()
	a, b := testutils.NewPKI(t), testutils.NewPKI(t)
	srvCert := a.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}})
	bundles, err := testutils.WriteSPIFFEBundleMap(t.TempDir(), "bundles.json", map[string]*testutils.PKI{
		"a.goxds.test": a, "b.goxds.test": b,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(v map[string]string) json.RawMessage {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	e := newEnvWith(t, testutils.ManagementServerOptions{}, func(c *bootstrap.Config) {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"server-id": {PluginName: "file_watcher", Config: cfg(map[string]string{
				"certificate_file": srvCert.CertFile, "private_key_file": srvCert.KeyFile})},
			// ca_certificate_file trusts a alone: clients of b get in only
			// through the map.
			"roots": {PluginName: "file_watcher", Config: cfg(map[string]string{
				"spiffe_trust_bundle_map_file": bundles, "ca_certificate_file": a.CAFile})},
		}
	})
	return &spiffeEnv{env: e, a: a, b: b}
}

// dialWith dials the server over TLS (trusting a, which issued the
// server's certificate), presenting cert if not nil.
func (e *spiffeEnv) dialWith(cert *testutils.Cert) *grpc.ClientConn {
	e.t.Helper()
	c := &tls.Config{RootCAs: e.a.Roots, ServerName: serverName}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS}
	}
	conn, err := grpc.NewClient(e.lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(c)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Second}))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

func (e *spiffeEnv) client(p *testutils.PKI, uris ...string) *testutils.Cert {
	c := p.Issue("client", testutils.CertOptions{Client: true, URIs: uris})
	return &c
}

// TestMutualTLSWithSPIFFEBundleMap: a server whose chain requires client
// certificates verifies each against the bundle of its SPIFFE ID's trust
// domain; RBAC sees the SPIFFE ID as the principal.
func TestMutualTLSWithSPIFFEBundleMap(t *testing.T) {
	e := newSPIFFEEnv(t)
	const fromB = "spiffe://b.goxds.test/ns/x/sa/client"
	lis := e.serverListener(nil, serverRoutes(), rbacAllowingPrincipal(fromB))
	downstreamTLS(lis, "server-id", true, true)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)

	if err := call(e.ctx, e.dialWith(e.client(e.b, fromB)), sayHello); err != nil {
		t.Fatalf("client of trust domain b, allowed by RBAC: %v", err)
	}
	refused(t, e.ctx, "a certificate of b claiming trust domain a", e.dialWith(e.client(e.b, "spiffe://a.goxds.test/ns/x/sa/client")))
	refused(t, e.ctx, "a trust domain the map lacks", e.dialWith(e.client(testutils.NewPKI(t), "spiffe://c.goxds.test/ns/x/sa/client")))
	refused(t, e.ctx, "a certificate of a without a SPIFFE ID", e.dialWith(e.client(e.a)))
	refused(t, e.ctx, "no client certificate", e.dialWith(nil))
}

// TestTLSWithSPIFFEBundleMapCertificateIfGiven: a chain that verifies
// clients but does not require a certificate serves a client without one,
// and still refuses a certificate the map does not trust.
func TestTLSWithSPIFFEBundleMapCertificateIfGiven(t *testing.T) {
	e := newSPIFFEEnv(t)
	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "server-id", true, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)

	if err := call(e.ctx, e.dialWith(nil), sayHello); err != nil {
		t.Errorf("client without a certificate: %v", err)
	}
	if err := call(e.ctx, e.dialWith(e.client(e.a, "spiffe://a.goxds.test/ns/x/sa/client")), sayHello); err != nil {
		t.Errorf("client of trust domain a: %v", err)
	}
	refused(t, e.ctx, "a trust domain the map lacks", e.dialWith(e.client(testutils.NewPKI(t), "spiffe://c.goxds.test/ns/x/sa/client")))
}
