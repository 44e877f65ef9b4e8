package httpxds_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// The header changes an authorization service may make to a plain HTTP
// request follow Envoy's ext_authz HTTP filter
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ext_authz/v3/ext_authz.proto:
// decoder_header_mutation_rules, validate_mutations; the rules'
// defaults in
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/common/mutation_rules/v3/mutation_rules.proto),
// not gRFC A102's rules for gRPC, which fail the check on a grpc-*
// header, a host or pseudo-header, an upper-case name or a value that is
// not printable ASCII.

// rulesAnswers are the service's ok_response for each x-want.
var rulesAnswers = map[string]*authv3.OkHttpResponse{
	"grpc":    {Headers: setHeader("grpc-foo", "1")},
	"upper":   {Headers: setHeader("X-Upper", "u")},
	"obs":     {Headers: setHeader("x-obs", "caf\u00e9")},
	"envoy":   {Headers: setHeader("x-envoy-foo", "e")},
	"host":    {Headers: setHeader("host", "other.test")},
	"remove":  {HeadersToRemove: []string{":path", "host", "bad name", "x-gone"}},
	"bad":     {Headers: setHeader("x-bad", "a\nb")},
	"badname": {Headers: setHeader("bad name", "v")},
	"resp":    {ResponseHeadersToAdd: setHeader("grpc-r", "1")},
}

func setHeader(k, v string) []*corev3.HeaderValueOption {
	return []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}}
}

func rulesDecide(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	want := req.GetAttributes().GetRequest().GetHttp().GetHeaders()["x-want"]
	return &authv3.CheckResponse{Status: &rpcstatus.Status{},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: rulesAnswers[want]}}, nil
}

// rulesHandler answers with the request's host and the headers the
// service may have changed.
var rulesHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	fmt.Fprintf(&b, "host=%s", r.Host)
	for _, h := range []string{"Grpc-Foo", "X-Upper", "X-Obs", "X-Envoy-Foo", "X-Bad", "X-Gone"} {
		fmt.Fprintf(&b, " %s=%s", strings.ToLower(h), strings.Join(r.Header.Values(h), ","))
	}
	b.WriteString(" path=" + r.URL.Path)
	w.Write([]byte(b.String()))
})

func rulesEnv(t *testing.T, change func(*extauthzv3.ExtAuthz)) *env {
	t.Helper()
	a, err := testutils.StartAuthzServer(rulesDecide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	e := newEnv(t, envOptions{edit: testutils.AllowGRPCService(a.Target()), handler: rulesHandler})
	e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, testutils.ExtAuthzFilter(a.Target(), change)))
	return e
}

func TestServerExtAuthzHTTPHeaderRules(t *testing.T) {
	type check struct {
		want   string // x-want
		status int
		sub    string // in the body
	}
	for _, tc := range []struct {
		name   string
		change func(*extauthzv3.ExtAuthz)
		checks []check
	}{
		// No decoder_header_mutation_rules: no header is refused; an
		// invalid change, unchecked (validate_mutations off), is left out,
		// as net/http cannot carry it; Envoy lower-cases names.
		{"no rules", nil, []check{
			{"grpc", http.StatusOK, "grpc-foo=1 "},
			{"upper", http.StatusOK, "x-upper=u "},
			{"obs", http.StatusOK, "x-obs=caf\u00e9 "},
			{"envoy", http.StatusOK, "x-envoy-foo=e "},
			{"host", http.StatusOK, "host=other.test "},
			{"remove", http.StatusOK, "x-gone= path=/"}, // :path and host are never removed
			{"bad", http.StatusOK, "x-bad= "},
			{"badname", http.StatusOK, "host=svc.test"},
		}},
		// The rules' defaults: x-envoy-* and the routing headers (host)
		// refused, and ignored; grpc-* is a header like any other.
		{"default rules", func(m *extauthzv3.ExtAuthz) {
			m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{}
		}, []check{
			{"grpc", http.StatusOK, "grpc-foo=1 "},
			{"envoy", http.StatusOK, "x-envoy-foo= "},
			{"host", http.StatusOK, "host=svc.test "},
		}},
		// disallow_is_error: a refused change fails the request with 500.
		{"disallow_is_error", func(m *extauthzv3.ExtAuthz) {
			m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{DisallowIsError: wrapperspb.Bool(true)}
		}, []check{
			{"grpc", http.StatusOK, "grpc-foo=1 "},
			{"envoy", http.StatusInternalServerError, `ext_authz filter "authz"`},
			{"host", http.StatusInternalServerError, `ext_authz filter "authz"`},
			{"remove", http.StatusOK, "x-gone= path=/"},
		}},
		{"allow_all_routing, allow_envoy", func(m *extauthzv3.ExtAuthz) {
			m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true), AllowEnvoy: wrapperspb.Bool(true)}
		}, []check{
			{"envoy", http.StatusOK, "x-envoy-foo=e "},
			{"host", http.StatusOK, "host=other.test "},
		}},
		// validate_mutations: an invalid change fails the request with
		// 500, whatever failure_mode_allow says; an invalid name to
		// remove changes nothing and fails nothing.
		{"validate_mutations", func(m *extauthzv3.ExtAuthz) {
			m.ValidateMutations, m.FailureModeAllow = true, true
		}, []check{
			{"bad", http.StatusInternalServerError, `ext_authz filter "authz"`},
			{"badname", http.StatusInternalServerError, `ext_authz filter "authz"`},
			{"remove", http.StatusOK, "x-gone= path=/"},
			{"obs", http.StatusOK, "x-obs=caf\u00e9 "},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := rulesEnv(t, tc.change)
			for _, c := range tc.checks {
				got := e.get("/x", "X-Want: "+c.want, "X-Gone: g", "Host: svc.test")
				if got.status != c.status || !strings.Contains(got.body, c.sub) {
					t.Errorf("%s: %d %q, want %d with %q", c.want, got.status, got.body, c.status, c.sub)
				}
			}
		})
	}
}

// response_headers_to_add of a plain HTTP request may name any valid
// header, grpc-* included.
func TestServerExtAuthzHTTPResponseHeaderRules(t *testing.T) {
	e := rulesEnv(t, nil)
	got := e.get("/x", "X-Want: resp")
	if got.status != http.StatusOK || got.header.Get("Grpc-R") != "1" {
		t.Fatalf("%d %q, response header Grpc-R %q; want 200 with the service's grpc-r: 1", got.status, got.body, got.header.Get("Grpc-R"))
	}
}

// The HTTP client's filter follows the same rules as the server's: a
// grpc-* header and a new host reach the backend, a grpc-* response
// header the caller; under the rules' defaults x-envoy-* and host are
// ignored, and with disallow_is_error fail the request with 500.
func TestClientExtAuthzHTTPHeaderRules(t *testing.T) {
	a, err := testutils.StartAuthzServer(rulesDecide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	for _, tc := range []struct {
		name  string
		rules *mutationv3.HeaderMutationRules
	}{{"no rules", nil}, {"default rules", &mutationv3.HeaderMutationRules{}}, {"disallow_is_error", &mutationv3.HeaderMutationRules{DisallowIsError: wrapperspb.Bool(true)}}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCEnv(t, cenvOptions{edit: testutils.AllowGRPCService(a.Target())})
			b := newBackend(t, "a")
			e.update(authzWorld(b, testutils.ExtAuthzFilter(a.Target(), func(m *extauthzv3.ExtAuthz) { m.DecoderHeaderMutationRules = tc.rules })))

			got := e.get("/x", "x-want: grpc")
			if got.status != http.StatusOK || lastHeader(b, "Grpc-Foo") != "1" {
				t.Errorf("grpc: %d %q, the backend saw Grpc-Foo %q; want 200 and 1", got.status, got.body, lastHeader(b, "Grpc-Foo"))
			}
			got = e.get("/x", "x-want: resp")
			if got.status != http.StatusOK || got.header.Get("Grpc-R") != "1" {
				t.Errorf("resp: %d %q, response header Grpc-R %q; want 200 and 1", got.status, got.body, got.header.Get("Grpc-R"))
			}
			n := b.count()
			got = e.get("/x", "x-want: host")
			switch {
			case tc.rules == nil:
				e.want(got, http.StatusOK, "host=other.test")
			case tc.rules.DisallowIsError == nil:
				e.want(got, http.StatusOK, "host="+svcHost)
			default:
				e.want(got, http.StatusInternalServerError, "")
				if b.count() != n {
					t.Errorf("host: the request refused with 500 reached the backend")
				}
			}
			got = e.get("/x", "x-want: envoy")
			envoy := lastHeader(b, "X-Envoy-Foo")
			switch {
			case tc.rules == nil:
				if got.status != http.StatusOK || envoy != "e" {
					t.Errorf("envoy: %d, the backend saw X-Envoy-Foo %q; want 200 and e", got.status, envoy)
				}
			case tc.rules.DisallowIsError == nil:
				if got.status != http.StatusOK || envoy != "" {
					t.Errorf("envoy: %d, the backend saw X-Envoy-Foo %q; want 200 and none", got.status, envoy)
				}
			default:
				e.want(got, http.StatusInternalServerError, "")
			}
		})
	}
}

// lastHeader is header name of the last request b served ("" if none).
func lastHeader(b *backend, name string) string {
	if r := b.last(); r != nil {
		return r.Header.Get(name)
	}
	return ""
}
