package httpxds_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// Envoy's external authorization filter on the HTTP client's listener
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/ext_authz_filter),
// configured by go-control-plane's server and calling a gRPC authorization
// service (testutils.AuthzServer) as gRFC A92 and A102 say: the service
// is a GrpcService the bootstrap's allowed_grpc_services lets an untrusted
// server name.

// authzDecide allows a request unless its x-want header asks for a
// denial: "deny" is denied with 401, a body and a header; "deny-plain"
// with no denied_response status (Envoy's 403). An allowed request gets
// x-authz: yes upstream and x-authz-note: checked on its response.
func authzDecide(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	denied := &rpcstatus.Status{Code: int32(codes.PermissionDenied)}
	want := ""
	for _, h := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
		if h.GetKey() == "x-want" {
			want = string(h.GetRawValue())
		}
	}
	switch want {
	case "deny":
		return &authv3.CheckResponse{Status: denied, HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
			Body:    "who are you?",
			Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "www-authenticate", Value: `Bearer realm="svc"`}}},
		}}}, nil
	case "deny-plain":
		return &authv3.CheckResponse{Status: denied}, nil
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
		Headers:              []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-authz", Value: "yes"}}},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-authz-note", Value: "checked"}}},
	}}}, nil
}

// authzWorld routes every request to cluster c, served by b, through
// filter; requests to /open take a route whose typed_per_filter_config
// disables the filter.
func authzWorld(b *backend, filter *hcmv3.HttpFilter) testutils.Resources {
	open := toCluster(prefix("/open"), "c", nil)
	open.TypedPerFilterConfig = map[string]*anypb.Any{"authz": testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})}
	return world(routes("rc", open, toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {b}}, filter)
}

// An allowed request reaches the backend with the service's headers and
// its response carries response_headers_to_add; a denied one is answered
// with denied_response's status (403 when unset), body and headers and
// never sent; a route that disables the filter asks nothing. The service
// hears the request's method, host, path and headers. SotW and delta.
func TestClientExtAuthzAllowDenyRouteDisable(t *testing.T) {
	for _, apiType := range []string{"", "DELTA_GRPC"} {
		t.Run("api="+apiType, func(t *testing.T) { testClientExtAuthz(t, apiType) })
	}
}

func testClientExtAuthz(t *testing.T, apiType string) {
	a, err := testutils.StartAuthzServer(authzDecide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	e := newCEnv(t, cenvOptions{apiType: apiType, edit: testutils.AllowGRPCService(a.Target())})
	b := newBackend(t, "a")
	e.update(authzWorld(b, testutils.ExtAuthzFilter(a.Target(), nil)))

	got := e.get("/x?q=1", "x-want: allow", "X-Multi: 1", "X-Multi: 2")
	if got.status != http.StatusOK || got.body != "a GET /x q=1 host=svc.test proto=HTTP/1.1" {
		t.Fatalf("allowed request: %d %q, want the backend's 200", got.status, got.body)
	}
	if v := b.last().Header.Get("X-Authz"); v != "yes" {
		t.Errorf("the backend saw X-Authz %q, want the service's yes", v)
	}
	if v := got.header.Values("X-Authz-Note"); len(v) != 1 || v[0] != "checked" {
		t.Errorf("allowed response's X-Authz-Note %q, want checked once", v)
	}
	checks := a.Checks()
	if len(checks) != 1 {
		t.Fatalf("%d checks, want 1", len(checks))
	}
	h := checks[0].Request.GetAttributes().GetRequest().GetHttp()
	if h.GetMethod() != http.MethodGet || h.GetHost() != svcHost || h.GetPath() != "/x?q=1" || h.GetScheme() != "http" || h.GetProtocol() != "HTTP/1.1" {
		t.Errorf("the service was told %s %s%s (%s, %s), want GET svc.test/x?q=1 (http, HTTP/1.1)", h.GetMethod(), h.GetHost(), h.GetPath(), h.GetScheme(), h.GetProtocol())
	}
	sent := map[string]string{}
	for _, hv := range h.GetHeaderMap().GetHeaders() {
		sent[hv.GetKey()] = string(hv.GetRawValue())
	}
	if sent["x-want"] != "allow" || sent["x-multi"] != "1,2" || sent[":authority"] != svcHost || sent[":method"] != "GET" || sent[":path"] != "/x?q=1" {
		t.Errorf("the service was sent headers %v", sent)
	}
	// Envoy's default encoding too, which services written for Envoy read.
	if hs := h.GetHeaders(); hs["x-want"] != "allow" || hs[":path"] != "/x?q=1" {
		t.Errorf("the service's headers map %v, want x-want and :path as in header_map", hs)
	}
	if md := checks[0].Metadata.Get("x-tenant"); len(md) != 0 {
		t.Errorf("an untrusted server's initial_metadata reached the service: %v", md)
	}

	got = e.get("/x", "x-want: deny")
	e.want(got, http.StatusUnauthorized, "who are you?")
	if v := got.header.Get("Www-Authenticate"); v != `Bearer realm="svc"` {
		t.Errorf("denial's WWW-Authenticate %q, want the service's", v)
	}
	e.want(e.get("/x", "x-want: deny-plain"), http.StatusForbidden, "")
	if n := b.count(); n != 1 {
		t.Errorf("the backend got %d requests, want only the allowed one", n)
	}

	e.want(e.get("/open/y", "x-want: deny"), http.StatusOK, "a GET /open/y")
	if n := len(a.Checks()); n != 3 {
		t.Errorf("%d checks, want 3: the route that disables the filter asks nothing", n)
	}
}

// An authorization service that cannot be reached: the request is
// answered with status_on_error, naming the service, unless
// failure_mode_allow lets it through with
// x-envoy-auth-failure-mode-allowed: true.
func TestClientExtAuthzServiceDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "passthrough:///" + lis.Addr().String()
	lis.Close()
	for _, allow := range []bool{false, true} {
		e := newCEnv(t, cenvOptions{edit: testutils.AllowGRPCService(down)})
		b := newBackend(t, "a")
		e.update(authzWorld(b, testutils.ExtAuthzFilter(down, func(m *extauthzv3.ExtAuthz) {
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
			m.FailureModeAllow, m.FailureModeAllowHeaderAdd = allow, true
		})))
		got := e.get("/x")
		if !allow {
			e.want(got, http.StatusServiceUnavailable, down)
			if b.count() != 0 {
				t.Error("failure_mode_allow false: the request reached the backend")
			}
			continue
		}
		if got.status != http.StatusOK || b.count() != 1 {
			t.Fatalf("failure_mode_allow true: %d %q, want the backend's 200", got.status, got.body)
		}
		if v := b.last().Header.Get("X-Envoy-Auth-Failure-Mode-Allowed"); v != "true" {
			t.Errorf("failure_mode_allow true: the backend saw X-Envoy-Auth-Failure-Mode-Allowed %q, want true", v)
		}
	}
}

// gRFC A102 on the HTTP client too: a management server not marked
// trusted that names a service the bootstrap does not allow has its
// Listener refused, and requests fail naming the target.
func TestClientExtAuthzDisallowedTarget(t *testing.T) {
	e := newCEnv(t, cenvOptions{edit: testutils.AllowGRPCService("dns:///allowed.example.com:443")})
	b := newBackend(t, "a")
	e.update(authzWorld(b, testutils.ExtAuthzFilter("dns:///evil.example.com:443", nil)))
	req, err := http.NewRequest(http.MethodGet, "http://"+svcHost+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.do(req)
	if err == nil || !strings.Contains(err.Error(), `"dns:///evil.example.com:443" is not in the bootstrap's allowed_grpc_services`) {
		t.Fatalf("request: %v, want an error naming the disallowed target", err)
	}
}

// A filter kind the HTTP client has no runtime for fails every request
// with 503 naming the listener and the filter (a security filter skipped
// would let requests through), unless it is optional, when it is skipped
// (Envoy's is_optional).
func TestClientFilterWithoutRuntime(t *testing.T) {
	const url = "type.googleapis.com/goxds.test.ClientOnly"
	for _, optional := range []bool{false, true} {
		e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) {
			o.ClientOptions.Registry = resources.DefaultRegistry().Clone()
			if err := o.ClientOptions.Registry.RegisterHTTPFilter(resources.HTTPFilterType{
				Name: "client-only", TypeURLs: []string{url}, ClientSide: true,
				ParseConfig: func(*anypb.Any) (resources.HTTPFilterConfig, error) { return struct{}{}, nil },
			}); err != nil {
				t.Fatal(err)
			}
		}})
		b := newBackend(t, "a")
		f := &hcmv3.HttpFilter{Name: "odd", IsOptional: optional, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: url}}}
		e.update(world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {b}}, f))
		if optional {
			e.want(e.get("/x"), http.StatusOK, "a GET /x")
			continue
		}
		e.want(e.get("/x"), http.StatusServiceUnavailable, `listener "svc.test": HTTP filter "odd" of type `+url+` cannot run on an HTTP client`)
	}
}
