package xdsserver_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// TLS on the side channels of an xDS-enabled server (gRFC A102), each
// case of testutils.SideTLS: from a trusted management server,
// TlsCredentials (and XdsCredentials falling back to them) whose roots
// and client certificate come from the server's bootstrap certificate
// provider instances; from an untrusted one, the "tls" credentials of the
// bootstrap's allowed_grpc_services entry. The services require a client
// certificate of their CA, so a side channel without TLS, or without the
// bootstrap's identity, reaches neither: the cases that want a check or a
// stream would fail. A trusted server's access token goes with each side
// call, as only a channel with privacy and integrity sends it.

// The authorization service over mutual TLS allows and denies as it
// decides, with TlsCredentials and with XdsCredentials falling back to
// them; under roots that do not trust it the check fails, and the RPC
// gets status_on_error naming the certificate, or with failure_mode_allow
// goes on with the header that says so.
func TestExtAuthzServerTLSCredentials(t *testing.T) {
	testutils.RunSideAuthz(t, authzDecider, func(t *testing.T, tc testutils.SideTLSCase, a *testutils.AuthzServer) {
		e := authzEnv(t, tc.Bootstrap(a.Target()), testutils.ExtAuthzFilter(a.Target(), tc.ExtAuthz))
		e.waitMode(xdsserver.ServingModeServing)
		conn := e.dial()
		if tc.Reached {
			if got, err := echo(withWant(e.ctx, "allow"), conn, "x-authz"); err != nil || got != "yes" {
				t.Fatalf("allowed: the handler saw x-authz %q, err %v; want the service's yes", got, err)
			}
			if err := call(withWant(e.ctx, "deny"), conn, sayHello); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("denied: %v, want UNAUTHENTICATED (the service's 401)", err)
			}
			tc.WantChecks(t, a, 2)
			return
		}
		got, err := echo(withWant(e.ctx, "allow"), conn, "x-envoy-auth-failure-mode-allowed")
		tc.WantChecks(t, a, 2)
		if tc.FailureModeAllow {
			if err != nil || got != "true" {
				t.Fatalf("failure_mode_allow: %v, x-envoy-auth-failure-mode-allowed %q; want served, true", err, got)
			}
			return
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%v, want UNAVAILABLE (status_on_error 503) naming the certificate", err)
		}
	})
}

// The processor over mutual TLS changes the client's headers, which the
// handler sees; under roots that do not trust it no stream opens, and the
// RPC fails with INTERNAL naming the certificate, or with
// failure_mode_allow is served unprocessed.
func TestExtProcServerTLSCredentials(t *testing.T) {
	testutils.RunSideProc(t, testutils.ProcMarking(testutils.ProcSetHeaders("x-proc", "yes"), nil, nil), func(t *testing.T, tc testutils.SideTLSCase, p *testutils.ProcServer) {
		e := authzEnv(t, tc.Bootstrap(p.Target()), testutils.ExtProcFilter(p.Target(), tc.ExtProc))
		e.waitMode(xdsserver.ServingModeServing)
		got, err := echo(e.ctx, e.dial(), "x-proc")
		tc.WantProc(t, got, err, p, "yes", "")
	})
}
