package grpcxds_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// gRFC A92: the channel to the authorization service is not made again
// on a Listener update that keeps its target and credentials. Here the
// updates change the GrpcService's initial metadata, its timeout and the
// failure mode; once each is in effect (the service sees the new
// metadata), every check so far has come over the one connection the
// channel made first. A second service named by a later update gets
// checks of its own.
func TestExtAuthzSideChannelKeptAcrossUpdates(t *testing.T) {
	var mu sync.Mutex
	peers := map[string]int{} // the service's peer addresses, by checks
	a, err := testutils.StartAuthzServer(func(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		if p, ok := peer.FromContext(ctx); ok {
			mu.Lock()
			peers[p.Addr.String()]++
			mu.Unlock()
		}
		return authzAllowUnlessDeny(ctx, req)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	e := authzEnv(t, func(c *bootstrap.Config) {
		c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
	})
	b := startBackend(t, "a")
	conn := e.dial()
	// tenant sends the filter with initial metadata x-tenant: tenant and
	// more changed by change, and waits for a check that carries it.
	update := func(tenant string, change func(*extauthzv3.ExtAuthz)) {
		t.Helper()
		e.update(authzTree(t, b, testutils.ExtAuthzFilter(a.Target(), func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().InitialMetadata = []*corev3.HeaderValue{{Key: "x-tenant", RawValue: []byte(tenant)}}
			if change != nil {
				change(m)
			}
		})))
		for {
			if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
				t.Fatalf("x-tenant %s: %v", tenant, err)
			}
			checks := a.Checks()
			if strings.Join(checks[len(checks)-1].Metadata.Get("x-tenant"), ",") == tenant {
				return
			}
		}
	}
	update("blue", nil)
	update("green", func(m *extauthzv3.ExtAuthz) { m.GetGrpcService().Timeout = durationpb.New(testTimeout) })
	update("red", func(m *extauthzv3.ExtAuthz) { m.FailureModeAllow = true })
	mu.Lock()
	if len(peers) != 1 {
		t.Errorf("the service was called from %v (address: checks), want one connection kept across the updates", peers)
	}
	mu.Unlock()

	a2, err := testutils.StartAuthzServer(authzAllowUnlessDeny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a2.Stop)
	e.update(authzTree(t, b, testutils.ExtAuthzFilter(a2.Target(), nil)))
	for len(a2.Checks()) == 0 {
		if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
			t.Fatalf("after naming another service: %v", err)
		}
	}
}
