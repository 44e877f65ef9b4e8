package extauthz_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/extauthz"
)

// The tests of gRFC A92's revision of 2026-05-26, whose header changes
// follow gRFC A102.

// A header change that gRFC A102 calls invalid, in any of the fields that
// carry one, makes the call failed: the request fails with
// status_on_error, or goes on under failure_mode_allow with no change of
// the service's made.
func TestInvalidHeaderChangeFailsTheCall(t *testing.T) {
	opt := func(k, v string) []extauthz.HeaderOption {
		return []extauthz.HeaderOption{{Key: k, Value: v, Action: extauthz.OverwriteIfExistsOrAdd}}
	}
	for name, resp := range map[string]*extauthz.CheckResponse{
		"ok_response.headers host":                  {Headers: opt("host", "evil")},
		"ok_response.headers pseudo-header":         {Headers: opt(":path", "/evil")},
		"ok_response.headers grpc-":                 {Headers: opt("grpc-timeout", "1S")},
		"ok_response.headers bad name":              {Headers: opt("x a", "1")},
		"ok_response.headers bad value":             {Headers: opt("x-a", "line\nbreak")},
		"ok_response.headers long value":            {Headers: opt("x-a", strings.Repeat("v", 16385))},
		"headers_to_remove pseudo-header":           {HeadersToRemove: []string{":authority"}},
		"headers_to_remove bad name":                {HeadersToRemove: []string{"x/a"}},
		"response_headers_to_add grpc-":             {ResponseHeadersToAdd: opt("grpc-status", "0")},
		"response_headers_to_add host":              {ResponseHeadersToAdd: opt("host", "h")},
		"denied_response.headers pseudo-header":     {Code: codePermissionDenied, DeniedHeaders: opt(":status", "200")},
		"denied_response.headers grpc-":             {Code: codePermissionDenied, DeniedHeaders: opt("grpc-message", "m")},
		"denied_response.headers bad value":         {Code: codePermissionDenied, DeniedHeaders: opt("x-reason", "\x7f")},
		"ok_response.headers valid, then malformed": {Headers: append(opt("x-fine", "1"), opt("x-Upper", "1")...)},
	} {
		cfg := config(t, func(m *extauthzv3.ExtAuthz) {
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
		})
		d := (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: resp}}).Check(context.Background(), request())
		if d.Allow || d.Outcome != extauthz.Failed || d.Code != codeUnavailable || !strings.Contains(d.Message, "malformed") {
			t.Errorf("%s: decision %+v, want failed with status_on_error", name, d)
		}
		cfg = config(t, func(m *extauthzv3.ExtAuthz) { m.FailureModeAllow = true })
		d = (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: resp}}).Check(context.Background(), request())
		if !d.Allow || d.Outcome != extauthz.Failed || len(d.RequestHeaders)+len(d.ResponseHeaders)+len(d.Trailers) != 0 {
			t.Errorf("%s, failure_mode_allow: decision %+v, want let through unchanged", name, d)
		}
	}
	// A -bin header's value is raw bytes: any is valid.
	resp := &extauthz.CheckResponse{Headers: opt("trace-bin", "\x00\xff\n")}
	if d := (&extauthz.Checker{Config: config(t, nil), Client: &fakeClient{resp: resp}}).Check(context.Background(), request()); !d.Allow || d.Outcome != extauthz.Allowed {
		t.Errorf("binary header: decision %+v", d)
	}
}

// decoder_header_mutation_rules cover every change the service asks for:
// the response headers and a denial's trailers too, not the request's
// headers alone. host is never changed, removal included.
func TestMutationRulesCoverEveryField(t *testing.T) {
	rules := func(isError bool) func(m *extauthzv3.ExtAuthz) {
		return func(m *extauthzv3.ExtAuthz) {
			m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{
				DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-internal-.*"},
				DisallowIsError:    wrapperspb.Bool(isError),
			}
		}
	}
	add := []extauthz.HeaderOption{
		{Key: "x-internal-user", Value: "root", Action: extauthz.AppendIfExistsOrAdd},
		{Key: "x-ok", Value: "1", Action: extauthz.AppendIfExistsOrAdd},
	}
	ctx := context.Background()

	d := (&extauthz.Checker{Config: config(t, rules(false)), Client: &fakeClient{resp: &extauthz.CheckResponse{
		ResponseHeadersToAdd: add, HeadersToRemove: []string{"host", "x-internal-a", "x-user"},
	}}}).Check(ctx, request())
	want := []extauthz.Mutation{{Key: "x-ok", Value: "1"}}
	if !d.Allow || !reflect.DeepEqual(d.ResponseHeaders, want) {
		t.Errorf("allowed: response headers %+v, want %+v", d.ResponseHeaders, want)
	}
	if wantReq := []extauthz.Mutation{{Key: "x-user", Remove: true}}; !reflect.DeepEqual(d.RequestHeaders, wantReq) {
		t.Errorf("allowed: request header changes %+v, want %+v", d.RequestHeaders, wantReq)
	}
	d = (&extauthz.Checker{Config: config(t, rules(false)), Client: &fakeClient{resp: &extauthz.CheckResponse{
		Code: codePermissionDenied, DeniedHeaders: add,
	}}}).Check(ctx, request())
	if d.Allow || d.Outcome != extauthz.Denied || !reflect.DeepEqual(d.Trailers, want) {
		t.Errorf("denied: decision %+v, want trailers %+v", d, want)
	}

	for name, resp := range map[string]*extauthz.CheckResponse{
		"response_headers_to_add": {ResponseHeadersToAdd: add},
		"denied_response.headers": {Code: codePermissionDenied, DeniedHeaders: add},
		"headers_to_remove host":  {HeadersToRemove: []string{"host"}},
	} {
		d := (&extauthz.Checker{Config: config(t, rules(true)), Client: &fakeClient{resp: resp}}).Check(ctx, request())
		if d.Allow || d.Outcome != extauthz.Failed || d.Code != codeUnknown || d.HTTPStatus != 500 {
			t.Errorf("%s with disallow_is_error: decision %+v, want failed", name, d)
		}
	}
}

// A disallowed change is a violation even where it would change nothing
// (gRFC A102): an ADD_IF_ABSENT of a header the request has.
func TestDisallowedNoOpIsViolation(t *testing.T) {
	cfg := config(t, func(m *extauthzv3.ExtAuthz) {
		m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{
			DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-user"}, DisallowIsError: wrapperspb.Bool(true),
		}
	})
	resp := &extauthz.CheckResponse{Headers: []extauthz.HeaderOption{{Key: "x-user", Value: "bob", Action: extauthz.AddIfAbsent}}}
	if d := (&extauthz.Checker{Config: cfg, Client: &fakeClient{resp: resp}}).Check(context.Background(), request()); d.Allow || d.Code != codeUnknown {
		t.Errorf("decision %+v, want failed", d)
	}
}

// A change that leaves a header empty keeps it, whatever keep_empty_value
// says (gRFC A102 does not read the field).
func TestEmptyValueKept(t *testing.T) {
	resp := &extauthz.CheckResponse{
		Headers:              []extauthz.HeaderOption{{Key: "x-user", Value: "", Action: extauthz.OverwriteIfExistsOrAdd}},
		ResponseHeadersToAdd: []extauthz.HeaderOption{{Key: "x-r", Value: "", Action: extauthz.AppendIfExistsOrAdd}},
	}
	d := (&extauthz.Checker{Config: config(t, nil), Client: &fakeClient{resp: resp}}).Check(context.Background(), request())
	h := map[string][]string{"x-user": {"alice"}}
	extauthz.Apply(h, d.RequestHeaders)
	r := map[string][]string{}
	extauthz.Apply(r, d.ResponseHeaders)
	if !reflect.DeepEqual(h, map[string][]string{"x-user": {""}}) || !reflect.DeepEqual(r, map[string][]string{"x-r": {""}}) {
		t.Errorf("request headers %v, response headers %v: want the empty values kept", h, r)
	}
}

// A denial's message carries the text of the service's status (gRFC A92);
// its code is denied_response's.
func TestDenialCarriesServiceMessage(t *testing.T) {
	resp := &extauthz.CheckResponse{Code: codeUnauthenticated, Message: "token expired", DeniedStatus: 403}
	d := (&extauthz.Checker{Config: config(t, nil), Client: &fakeClient{resp: resp}}).Check(context.Background(), request())
	if d.Allow || d.Code != codePermissionDenied || !strings.HasSuffix(d.Message, ": token expired") {
		t.Errorf("decision %+v, want PERMISSION_DENIED with the service's message", d)
	}
}

// filter_enabled draws in [0, 100) (gRFC A92, 2026-05-26: not [0, 100]):
// at 99% the last draw, 99, is out; at 0% every request is.
func TestFilterEnabledRange(t *testing.T) {
	for _, tc := range []struct {
		pct, draw uint32
		checked   bool
	}{{99, 98, true}, {99, 99, false}, {0, 0, false}, {1, 0, true}} {
		cfg := config(t, func(m *extauthzv3.ExtAuthz) {
			m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: tc.pct}}
		})
		fc := &fakeClient{resp: &extauthz.CheckResponse{}}
		var bound uint32
		d := (&extauthz.Checker{Config: cfg, Client: fc, Rand: func(n uint32) uint32 { bound = n; return tc.draw }}).Check(context.Background(), request())
		if (fc.got != nil) != tc.checked || (d.Outcome == extauthz.Disabled) == tc.checked || bound != 100 {
			t.Errorf("%d%%, draw %d of [0, %d): decision %+v, checked %v", tc.pct, tc.draw, bound, d, fc.got != nil)
		}
	}
}
