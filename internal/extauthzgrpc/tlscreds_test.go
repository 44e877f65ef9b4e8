package extauthzgrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

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
