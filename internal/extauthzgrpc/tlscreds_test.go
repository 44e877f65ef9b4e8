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
