package grpcxds_test

import (
	"strings"
	"testing"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/testutils"
)

// gRFC A102's TlsCredentials on an ext_authz GrpcService from a trusted
// server: the side channel takes its roots and client certificate from
// the bootstrap's certificate provider instances (file_watcher) and
// reaches a mutual-TLS authorization service; XdsCredentials with a
// TlsCredentials fallback do the same. Roots that do not trust the
// service's certificate fail the handshake, so the check fails and the
// RPC gets status_on_error. The service requires a client certificate of
// its CA (testutils.SideTLS), so a side channel without TLS, or without
// the bootstrap's identity, never gets a check to it: the allowed cases
// would fail with status_on_error.
func TestExtAuthzClientTLSCredentials(t *testing.T) {
	side := testutils.NewSideTLS(t)
	a, err := testutils.StartAuthzServer(authzAllowUnlessDeny, side.ServerOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	for _, tc := range []struct {
		name   string
		plugin *anypb.Any
		ok     bool
	}{
		{"tls", side.Creds(testutils.SideRoots), true},
		{"xds fallback tls", side.XdsCreds(testutils.SideRoots), true},
		{"wrong roots", side.Creds(testutils.SideWrongRoots), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.Checks())
			e := authzEnv(t, side.Bootstrap)
			b := startBackend(t, "a")
			e.update(authzTree(t, b, testutils.ExtAuthzFilter(a.Target(), func(m *extauthzv3.ExtAuthz) {
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
