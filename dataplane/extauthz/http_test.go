package extauthz_test

import (
	"context"
	"strings"
	"testing"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/extauthz"
)

// httpRequest is request() as a plain HTTP request.
func httpRequest() *extauthz.Request {
	r := request()
	r.HTTP = &extauthz.HTTPAttributes{Method: "GET", Host: "svc.test", Scheme: "http", Protocol: "HTTP/1.1"}
	return r
}

func opts(kv ...string) []extauthz.HeaderOption {
	var out []extauthz.HeaderOption
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, extauthz.HeaderOption{Key: kv[i], Value: kv[i+1], Action: extauthz.OverwriteIfExistsOrAdd})
	}
	return out
}

// The same answers that gRFC A102 calls malformed for gRPC
// (TestInvalidHeaderChangeFailsTheCall) allow a plain HTTP request, as
// Envoy's HTTP filter does: grpc-*, host, upper case, any byte but the
// controls; a pseudo-header other than :authority and a pseudo-header or
// host to remove are left out, and so is an invalid change without
// validate_mutations.
func TestInterpretHTTPEnvoyRules(t *testing.T) {
	resp := &extauthz.CheckResponse{
		Headers:              opts("grpc-timeout", "1S", "X-Upper", "u", "x-obs", "caf\u00e9", ":authority", "other.test", ":path", "/evil", "x-bad", "a\nb", "x-envoy-a", "e"),
		HeadersToRemove:      []string{":authority", "host", "x/a", "x-secret"},
		ResponseHeadersToAdd: opts("grpc-status", "0", "host", "h"),
	}
	d := (&extauthz.Checker{Config: config(t, nil), Client: &fakeClient{resp: resp}}).Check(context.Background(), httpRequest())
	want := extauthz.Decision{Allow: true, Outcome: extauthz.Allowed,
		RequestHeaders: []extauthz.Mutation{
			{Key: "grpc-timeout", Value: "1S", Action: extauthz.OverwriteIfExistsOrAdd},
			{Key: "x-upper", Value: "u", Action: extauthz.OverwriteIfExistsOrAdd},
			{Key: "x-obs", Value: "caf\u00e9", Action: extauthz.OverwriteIfExistsOrAdd},
			{Key: "host", Value: "other.test", Action: extauthz.OverwriteIfExistsOrAdd},
			{Key: "x-envoy-a", Value: "e", Action: extauthz.OverwriteIfExistsOrAdd},
			{Key: "x-secret", Remove: true},
		},
		ResponseHeaders: []extauthz.Mutation{
			{Key: "grpc-status", Value: "0", Action: extauthz.OverwriteIfExistsOrAdd},
			{Key: "host", Value: "h", Action: extauthz.OverwriteIfExistsOrAdd},
		},
	}
	if !equalDecision(d, want) {
		t.Errorf("decision %+v\nwant %+v", d, want)
	}
	// gRPC keeps gRFC A102's rules.
	if d := (&extauthz.Checker{Config: config(t, nil), Client: &fakeClient{resp: resp}}).Check(context.Background(), request()); d.Outcome != extauthz.Failed {
		t.Errorf("gRPC: decision %+v, want failed (malformed)", d)
	}
}

func equalDecision(a, b extauthz.Decision) bool {
	eq := func(x, y []extauthz.Mutation) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return a.Allow == b.Allow && a.Outcome == b.Outcome && eq(a.RequestHeaders, b.RequestHeaders) &&
		eq(a.ResponseHeaders, b.ResponseHeaders) && eq(a.Trailers, b.Trailers)
}

// decoder_header_mutation_rules as Envoy orders them, on the request's
// headers only: a refused change is left out, or with disallow_is_error
// fails the request with 500; validate_mutations makes an invalid change
// a 500 whatever failure_mode_allow says.
func TestInterpretHTTPMutationRules(t *testing.T) {
	type tc struct {
		name    string
		rules   *mutationv3.HeaderMutationRules
		resp    *extauthz.CheckResponse
		applied []string // the request header keys changed, in order
		status  int      // non-zero: the request fails with it
	}
	re := func(s string) *matcherv3.RegexMatcher { return &matcherv3.RegexMatcher{Regex: s} }
	for _, c := range []tc{
		{"defaults", &mutationv3.HeaderMutationRules{}, &extauthz.CheckResponse{Headers: opts("x-envoy-a", "1", "host", "h", ":method", "PUT", "grpc-x", "1")}, []string{"grpc-x"}, 0},
		{"allow_envoy", &mutationv3.HeaderMutationRules{AllowEnvoy: wrapperspb.Bool(true)}, &extauthz.CheckResponse{Headers: opts("x-envoy-a", "1")}, []string{"x-envoy-a"}, 0},
		{"allow_all_routing", &mutationv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true)}, &extauthz.CheckResponse{Headers: opts("host", "h")}, []string{"host"}, 0},
		{"allow_expression before the defaults", &mutationv3.HeaderMutationRules{AllowExpression: re("x-envoy-ok")}, &extauthz.CheckResponse{Headers: opts("x-envoy-ok", "1", "x-other", "1")}, []string{"x-envoy-ok", "x-other"}, 0},
		{"disallow_expression before allow_expression", &mutationv3.HeaderMutationRules{AllowExpression: re("x-.*"), DisallowExpression: re("x-no")}, &extauthz.CheckResponse{Headers: opts("x-no", "1", "x-yes", "1")}, []string{"x-yes"}, 0},
		{"disallow_all", &mutationv3.HeaderMutationRules{DisallowAll: wrapperspb.Bool(true)}, &extauthz.CheckResponse{Headers: opts("x-a", "1"), HeadersToRemove: []string{"x-secret"}, ResponseHeadersToAdd: opts("x-r", "1")}, nil, 0},
		{"disallow_is_error", &mutationv3.HeaderMutationRules{DisallowIsError: wrapperspb.Bool(true)}, &extauthz.CheckResponse{Headers: opts("x-a", "1", "x-envoy-a", "1")}, nil, 500},
		{"disallow_is_error on a removal", &mutationv3.HeaderMutationRules{DisallowIsError: wrapperspb.Bool(true), DisallowExpression: re("x-secret")}, &extauthz.CheckResponse{HeadersToRemove: []string{"x-secret"}}, nil, 500},
		{"no rules", nil, &extauthz.CheckResponse{Headers: opts("x-envoy-a", "1", "host", "h")}, []string{"x-envoy-a", "host"}, 0},
	} {
		cfg := config(t, func(m *extauthzv3.ExtAuthz) { m.DecoderHeaderMutationRules = c.rules })
		d := (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: c.resp}}).Check(context.Background(), httpRequest())
		if c.status != 0 {
			if d.Allow || d.HTTPStatus != c.status {
				t.Errorf("%s: decision %+v, want failed with %d", c.name, d, c.status)
			}
			continue
		}
		var keys []string
		for _, m := range d.RequestHeaders {
			keys = append(keys, m.Key)
		}
		if !d.Allow || strings.Join(keys, ",") != strings.Join(c.applied, ",") {
			t.Errorf("%s: decision %+v, want allowed changing %v", c.name, d, c.applied)
		}
		if c.name == "disallow_all" && len(d.ResponseHeaders) != 1 {
			t.Errorf("disallow_all: response headers %v, want x-r: the rules are the request's", d.ResponseHeaders)
		}
	}
	cfg := config(t, func(m *extauthzv3.ExtAuthz) { m.ValidateMutations, m.FailureModeAllow = true, true })
	for _, resp := range []*extauthz.CheckResponse{
		{Headers: opts("x-bad", "a\rb")},
		{ResponseHeadersToAdd: opts("bad name", "v")},
		{Code: codePermissionDenied, DeniedHeaders: opts("x-r", "\x00")},
	} {
		d := (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: resp}}).Check(context.Background(), httpRequest())
		if d.Allow || d.HTTPStatus != 500 || !strings.Contains(d.Message, "validate_mutations") {
			t.Errorf("validate_mutations, %+v: decision %+v, want failed with 500", resp, d)
		}
	}
	d := (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: &extauthz.CheckResponse{HeadersToRemove: []string{"bad name"}}}}).Check(context.Background(), httpRequest())
	if !d.Allow || len(d.RequestHeaders) != 0 {
		t.Errorf("validate_mutations, an invalid name to remove: decision %+v, want allowed unchanged", d)
	}
}

// FuzzInterpretHTTP: whatever the service answers, a plain HTTP request's
// decision never panics, and every change it makes is one net/http can
// carry.
func FuzzInterpretHTTP(f *testing.F) {
	f.Add("x-a", "v", "x-b", ":authority", "h", true)
	f.Add("Grpc-X", "a\nb", ":path", "host", "", false)
	f.Fuzz(func(t *testing.T, k1, v1, remove, k2, v2 string, validate bool) {
		cfg := config(t, func(m *extauthzv3.ExtAuthz) {
			m.ValidateMutations = validate
			m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true)}
		})
		resp := &extauthz.CheckResponse{Headers: opts(k1, v1), HeadersToRemove: []string{remove}, ResponseHeadersToAdd: opts(k2, v2)}
		d, err := extauthz.InterpretHTTP(cfg, resp)
		if err != nil {
			return
		}
		for _, m := range append(d.RequestHeaders, d.ResponseHeaders...) {
			if m.Key == "" || strings.HasPrefix(m.Key, ":") || m.Key != strings.ToLower(m.Key) || strings.ContainsAny(m.Key+m.Value, "\r\n\x00") {
				t.Fatalf("change %+v net/http cannot carry", m)
			}
		}
	})
}
