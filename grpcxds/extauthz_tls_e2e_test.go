package grpcxds_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/testutils"
)

// gRFC A102's TlsCredentials on an ext_authz GrpcService from a trusted
// server: the side channel takes its roots and client certificate from
// the bootstrap's certificate provider instances (file_watcher) and
// reaches a mutual-TLS authorization service; XdsCredentials with a
// TlsCredentials fallback do the same, and so does an untrusted server's
// GrpcService with the "tls" credentials of the bootstrap's
// allowed_grpc_services entry. Roots that do not trust the service's
// certificate fail the handshake, so the check fails and the RPC gets
// status_on_error naming the certificate, or with failure_mode_allow goes
// on. The service requires a client certificate of its CA
// (testutils.SideTLS), so a side channel without TLS, or without the
// bootstrap's identity, never gets a check to it: the reached cases would
// fail with status_on_error. A trusted server's access token goes with
// the check, as only TLS sends it.
func TestExtAuthzClientTLSCredentials(t *testing.T) {
	testutils.RunSideAuthz(t, authzAllowUnlessDeny, func(t *testing.T, tc testutils.SideTLSCase, a *testutils.AuthzServer) {
		e := authzEnv(t, tc.Bootstrap(a.Target()))
		b := startBackend(t, "a")
		e.update(authzTree(t, b, testutils.ExtAuthzFilter(a.Target(), tc.ExtAuthz)))
		_, err := call(e.ctx, e.dial(), grpc.WaitForReady(true))
		if tc.Reached || tc.FailureModeAllow {
			if err != nil {
				t.Fatalf("RPC: %v, want OK", err)
			}
		} else if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("RPC: %v, want UNAVAILABLE (status_on_error 503) naming the certificate", err)
		}
		tc.WantChecks(t, a, 1)
	})
}
