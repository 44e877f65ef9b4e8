package xdsserver_test

import (
	"slices"
	"strings"
	"testing"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// authzFieldsConn starts an authorization service (authzDecider) and a
// server whose Listener runs ext_authz calling it, changed by change, and
// dials it.
func authzFieldsConn(t *testing.T, change func(*extauthzv3.ExtAuthz)) (*env, *testutils.AuthzServer, *grpc.ClientConn) {
	t.Helper()
	a := startAuthz(t)
	e := authzEnv(t, testutils.AllowGRPCService(a.Target()), testutils.ExtAuthzFilter(a.Target(), change))
	e.waitMode(xdsserver.ServingModeServing)
	return e, a, e.dial()
}

// gRFC A92's configuration fields on an xDS-enabled server, configured by
// go-control-plane's server: filter_enabled and deny_at_disable (a
// disabled filter asks nothing, and fails the RPC with status_on_error's
// code only if deny_at_disable says so); allowed_headers and
// disallowed_headers (the service hears the request's headers the first
// matches and the second does not); decoder_header_mutation_rules (a
// change they disallow is ignored, or under disallow_is_error fails the
// RPC, with UNKNOWN as Envoy's 500).
func TestExtAuthzServerConfigFields(t *testing.T) {
	disabled := func(deny bool) func(*extauthzv3.ExtAuthz) {
		return func(m *extauthzv3.ExtAuthz) {
			m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 0, Denominator: typev3.FractionalPercent_HUNDRED}}
			m.DenyAtDisable = &corev3.RuntimeFeatureFlag{DefaultValue: wrapperspb.Bool(deny)}
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
		}
	}
	t.Run("filter disabled, deny_at_disable", func(t *testing.T) {
		e, a, conn := authzFieldsConn(t, disabled(true))
		if err := call(e.ctx, conn, sayHello); status.Code(err) != codes.Unavailable || len(a.Checks()) != 0 {
			t.Fatalf("RPC: %v after %d checks; want UNAVAILABLE (status_on_error 503) and none", err, len(a.Checks()))
		}
	})
	t.Run("filter disabled, allowed at disable", func(t *testing.T) {
		e, a, conn := authzFieldsConn(t, disabled(false))
		if got, err := echo(e.ctx, conn, "x-authz"); err != nil || got != "" || len(a.Checks()) != 0 {
			t.Fatalf("RPC: x-authz %q, %v after %d checks; want it served unasked", got, err, len(a.Checks()))
		}
	})
	t.Run("allowed and disallowed headers", func(t *testing.T) {
		e, a, conn := authzFieldsConn(t, func(m *extauthzv3.ExtAuthz) {
			m.AllowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-"}}}}
			m.DisallowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}}
		})
		ctx := metadata.AppendToOutgoingContext(e.ctx, "x-a", "1", "x-secret", "s", "other", "o")
		if err := call(ctx, conn, sayHello); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range a.Checks()[0].Request.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
			got = append(got, h.GetKey())
		}
		if !slices.Contains(got, "x-a") || slices.Contains(got, "x-secret") || slices.Contains(got, "other") {
			t.Fatalf("the service heard headers %q, want x-a and neither x-secret nor other", got)
		}
	})
	rules := func(isError bool) func(*extauthzv3.ExtAuthz) {
		return func(m *extauthzv3.ExtAuthz) {
			m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{
				DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-authz"},
				DisallowIsError:    wrapperspb.Bool(isError),
			}
		}
	}
	t.Run("mutation disallowed, ignored", func(t *testing.T) {
		e, a, conn := authzFieldsConn(t, rules(false))
		if got, err := echo(withWant(e.ctx, "allow"), conn, "x-authz"); err != nil || got != "" || len(a.Checks()) != 1 {
			t.Fatalf("RPC: x-authz %q, %v after %d checks; want it served without the service's x-authz", got, err, len(a.Checks()))
		}
	})
	t.Run("mutation disallowed, an error", func(t *testing.T) {
		e, _, conn := authzFieldsConn(t, rules(true))
		_, err := echo(withWant(e.ctx, "allow"), conn, "x-authz")
		if status.Code(err) != codes.Unknown || !strings.Contains(status.Convert(err).Message(), `"x-authz"`) {
			t.Fatalf("RPC: %v; want UNKNOWN (Envoy's HTTP 500, dataplane/extauthz) naming x-authz", err)
		}
	})
}
