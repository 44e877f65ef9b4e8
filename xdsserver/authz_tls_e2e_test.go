package xdsserver_test

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net/url"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// gRFC A92 on an xDS-enabled server over mutual TLS, configured by
// go-control-plane's server: the authorization service is told the
// client's principal (its certificate's first URI SAN) and, with
// include_peer_certificate, its certificate (PEM, URL-encoded), and the
// destination's principal is the server's own certificate's identity (its
// only SAN, a DNS name), as the certificate provider served it.
func TestExtAuthzPeerIdentityOverTLS(t *testing.T) {
	a := startAuthz(t)
	pki := testutils.NewPKI(t)
	srvCert := pki.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}})
	client := pki.Issue("client", testutils.CertOptions{Client: true, URIs: []string{clientID}})
	cfg := func(v map[string]string) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	e := newXDSCredsEnv(t, func(c *bootstrap.Config) {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"server-id": {PluginName: "file_watcher", Config: cfg(map[string]string{"certificate_file": srvCert.CertFile, "private_key_file": srvCert.KeyFile})},
			"roots":     {PluginName: "file_watcher", Config: cfg(map[string]string{"ca_certificate_file": pki.CAFile})},
		}
		testutils.AllowGRPCService(a.Target())(c)
	})
	lis := e.serverListener(nil, serverRoutes(), testutils.ExtAuthzFilter(a.Target(), func(m *extauthzv3.ExtAuthz) { m.IncludePeerCertificate = true }))
	downstreamTLS(lis, "server-id", true, true)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)

	conn, err := grpc.NewClient(e.lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: pki.Roots, ServerName: serverName, Certificates: []tls.Certificate{client.TLS},
	})), grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := call(withWant(e.ctx, "allow"), conn, sayHello); err != nil {
		t.Fatal(err)
	}
	checks := a.Checks()
	if len(checks) != 1 {
		t.Fatalf("%d checks, want 1", len(checks))
	}
	attrs := checks[0].Request.GetAttributes()
	if p := attrs.GetSource().GetPrincipal(); p != clientID {
		t.Errorf("source principal %q, want the client's URI SAN %q", p, clientID)
	}
	raw, err := url.QueryUnescape(attrs.GetSource().GetCertificate())
	if err != nil {
		t.Fatalf("source certificate is not URL-encoded: %v", err)
	}
	if blk, _ := pem.Decode([]byte(raw)); blk == nil || string(pem.EncodeToMemory(blk)) != string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client.TLS.Certificate[0]})) {
		t.Errorf("source certificate %q, want the client's leaf, PEM", attrs.GetSource().GetCertificate())
	}
	if p := attrs.GetDestination().GetPrincipal(); p != serverName {
		t.Errorf("destination principal %q, want the server certificate's DNS SAN %q", p, serverName)
	}
}
