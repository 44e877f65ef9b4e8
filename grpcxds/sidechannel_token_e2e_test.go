package grpcxds_test

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	accesstokenv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/call_credentials/access_token/v3"
	tlscredsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/tls/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// gRFC A102's AccessTokenCredentials on an ext_authz GrpcService from a
// trusted server: the token goes to the authorization service as
// "authorization: Bearer <token>", and only on a channel with privacy and
// integrity: over TLS the service sees it; over plaintext it does not,
// and the check is still made.
func TestExtAuthzClientAccessTokens(t *testing.T) {
	pki := testutils.NewPKI(t)
	srvCert := pki.Issue("authz", testutils.CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	a, err := testutils.StartAuthzServer(authzAllowUnlessDeny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	// The same service over TLS.
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srvCert.TLS}})))
	authv3.RegisterAuthorizationServer(srv, a)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	roots, err := json.Marshal(map[string]string{"ca_certificate_file": pki.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(c *bootstrap.Config) {
		c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
		c.CertificateProviders = map[string]bootstrap.CertificateProvider{"roots": {PluginName: "file_watcher", Config: roots}}
	}
	// One token: of several, grpc-go's transport keeps the last one's
	// authorization header (per-RPC credentials' metadata is merged into
	// one map), which the gRFC leaves open.
	tokens := []*anypb.Any{testutils.MarshalAny(&accesstokenv3.AccessTokenCredentials{Token: "secret"})}
	for _, tc := range []struct {
		name   string
		target string
		tls    bool
		want   string
	}{
		{"tls", "passthrough:///" + lis.Addr().String(), true, "Bearer secret"},
		{"insecure", a.Target(), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.Checks())
			e := authzEnv(t, edit)
			b := startBackend(t, "a")
			e.update(authzTree(t, b, testutils.ExtAuthzFilter(tc.target, func(m *extauthzv3.ExtAuthz) {
				gg := m.GetGrpcService().GetGoogleGrpc()
				gg.CallCredentialsPlugin = tokens
				if tc.tls {
					gg.ChannelCredentialsPlugin = []*anypb.Any{testutils.MarshalAny(&tlscredsv3.TlsCredentials{
						RootCertificateProvider: &tlsv3.CommonTlsContext_CertificateProviderInstance{InstanceName: "roots"},
					})}
				}
			})))
			if _, err := call(e.ctx, e.dial(), grpc.WaitForReady(true)); err != nil {
				t.Fatal(err)
			}
			checks := a.Checks()[before:]
			if len(checks) != 1 {
				t.Fatalf("%d checks, want 1", len(checks))
			}
			if got := strings.Join(checks[0].Metadata.Get("authorization"), ","); got != tc.want {
				t.Fatalf("the service saw authorization %q, want %q", got, tc.want)
			}
		})
	}
}

// gRFC A102 with A97's call credentials: a GrpcService from an untrusted
// server gets the credentials of its allowed_grpc_services entry, call
// credentials included. Here a TLS entry with a jwt_token_file: the
// authorization service sees the file's token as a bearer token, and none
// of the GrpcService's own initial metadata.
func TestExtAuthzClientAllowedServiceCallCredentials(t *testing.T) {
	pki := testutils.NewPKI(t)
	srvCert := pki.Issue("authz", testutils.CertOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	a, err := testutils.StartAuthzServer(authzAllowUnlessDeny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srvCert.TLS}})))
	authv3.RegisterAuthorizationServer(srv, a)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	target := "passthrough:///" + lis.Addr().String()

	// An unsigned JWT: the client reads only its exp (gRFC A97).
	enc := base64.RawURLEncoding
	token := enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(fmt.Sprintf(`{"sub":"side","exp":%d}`, time.Now().Add(time.Hour).Unix()))) + "." + enc.EncodeToString([]byte("sig"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := json.Marshal(map[string]string{"ca_certificate_file": pki.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	e := authzEnv(t, func(c *bootstrap.Config) {
		c.AllowedGRPCServices = map[string]bootstrap.AllowedGRPCService{target: {
			ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsTLS, Config: tlsConfig}},
			CallCreds:    []bootstrap.CallCreds{{Type: bootstrap.CallCredsJWTTokenFile, JWT: &bootstrap.JWTCallCreds{TokenFile: tokenFile}}},
		}}
	})
	b := startBackend(t, "a")
	e.update(authzTree(t, b, testutils.ExtAuthzFilter(target, nil)))
	if _, err := call(e.ctx, e.dial(), grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	checks := a.Checks()
	if len(checks) != 1 {
		t.Fatalf("%d checks, want 1", len(checks))
	}
	md := checks[0].Metadata
	if got := strings.Join(md.Get("authorization"), ","); got != "Bearer "+token || len(md.Get("x-tenant")) != 0 {
		t.Fatalf("the service saw authorization %q and x-tenant %q; want the token file's bearer token, no initial metadata", got, md.Get("x-tenant"))
	}
}
