package grpcxds_test

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"strings"
	"testing"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	tlscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/tls/v3"
	xdscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/xds/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// gRFC A102's TlsCredentials on an ext_authz GrpcService from a trusted
// server: the side channel takes its roots and client certificate from
// the bootstrap's certificate provider instances (file_watcher) and
// reaches a mutual-TLS authorization service; XdsCredentials with a
// TlsCredentials fallback do the same. Roots that do not trust the
// service's certificate fail the handshake, so the check fails and the
// RPC gets status_on_error.
func TestExtAuthzClientTLSCredentials(t *testing.T) {
	pki, other := testutils.NewPKI(t), testutils.NewPKI(t)
	srvCert := pki.Issue("authz", testutils.CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	cliCert := pki.Issue("client", testutils.CertOptions{Client: true})

	a, err := testutils.StartAuthzServer(authzAllowUnlessDeny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	// The same service, over mutual TLS.
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{srvCert.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Roots,
	})))
	authv3.RegisterAuthorizationServer(srv, a)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	target := "passthrough:///" + lis.Addr().String()

	cfg := func(v map[string]string) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	edit := func(c *bootstrap.Config) {
		c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{
			"roots":       {PluginName: "file_watcher", Config: cfg(map[string]string{"ca_certificate_file": pki.CAFile})},
			"wrong-roots": {PluginName: "file_watcher", Config: cfg(map[string]string{"ca_certificate_file": other.CAFile})},
			"id":          {PluginName: "file_watcher", Config: cfg(map[string]string{"certificate_file": cliCert.CertFile, "private_key_file": cliCert.KeyFile})},
		}
	}
	tlsCreds := func(roots string) *anypb.Any {
		return testutils.MarshalAny(&tlscredsv3.TlsCredentials{
			RootCertificateProvider:     &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: roots},
			IdentityCertificateProvider: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "id"},
		})
	}
	for _, tc := range []struct {
		name   string
		plugin *anypb.Any
		ok     bool
	}{
		{"tls", tlsCreds("roots"), true},
		{"xds fallback tls", testutils.MarshalAny(&xdscredsv3.XdsCredentials{FallbackCredentials: tlsCreds("roots")}), true},
		{"wrong roots", tlsCreds("wrong-roots"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.Checks())
			e := authzEnv(t, edit)
			b := startBackend(t, "a")
			e.update(authzTree(t, b, testutils.ExtAuthzFilter(target, func(m *extauthzv3.ExtAuthz) {
				m.GetGrpcService().GetGoogleGrpc().ChannelCredentialsPlugin = []*anypb.Any{tc.plugin}
				m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
			})))
			_, err := call(e.ctx, e.dial(), grpc.WaitForReady(true))
			checks := len(a.Checks()) - before
			if tc.ok {
				if err != nil || checks != 1 {
					t.Fatalf("RPC: %v, %d checks; want OK after one check over mutual TLS", err, checks)
				}
				return
			}
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") || checks != 0 {
				t.Fatalf("RPC: %v, %d checks; want UNAVAILABLE (status_on_error 503) naming the certificate, no check", err, checks)
			}
		})
	}
}
