package httpxds_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// The external authorization filter on the HTTP server, configured by
// go-control-plane's server and calling a fake authorization service
// (testutils.AuthzServer), with the semantics of Envoy's HTTP filter:
// https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/ext_authz_filter
// and the ExtAuthz proto's fields,
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ext_authz/v3/ext_authz.proto.

// serverAuthzDecide answers by the request's x-want header: "deny" denies with
// 401, a header and a body; "deny-bare" denies with no denied_response;
// "disallowed" allows with a change to a header the mutation rules
// disallow; anything else allows, adding x-authz: yes to the request,
// removing x-secret from it, and adding x-resp: r to the response.
func serverAuthzDecide(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	want := ""
	for _, h := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
		if h.GetKey() == "x-want" {
			want = string(h.GetRawValue())
		}
	}
	switch want {
	case "deny":
		return &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-reason", Value: "nope"}}},
				Body:    "go away",
			}},
		}, nil
	case "deny-bare":
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)}}, nil
	case "disallowed":
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-forbidden", Value: "1"}}},
		}}}, nil
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers:              []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-authz", Value: "yes"}}},
			HeadersToRemove:      []string{"x-secret"},
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-resp", Value: "r"}}},
		}},
	}, nil
}

// authzHandler answers with what the handler sees of the filter's work:
// the x-authz, x-secret and x-envoy-auth-failure-mode-allowed headers
// and the body.
var authzHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, "x-authz=%s x-secret=%s failure-allowed=%s body=%s", r.Header.Get("X-Authz"), r.Header.Get("X-Secret"),
		r.Header.Get("X-Envoy-Auth-Failure-Mode-Allowed"), b)
})

// authzServerEnv is a server whose Listener has the ext_authz filter made
// by change (calling target) and routes: /open with ExtAuthzPerRoute
// disabled, /ctx with check_settings' context_extensions, /off with a
// FilterConfig that disables the filter, and / for the rest.
func authzServerEnv(t *testing.T, target string, change func(*extauthzv3.ExtAuthz)) *env {
	t.Helper()
	return authzServerEnvWith(t, target, change, nil)
}

// authzServerEnvWith is authzServerEnv whose server counts its checks on m.
func authzServerEnvWith(t *testing.T, target string, change func(*extauthzv3.ExtAuthz), m httpxds.ServerExtAuthzMetrics) *env {
	t.Helper()
	e := newEnv(t, envOptions{edit: testutils.AllowGRPCService(target), handler: authzHandler, authzMetrics: m})
	perRoute := func(r *routev3.Route, m *anypb.Any) *routev3.Route {
		r.TypedPerFilterConfig = map[string]*anypb.Any{"authz": m}
		return r
	}
	path := func(p string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p}}
	}
	rc := routes("rc",
		perRoute(serveRoute(path("/open")), testutils.MarshalAny(&extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_Disabled{Disabled: true}})),
		perRoute(serveRoute(path("/ctx")), testutils.MarshalAny(&extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_CheckSettings{
			CheckSettings: &extauthzv3.CheckSettings{ContextExtensions: map[string]string{"tier": "gold"}}}})),
		perRoute(serveRoute(path("/off")), testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})),
		serveRoute(prefix("/")),
	)
	e.serve(e.listener(rc, "", nil, testutils.ExtAuthzFilter(target, change)))
	return e
}

func startAuthzServer(t *testing.T) *testutils.AuthzServer {
	t.Helper()
	a, err := testutils.StartAuthzServer(serverAuthzDecide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a
}

// An allowed request reaches the handler with the service's request
// header changes and its response carries the service's response headers;
// the service is told of the request as Envoy's HTTP filter tells it (its
// method, host, path with the query, scheme, protocol, headers and the
// peer). A denial is answered with the service's status, headers and body
// (403 when it gives no status). ExtAuthzPerRoute's disabled and a
// FilterConfig's disabled skip the filter for their route;
// check_settings.context_extensions reach the service. A header change
// the decoder_header_mutation_rules disallow, with disallow_is_error,
// fails the request with 500.
func TestServerExtAuthz(t *testing.T) {
	a := startAuthzServer(t)
	e := authzServerEnv(t, a.Target(), func(m *extauthzv3.ExtAuthz) {
		m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{
			DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-forbidden"},
			DisallowIsError:    wrapperspb.Bool(true),
		}
	})

	got := e.get("/x?q=1", "X-Want: allow", "X-Secret: s3", "Host: svc.test:80")
	e.want(got, http.StatusOK, "x-authz=yes x-secret= failure-allowed= body=")
	if v := got.header.Get("X-Resp"); v != "r" {
		t.Errorf("response header X-Resp %q, want the service's response_headers_to_add r", v)
	}
	checks := a.Checks()
	if len(checks) != 1 {
		t.Fatalf("%d checks, want 1", len(checks))
	}
	attrs := checks[0].Request.GetAttributes()
	h := attrs.GetRequest().GetHttp()
	if h.GetMethod() != "GET" || h.GetPath() != "/x?q=1" || h.GetHost() != "svc.test:80" || h.GetScheme() != "http" || h.GetProtocol() != "HTTP/1.1" || h.GetSize() != 0 {
		t.Errorf("request attributes: method %q path %q host %q scheme %q protocol %q size %d", h.GetMethod(), h.GetPath(), h.GetHost(), h.GetScheme(), h.GetProtocol(), h.GetSize())
	}
	sent := map[string]string{}
	for _, hv := range h.GetHeaderMap().GetHeaders() {
		sent[hv.GetKey()] = string(hv.GetRawValue())
	}
	if sent["x-secret"] != "s3" || sent[":method"] != "GET" || sent[":authority"] != "svc.test:80" || sent[":path"] != "/x?q=1" || sent[":scheme"] != "http" {
		t.Errorf("headers sent to the service: %v", sent)
	}
	if m := h.GetHeaders(); m["x-secret"] != "s3" || m[":path"] != "/x?q=1" {
		t.Errorf("the headers map Envoy fills by default: %v", m)
	}
	if src := attrs.GetSource().GetAddress().GetSocketAddress(); src.GetAddress() != "127.0.0.1" || attrs.GetDestination().GetAddress().GetSocketAddress().GetPortValue() != e.port {
		t.Errorf("source %v, destination %v", attrs.GetSource(), attrs.GetDestination())
	}
	if p := attrs.GetDestination().GetPrincipal(); p != "" {
		t.Errorf("destination principal %q without TLS, want none", p)
	}

	got = e.get("/x", "X-Want: deny")
	if got.status != http.StatusUnauthorized || got.body != "go away" || got.header.Get("X-Reason") != "nope" {
		t.Errorf("denied: %d %q, X-Reason %q; want the service's 401, its body and its header", got.status, got.body, got.header.Get("X-Reason"))
	}
	got = e.get("/x", "X-Want: deny-bare")
	if got.status != http.StatusForbidden {
		t.Errorf("denied without a denied_response: %d %q, want Envoy's default 403", got.status, got.body)
	}
	e.want(e.get("/x", "X-Want: disallowed"), http.StatusInternalServerError, `ext_authz filter "authz"`)

	n := len(a.Checks())
	e.want(e.get("/open", "X-Want: deny"), http.StatusOK, "x-authz= ")
	e.want(e.get("/off", "X-Want: deny"), http.StatusOK, "x-authz= ")
	if m := len(a.Checks()); m != n {
		t.Errorf("%d checks for the routes that disable the filter, want none", m-n)
	}
	e.want(e.get("/ctx"), http.StatusOK, "x-authz=yes")
	checks = a.Checks()
	if ext := checks[len(checks)-1].Request.GetAttributes().GetContextExtensions(); ext["tier"] != "gold" {
		t.Errorf("context_extensions %v, want the route's tier: gold", ext)
	}
}

// An authorization service that cannot be reached fails the request with
// status_on_error (Envoy's default 403 when unset), unless
// failure_mode_allow lets it through, with
// x-envoy-auth-failure-mode-allowed: true when
// failure_mode_allow_header_add says so. A request filter_enabled leaves
// out is not checked, and goes on unless deny_at_disable, which answers
// status_on_error.
func TestServerExtAuthzServiceDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "passthrough:///" + lis.Addr().String()
	lis.Close()
	for _, tc := range []struct {
		name   string
		change func(*extauthzv3.ExtAuthz)
		status int
		body   string
	}{
		{"default", nil, http.StatusForbidden, `ext_authz filter "authz" could not authorize the request`},
		{"status_on_error", func(m *extauthzv3.ExtAuthz) {
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
		}, http.StatusServiceUnavailable, "could not authorize"},
		{"failure_mode_allow", func(m *extauthzv3.ExtAuthz) {
			m.FailureModeAllow, m.FailureModeAllowHeaderAdd = true, true
		}, http.StatusOK, "failure-allowed=true"},
		// filter_enabled at 0%: the service is not asked, and the
		// request goes on, or with deny_at_disable gets status_on_error.
		{"filter_disabled", func(m *extauthzv3.ExtAuthz) {
			m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{}}
		}, http.StatusOK, "failure-allowed= "},
		{"deny_at_disable", func(m *extauthzv3.ExtAuthz) {
			m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{}}
			m.DenyAtDisable = &corev3.RuntimeFeatureFlag{DefaultValue: wrapperspb.Bool(true)}
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_TooManyRequests}
		}, http.StatusTooManyRequests, "could not authorize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := authzServerEnv(t, down, tc.change)
			e.want(e.get("/x"), tc.status, tc.body)
		})
	}
}

// with_request_body: the service is sent the body (raw_body with
// pack_as_bytes) and x-envoy-auth-partial-body, and the handler still
// reads all of it; a body over max_request_bytes is refused with 413
// before the service is asked, unless allow_partial_message sends its
// first max_request_bytes.
func TestServerExtAuthzRequestBody(t *testing.T) {
	for _, tc := range []struct {
		name          string
		partial, pack bool
		body          string
		status        int
		sent, partHdr string // "": no check
	}{
		{name: "whole", body: "hello", status: 200, sent: "hello", partHdr: "false"},
		{name: "too_large", body: "0123456789abc", status: http.StatusRequestEntityTooLarge},
		{name: "partial", partial: true, body: "0123456789abc", status: 200, sent: "01234567", partHdr: "true"},
		{name: "pack_as_bytes", pack: true, body: "hello", status: 200, sent: "hello", partHdr: "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startAuthzServer(t)
			e := authzServerEnv(t, a.Target(), func(m *extauthzv3.ExtAuthz) {
				m.WithRequestBody = &extauthzv3.BufferSettings{MaxRequestBytes: 8, AllowPartialMessage: tc.partial, PackAsBytes: tc.pack}
			})
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, "http://"+e.lis.Addr().String()+"/x", strings.NewReader(tc.body))
			req.Host = "svc.test"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || (tc.status == 200 && !strings.HasSuffix(string(b), "body="+tc.body)) {
				t.Fatalf("got %d %q, want %d with the whole body %q", resp.StatusCode, b, tc.status, tc.body)
			}
			checks := a.Checks()
			if tc.sent == "" {
				if len(checks) != 0 {
					t.Fatalf("%d checks, want none for a body too large", len(checks))
				}
				return
			}
			if len(checks) != 1 {
				t.Fatalf("%d checks, want 1", len(checks))
			}
			h := checks[0].Request.GetAttributes().GetRequest().GetHttp()
			sent := h.GetBody()
			if tc.pack {
				sent = string(h.GetRawBody())
				if h.GetBody() != "" {
					t.Errorf("pack_as_bytes: body %q sent as a string too", h.GetBody())
				}
			}
			var part string
			for _, hv := range h.GetHeaderMap().GetHeaders() {
				if hv.GetKey() == "x-envoy-auth-partial-body" {
					part = string(hv.GetRawValue())
				}
			}
			if sent != tc.sent || part != tc.partHdr || h.GetSize() != int64(len(tc.body)) {
				t.Errorf("sent body %q, x-envoy-auth-partial-body %q, size %d; want %q, %q, %d", sent, part, h.GetSize(), tc.sent, tc.partHdr, len(tc.body))
			}
		})
	}
}
