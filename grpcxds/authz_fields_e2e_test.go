package grpcxds_test

import (
	"slices"
	"strings"
	"testing"
	"time"

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
)

// authzFieldsEnv starts an authorization service (authzAllowUnlessDeny),
// a backend and a channel whose Listener runs ext_authz calling it,
// changed by change.
func authzFieldsEnv(t *testing.T, change func(*extauthzv3.ExtAuthz)) (*env, *testutils.AuthzServer, *backend, *grpc.ClientConn) {
	t.Helper()
	a, err := testutils.StartAuthzServer(authzAllowUnlessDeny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	e := authzEnv(t, testutils.AllowGRPCService(a.Target()))
	b := startBackend(t, "a")
	e.update(authzTree(t, b, testutils.ExtAuthzFilter(a.Target(), change)))
	return e, a, b, e.dial()
}

// filterDisabled sets filter_enabled to 0% and deny_at_disable to deny,
// status_on_error to HTTP 503.
func filterDisabled(deny bool) func(*extauthzv3.ExtAuthz) {
	return func(m *extauthzv3.ExtAuthz) {
		m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 0, Denominator: typev3.FractionalPercent_HUNDRED}}
		m.DenyAtDisable = &corev3.RuntimeFeatureFlag{DefaultValue: wrapperspb.Bool(deny)}
		m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
	}
}

// gRFC A92's configuration fields on a goxds channel of go-control-plane's
// resources: filter_enabled and deny_at_disable (a disabled filter asks
// nothing, and fails the RPC with status_on_error's code only if
// deny_at_disable says so); allowed_headers and disallowed_headers (the
// service hears the RPC's headers the first matches and the second does
// not; the request's time, method, path, size and protocol as the gRFC
// fills them); decoder_header_mutation_rules (a change they disallow is ignored,
// or under disallow_is_error fails the RPC, with UNKNOWN as Envoy's 500:
// A102 says only that the RPC fails).
func TestExtAuthzClientConfigFields(t *testing.T) {
	t.Run("filter disabled, deny_at_disable", func(t *testing.T) {
		e, a, _, conn := authzFieldsEnv(t, filterDisabled(true))
		_, err := call(e.ctx, conn, grpc.WaitForReady(true))
		if status.Code(err) != codes.Unavailable || len(a.Checks()) != 0 {
			t.Fatalf("RPC: %v after %d checks; want UNAVAILABLE (status_on_error 503) and none", err, len(a.Checks()))
		}
	})
	t.Run("filter disabled, allowed at disable", func(t *testing.T) {
		e, a, b, conn := authzFieldsEnv(t, filterDisabled(false))
		seenHeader(b, "x-authz", "")
		if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || len(a.Checks()) != 0 {
			t.Fatalf("RPC: %v after %d checks; want it served unasked", err, len(a.Checks()))
		}
	})
	t.Run("allowed and disallowed headers", func(t *testing.T) {
		e, a, _, conn := authzFieldsEnv(t, func(m *extauthzv3.ExtAuthz) {
			m.AllowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-"}}}}
			m.DisallowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}}
		})
		ctx := metadata.AppendToOutgoingContext(e.ctx, "x-a", "1", "x-secret", "s", "other", "o")
		start := time.Now()
		if _, err := call(ctx, conn, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		attrs := a.Checks()[0].Request.GetAttributes()
		// The rest of the request as the gRFC fills it on a client: its
		// start time, POST, the path, size -1, HTTP/2; no peers.
		http := attrs.GetRequest().GetHttp()
		if at := attrs.GetRequest().GetTime().AsTime(); at.Before(start.Truncate(time.Second)) || at.After(end) ||
			http.GetMethod() != "POST" || http.GetPath() != sayHello || http.GetSize() != -1 || http.GetProtocol() != "HTTP/2" ||
			attrs.GetSource() != nil || attrs.GetDestination() != nil {
			t.Errorf("request attributes %v (the RPC ran from %v to %v)", attrs, start, end)
		}
		var got []string
		for _, h := range http.GetHeaderMap().GetHeaders() {
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
		e, a, b, conn := authzFieldsEnv(t, rules(false))
		seenHeader(b, "x-authz", "")
		if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || len(a.Checks()) != 1 {
			t.Fatalf("RPC: %v after %d checks; want it served without the service's x-authz", err, len(a.Checks()))
		}
	})
	t.Run("mutation disallowed, an error", func(t *testing.T) {
		e, _, _, conn := authzFieldsEnv(t, rules(true))
		_, err := call(e.ctx, conn, grpc.WaitForReady(true))
		if status.Code(err) != codes.Unknown || !strings.Contains(status.Convert(err).Message(), `"x-authz"`) {
			t.Fatalf("RPC: %v; want UNKNOWN (Envoy's HTTP 500, dataplane/extauthz) naming x-authz", err)
		}
	})
}
