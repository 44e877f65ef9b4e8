package extauthzgrpc_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// gRFC A102's XdsCredentials on a side channel is its fallback: one whose
// fallback is insecure reaches a plaintext service.
func TestXdsCredentialsFallBack(t *testing.T) {
	a, err := testutils.StartAuthzServer(func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	chans := &extauthzgrpc.Channels{}
	defer chans.Close()
	c, err := chans.Client(&resources.GrpcService{TargetURI: a.Target(), Trusted: true, ChannelCredentials: resources.GrpcChannelInsecure, XdsFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := c.Check(ctx, &extauthz.CheckRequest{}); err != nil || resp.Code != 0 {
		t.Fatalf("Check = %+v, %v; want OK", resp, err)
	}
}

// TlsCredentials whose instances cannot be built (no bootstrap: decoded
// outside a client; an instance the bootstrap lacks) refuse the channel
// with an error saying why, never dialling without TLS.
func TestTLSCredentialsUnbuildable(t *testing.T) {
	chans := &extauthzgrpc.Channels{}
	defer chans.Close()
	for _, tc := range []struct {
		b    *bootstrap.Config
		want string
	}{
		{nil, `TlsCredentials for "dns:///authz.example.com": no bootstrap to build certificate provider instances from`},
		{&bootstrap.Config{}, `certificate_providers has no instance "roots"`},
	} {
		_, err := chans.Client(&resources.GrpcService{TargetURI: "dns:///authz.example.com", Trusted: true,
			ChannelCredentials: resources.GrpcChannelTLS, TLS: &resources.GrpcTLSCredentials{RootInstance: "roots", Bootstrap: tc.b}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Client = %v, want %q", err, tc.want)
		}
	}
}

// One owner's side channels are told apart by their credentials, not only
// their target: a TlsCredentials GrpcService to a target a plaintext
// channel already reaches gets a TLS channel of its own, which the
// plaintext service refuses (sharing the plaintext channel would send in
// the clear what was configured to go over TLS); insecure credentials to
// a target a TLS channel reaches get a plaintext channel, which the TLS
// service refuses; and roots that trust the service do not get the
// channel of roots that do not. The access token goes only over TLS
// (gRFC A102).
func TestChannelsKeyedByCredentials(t *testing.T) {
	allow := func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	}
	side := testutils.NewSideTLS(t)
	b := &bootstrap.Config{}
	side.Providers(b)
	plain, err := testutils.StartAuthzServer(allow)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	secure, err := testutils.StartAuthzServer(allow, side.ServerOption())
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Stop()

	chans := &extauthzgrpc.Channels{}
	defer chans.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func(target string, creds resources.GrpcChannelCredentials, roots string) error {
		gs := &resources.GrpcService{TargetURI: target, Trusted: true, ChannelCredentials: creds, AccessTokens: []string{testutils.SideToken}}
		if creds == resources.GrpcChannelTLS {
			gs.TLS = &resources.GrpcTLSCredentials{RootInstance: roots, IdentityInstance: testutils.SideIdentity, Bootstrap: b}
		}
		c, err := chans.Client(gs)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Check(ctx, &extauthz.CheckRequest{})
		return err
	}
	for _, step := range []struct {
		name          string
		server        *testutils.AuthzServer
		creds         resources.GrpcChannelCredentials
		roots         string
		ok            bool
		authorization string
	}{
		{"insecure to the plaintext service", plain, resources.GrpcChannelInsecure, "", true, ""},
		{"tls to the plaintext service", plain, resources.GrpcChannelTLS, testutils.SideRoots, false, ""},
		{"wrong roots to the TLS service", secure, resources.GrpcChannelTLS, testutils.SideWrongRoots, false, ""},
		{"tls to the TLS service", secure, resources.GrpcChannelTLS, testutils.SideRoots, true, "Bearer " + testutils.SideToken},
		{"insecure to the TLS service", secure, resources.GrpcChannelInsecure, "", false, ""},
	} {
		before := len(step.server.Checks())
		err := check(step.server.Target(), step.creds, step.roots)
		checks := step.server.Checks()[before:]
		if !step.ok {
			if err == nil || len(checks) != 0 {
				t.Fatalf("%s: check succeeded (%d reached the service); want its handshake refused", step.name, len(checks))
			}
			continue
		}
		if err != nil || len(checks) != 1 {
			t.Fatalf("%s: %v, %d checks; want one", step.name, err, len(checks))
		}
		if got := strings.Join(checks[0].Metadata.Get("authorization"), ","); got != step.authorization {
			t.Errorf("%s: authorization %q, want %q", step.name, got, step.authorization)
		}
	}
}

// A TlsCredentials identity whose file_watcher files are missing fails
// each call at once, naming the instance and the file, rather than holding
// it until its deadline for a connection that cannot be made; once the
// files are written, a later call gets through, long before the
// provider's own refresh would have read them.
func TestTLSCredentialsMissingFilesFailFast(t *testing.T) {
	allow := func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	}
	side := testutils.NewSideTLS(t)
	b := &bootstrap.Config{}
	side.Providers(b)
	var id struct {
		Cert string `json:"certificate_file"`
		Key  string `json:"private_key_file"`
	}
	if err := json.Unmarshal(b.CertificateProviders[testutils.SideIdentity].Config, &id); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	late := struct {
		Cert    string `json:"certificate_file"`
		Key     string `json:"private_key_file"`
		Refresh string `json:"refresh_interval"`
	}{filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), "3600s"}
	cfg, err := json.Marshal(late)
	if err != nil {
		t.Fatal(err)
	}
	b.CertificateProviders["late-id"] = bootstrap.CertificateProvider{PluginName: "file_watcher", Config: cfg}
	secure, err := testutils.StartAuthzServer(allow, side.ServerOption())
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Stop()

	// A short reconnect backoff: the attempt after the files appear comes
	// soon.
	chans := &extauthzgrpc.Channels{DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1, MaxDelay: 10 * time.Millisecond},
		MinConnectTimeout: 10 * time.Second})}}
	defer chans.Close()
	c, err := chans.Client(&resources.GrpcService{TargetURI: secure.Target(), Trusted: true, ChannelCredentials: resources.GrpcChannelTLS,
		TLS: &resources.GrpcTLSCredentials{RootInstance: testutils.SideRoots, IdentityInstance: "late-id", Bootstrap: b}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// gRPC quotes the handshake's error in the status message.
	want := `no identity certificate: certificate provider instance \"late-id\" (file_watcher) has none yet: certificate_file: open ` + late.Cert
	_, err = c.Check(ctx, &extauthz.CheckRequest{})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("check with the identity's files missing: %v, want an error containing %q", err, want)
	}

	for _, f := range [][2]string{{id.Cert, late.Cert}, {id.Key, late.Key}} {
		pem, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], pem, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Calls fail with the cached error until the channel's next attempt,
	// which reads the files: each failure must be that error.
	for {
		_, err := c.Check(ctx, &extauthz.CheckRequest{})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("check after the files were written: %v, want success (or, until the channel reconnects, %q)", err, want)
		}
	}
	if n := len(secure.Checks()); n != 1 {
		t.Errorf("%d checks reached the service, want 1", n)
	}
}
