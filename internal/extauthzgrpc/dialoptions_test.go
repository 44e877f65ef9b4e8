package extauthzgrpc_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// The owner's DialOptions reach the channel (its stats handler sees the
// check, in the caller's context), and cannot replace the credentials
// gRFC A102 gives it: a TLS credential among them does not stop the
// plaintext the service's GrpcService names.
func TestDialOptionsBeforeCredentials(t *testing.T) {
	a, err := testutils.StartAuthzServer(func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	side := new(testutils.TraceTagger)
	chans := &extauthzgrpc.Channels{DialOptions: []grpc.DialOption{
		grpc.WithStatsHandler(side),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{})),
	}}
	defer chans.Close()
	c, err := chans.Client(&resources.GrpcService{TargetURI: a.Target(), Trusted: true, ChannelCredentials: resources.GrpcChannelInsecure})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Check(testutils.WithTrace(ctx, "t"), &extauthz.CheckRequest{})
	if err != nil || resp.Code != 0 {
		t.Fatalf("Check = %+v, %v; want OK over plaintext", resp, err)
	}
	if got := side.Seen(); len(got) != 1 || got[0] != (testutils.TraceSeen{Method: testutils.AuthzCheckMethod, Trace: "t"}) {
		t.Errorf("the channel's stats handler saw %v, want the check with trace t", got)
	}
}
