package httpxds_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/goxds/xds/testutils"
)

// TLS on the side channels of the HTTP server and the HTTP client (their
// ext_authz filters; neither runs ext_proc), gRFC A102, each case of
// testutils.SideTLS: from a trusted management server, TlsCredentials
// (and XdsCredentials falling back to them) whose roots and client
// certificate come from the bootstrap's certificate provider instances;
// from an untrusted one, the "tls" credentials of the bootstrap's
// allowed_grpc_services entry. The authorization service requires a
// client certificate of its CA, so a side channel without TLS, or without
// the bootstrap's identity, never gets a check to it: the reached cases
// would answer 503. A trusted server's access token goes with each check,
// as only a channel with privacy and integrity sends it.

// The server's filter reaches the service over mutual TLS, which allows
// and denies; under roots that do not trust it the request gets
// status_on_error, the handshake's failure logged, or with
// failure_mode_allow reaches the handler with the header that says so.
func TestServerExtAuthzTLSCredentials(t *testing.T) {
	testutils.RunSideAuthz(t, serverAuthzDecide, func(t *testing.T, tc testutils.SideTLSCase, a *testutils.AuthzServer) {
		logs := make(records, 64)
		e := newEnv(t, envOptions{edit: tc.Bootstrap(a.Target()), handler: authzHandler, logger: slog.New(logs)})
		e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, testutils.ExtAuthzFilter(a.Target(), tc.ExtAuthz)))
		got := e.get("/x", "X-Want: allow")
		switch {
		case tc.Reached:
			e.want(got, http.StatusOK, "x-authz=yes x-secret= failure-allowed= ")
			e.want(e.get("/x", "X-Want: deny"), http.StatusUnauthorized, "go away")
		case tc.FailureModeAllow:
			e.want(got, http.StatusOK, "x-authz= x-secret= failure-allowed=true")
		default:
			e.want(got, http.StatusServiceUnavailable, `ext_authz filter "authz" could not authorize the request`)
			if l := nextLog(t, e.ctx, logs, "ext_authz refused"); !strings.Contains(l, "certificate") {
				t.Errorf("logged %q, want the handshake's failure, naming the certificate", l)
			}
		}
		tc.WantChecks(t, a, 2)
	})
}

// The client's filter does the same: the service over mutual TLS allows
// (the backend gets its header) and denies (the backend gets nothing);
// under wrong roots the request is answered with status_on_error naming
// the certificate, or with failure_mode_allow reaches the backend marked.
func TestClientExtAuthzTLSCredentials(t *testing.T) {
	testutils.RunSideAuthz(t, authzDecide, func(t *testing.T, tc testutils.SideTLSCase, a *testutils.AuthzServer) {
		e := newCEnv(t, cenvOptions{edit: tc.Bootstrap(a.Target())})
		b := newBackend(t, "a")
		e.update(authzWorld(b, testutils.ExtAuthzFilter(a.Target(), tc.ExtAuthz)))
		got := e.get("/x", "x-want: allow")
		switch {
		case tc.Reached:
			if got.status != http.StatusOK || b.count() != 1 {
				t.Fatalf("allowed: %d %q, %d requests at the backend; want its 200", got.status, got.body, b.count())
			}
			if v := b.last().Header.Get("X-Authz"); v != "yes" {
				t.Errorf("the backend saw X-Authz %q, want the service's yes", v)
			}
			e.want(e.get("/x", "x-want: deny"), http.StatusUnauthorized, "who are you?")
			if n := b.count(); n != 1 {
				t.Errorf("%d requests at the backend, want only the allowed one", n)
			}
		case tc.FailureModeAllow:
			if got.status != http.StatusOK || b.count() != 1 {
				t.Fatalf("failure_mode_allow: %d %q, %d requests at the backend; want its 200", got.status, got.body, b.count())
			}
			if v := b.last().Header.Get("X-Envoy-Auth-Failure-Mode-Allowed"); v != "true" {
				t.Errorf("the backend saw X-Envoy-Auth-Failure-Mode-Allowed %q, want true", v)
			}
		default:
			e.want(got, http.StatusServiceUnavailable, "certificate")
			if b.count() != 0 {
				t.Error("the request reached the backend")
			}
		}
		tc.WantChecks(t, a, 2)
	})
}
