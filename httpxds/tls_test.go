package httpxds_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

const (
	serverName = "server.test"
	clientID   = "spiffe://td/ns/a/sa/client"
	otherID    = "spiffe://td/ns/b/sa/other"
)

// tlsEnv is an env whose bootstrap has certificate providers: "server-id"
// (the server's certificate) and "roots" (the CA), and two client
// certificates; extra edit the bootstrap further.
type tlsEnv struct {
	*env
	pki           *testutils.PKI
	client, other testutils.Cert
}

func newTLSEnv(t *testing.T, extra ...func(*bootstrap.Config)) *tlsEnv {
	t.Helper()
	pki := testutils.NewPKI(t)
	srvCert := pki.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}})
	cfg := func(v map[string]string) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	e := newEnv(t, envOptions{edit: func(c *bootstrap.Config) {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"server-id": {PluginName: "file_watcher", Config: cfg(map[string]string{
				"certificate_file": srvCert.CertFile, "private_key_file": srvCert.KeyFile, "refresh_interval": "0.020s"})},
			"roots": {PluginName: "file_watcher", Config: cfg(map[string]string{"ca_certificate_file": pki.CAFile})},
		}
		for _, f := range extra {
			f(c)
		}
	}})
	return &tlsEnv{env: e, pki: pki,
		client: pki.Issue("client", testutils.CertOptions{Client: true, URIs: []string{clientID}}),
		other:  pki.Issue("other", testutils.CertOptions{Client: true, URIs: []string{otherID}}),
	}
}

// downstreamTLS makes the Listener's chain TLS with the server-id
// certificate; with roots, clients are verified against the CA, and with
// require, they must present a certificate.
func downstreamTLS(l *listenerv3.Listener, roots, require bool) {
	common := &tlsv3.CommonTlsContext{TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "server-id"}}
	if roots {
		common.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
		}}
	}
	d := &tlsv3.DownstreamTlsContext{CommonTlsContext: common, RequireClientCertificate: wrapperspb.Bool(require)}
	l.FilterChains[0].TransportSocket = &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: testutils.MarshalAny(d)},
	}
}

// rbacAllowingPrincipal lets through only the client whose certificate has
// the SPIFFE ID id, and only for GET.
func rbacAllowingPrincipal(id string) *hcmv3.HttpFilter {
	cfg := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_ALLOW,
		Policies: map[string]*rbacv3.Policy{"client-gets": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{
				Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "GET"}}},
			}}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{
				PrincipalName: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: id}},
			}}}},
		}},
	}}
	return &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(cfg)}}
}

// client is an HTTPS client trusting the PKI, with cert if not nil,
// trying HTTP/2 first.
func (e *tlsEnv) httpsClient(cert *testutils.Cert) *http.Client {
	c := &tls.Config{RootCAs: e.pki.Roots, ServerName: serverName}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS}
	}
	tr := &http.Transport{TLSClientConfig: c, ForceAttemptHTTP2: true}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (e *tlsEnv) do(hc *http.Client, method, path string) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(e.ctx, method, "https://"+e.lis.Addr().String()+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, strings.TrimSpace(string(b)), nil
}

// TestMutualTLSAndRBACOnPrincipal: a chain with a DownstreamTlsContext
// requiring client certificates serves HTTP/2 over TLS with the
// bootstrap's certificate providers; RBAC's principal is the client
// certificate's SPIFFE ID and its permission the method; a client without
// a certificate and a plaintext client are refused, never served in
// plaintext.
func TestMutualTLSAndRBACOnPrincipal(t *testing.T) {
	e := newTLSEnv(t)
	l := e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, rbacAllowingPrincipal(clientID))
	downstreamTLS(l, true, true)
	e.serve(l)

	resp, body, err := e.do(e.httpsClient(&e.client), "GET", "/x")
	if err != nil || resp.StatusCode != http.StatusOK || body != "served GET /x /x" {
		t.Fatalf("mTLS client: %v %v %q", resp, err, body)
	}
	if resp.Proto != "HTTP/2.0" || resp.TLS == nil {
		t.Errorf("mTLS client spoke %s (TLS %v), want HTTP/2 over TLS", resp.Proto, resp.TLS != nil)
	}
	if resp, body, err := e.do(e.httpsClient(&e.client), "POST", "/x"); err != nil || resp.StatusCode != http.StatusForbidden ||
		body != "httpxds: RBAC: access denied" {
		t.Errorf("mTLS client, POST: %v %q, want 403", err, body)
	}
	if resp, body, err := e.do(e.httpsClient(&e.other), "GET", "/x"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("other client: %v %q, want 403", err, body)
	}
	if _, _, err := e.do(e.httpsClient(nil), "GET", "/x"); err == nil {
		t.Error("a client without a certificate was served")
	}
	if got := e.get("/x"); got.status == http.StatusOK {
		t.Errorf("a plaintext client was served: %d %q", got.status, got.body)
	}
}

// TestTLSWithoutClientCertificates: TLS without a validation context
// serves any TLS client (HTTP/1.1 too), never a plaintext one.
func TestTLSWithoutClientCertificates(t *testing.T) {
	e := newTLSEnv(t)
	l := e.listener(routes("rc", serveRoute(prefix("/"))), "", nil)
	downstreamTLS(l, false, false)
	e.serve(l)
	hc := e.httpsClient(nil)
	hc.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	hc.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
	resp, body, err := e.do(hc, "GET", "/y")
	if err != nil || resp.StatusCode != http.StatusOK || body != "served GET /y /y" || resp.Proto != "HTTP/1.1" {
		t.Fatalf("TLS client: %v %v %q", resp, err, body)
	}
	if got := e.get("/y"); got.status == http.StatusOK {
		t.Errorf("a plaintext client was served: %d %q", got.status, got.body)
	}
}
