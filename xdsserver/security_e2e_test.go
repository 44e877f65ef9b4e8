package xdsserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

const (
	serverName = "server.test"
	clientID   = "spiffe://td/ns/a/sa/client"
)

// tlsEnv is an env whose server has certificate providers: "server-id"
// (the server's certificate, re-read every 20ms) and "roots" (the CA).
type tlsEnv struct {
	*env
	pki    *testutils.PKI
	client testutils.Cert
}

func newTLSEnv(t *testing.T) *tlsEnv {
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
	e := newXDSCredsEnv(t, func(c *bootstrap.Config) {
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"server-id": {PluginName: "file_watcher", Config: cfg(map[string]string{
				"certificate_file": srvCert.CertFile, "private_key_file": srvCert.KeyFile, "refresh_interval": "0.020s"})},
			"roots": {PluginName: "file_watcher", Config: cfg(map[string]string{"ca_certificate_file": pki.CAFile})},
		}
	})
	return &tlsEnv{env: e, pki: pki, client: pki.Issue("client", testutils.CertOptions{Client: true, URIs: []string{clientID}})}
}

// downstreamTLS makes the Listener's chain TLS with the server-id
// certificate; with roots, clients are verified against the CA, and with
// require, they must present a certificate.
func downstreamTLS(l *listenerv3.Listener, identity string, roots, require bool) {
	common := &tlsv3.CommonTlsContext{TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: identity}}
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

// rbacAllowingPrincipal lets through only SayHello from the client whose
// certificate has the SPIFFE ID id.
func rbacAllowingPrincipal(id string) *hcmv3.HttpFilter {
	cfg := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_ALLOW,
		Policies: map[string]*rbacv3.Policy{"client-says-hello": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
				Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: sayHello}}},
			}}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{
				PrincipalName: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: id}},
			}}}},
		}},
	}}
	return &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(cfg)}}
}

// dialTLS dials the server over TLS, with the client certificate if
// withCert; seen receives the serial of each server certificate verified.
func (e *tlsEnv) dialTLS(withCert bool, seen func(*big.Int)) *grpc.ClientConn {
	e.t.Helper()
	c := &tls.Config{RootCAs: e.pki.Roots, ServerName: serverName}
	if withCert {
		c.Certificates = []tls.Certificate{e.client.TLS}
	}
	if seen != nil {
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			seen(cs.PeerCertificates[0].SerialNumber)
			return nil
		}
	}
	conn, err := grpc.NewClient(e.lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(c)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Second}))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

// refused checks that conn cannot get a connection: its RPC fails with
// UNAVAILABLE and the channel never becomes ready.
func refused(t *testing.T, ctx context.Context, what string, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := call(ctx, conn, sayHello); status.Code(err) != codes.Unavailable {
		t.Errorf("%s: %v, want UNAVAILABLE", what, err)
	}
	if s := conn.GetState(); s == connectivity.Ready {
		t.Errorf("%s: channel %v, want no connection", what, s)
	}
}

func TestMutualTLSAndRBACOnPrincipal(t *testing.T) {
	e := newTLSEnv(t)
	lis := e.serverListener(nil, serverRoutes(), rbacAllowingPrincipal(clientID))
	downstreamTLS(lis, "server-id", true, true)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)

	conn := e.dialTLS(true, nil)
	if err := call(e.ctx, conn, sayHello); err != nil {
		t.Fatalf("mTLS client, allowed method: %v", err)
	}
	if err := call(e.ctx, conn, sayBye); status.Code(err) != codes.PermissionDenied {
		t.Errorf("mTLS client, other method: %v, want PERMISSION_DENIED", err)
	}
	refused(t, e.ctx, "client without a certificate", e.dialTLS(false, nil))
	refused(t, e.ctx, "plaintext client", e.dial())
}

func TestTLSWithoutClientCertificates(t *testing.T) {
	e := newTLSEnv(t)
	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "server-id", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, e.dialTLS(false, nil), sayHello); err != nil {
		t.Errorf("TLS client: %v", err)
	}
	refused(t, e.ctx, "plaintext client", e.dial())
}

// A Listener naming a certificate provider instance the bootstrap does not
// define is NACKed (gRFC A29): the server is not serving, and says why in
// grpc-go's words; neither TLS nor plaintext is served, never a silent
// downgrade. The Listener naming the instance the bootstrap has is served.
func TestUnknownCertificateProviderIsNotServed(t *testing.T) {
	e := newTLSEnv(t)
	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "no-such-instance", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	const want = `identity certificate provider instance name "no-such-instance" missing in bootstrap configuration`
	if got := e.waitMode(xdsserver.ServingModeNotServing); got.Err == nil || !strings.Contains(got.Err.Error(), want) {
		t.Errorf("not serving because %v, want %q", got.Err, want)
	}
	refused(t, e.ctx, "TLS client", e.dialTLS(false, nil))
	refused(t, e.ctx, "plaintext client", e.dial())

	lis = e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "server-id", false, false)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, e.dialTLS(false, nil), sayHello); err != nil {
		t.Errorf("TLS client, instance defined: %v", err)
	}
}

func TestRotatedServerCertificateIsUsed(t *testing.T) {
	e := newTLSEnv(t)
	lis := e.serverListener(nil, serverRoutes())
	downstreamTLS(lis, "server-id", true, true)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)

	first := e.dialTLS(true, nil)
	if err := call(e.ctx, first, sayHello); err != nil {
		t.Fatal(err)
	}
	rotated := e.pki.Issue("server", testutils.CertOptions{DNSNames: []string{serverName}})
	// New connections get the new certificate once the provider has read
	// it (every 20ms); the open connection keeps working meanwhile.
	for {
		got := make(chan *big.Int, 1)
		conn := e.dialTLS(true, func(s *big.Int) {
			select {
			case got <- s:
			default:
			}
		})
		if err := call(e.ctx, conn, sayHello); err != nil {
			t.Fatalf("during rotation: %v", err)
		}
		conn.Close()
		if (<-got).Cmp(rotated.Serial) == 0 {
			break
		}
	}
	if err := call(e.ctx, first, sayHello); err != nil {
		t.Errorf("the connection opened before the rotation: %v", err)
	}
}
