package xdsserver_test

import (
	"context"
	"net"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// The external authorization filter (gRFC A92) on an xDS-enabled server,
// configured by go-control-plane's server, calling a fake authorization
// service (testutils.AuthzServer).

const echoMethod = "/goxds.test.Echo/Header"

// echoDesc answers with the values of the request header its request
// names, joined with ",": what the handler sees after the filter.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Header", Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			return wrapperspb.String(strings.Join(md.Get(req.(*wrapperspb.StringValue).GetValue()), ",")), nil
		}
		if icpt == nil {
			return h(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: echoMethod}, h)
	}}},
}

// echo asks the server for the value of header name as its handler sees it.
func echo(ctx context.Context, conn *grpc.ClientConn, name string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, echoMethod, wrapperspb.String(name), out, opts...)
	return out.GetValue(), err
}

// authzDecider allows a request unless its x-want header says "deny":
// then it denies with HTTP 401 and a trailer. An allowed request gets
// x-authz: yes, and its response x-resp: r.
func authzDecider(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	for _, h := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
		if h.GetKey() == "x-want" && string(h.GetRawValue()) == "deny" {
			return &authv3.CheckResponse{
				Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
				HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
					Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
					Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-reason", Value: "nope"}}},
				}},
			}, nil
		}
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers:              []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-authz", Value: "yes"}}},
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-resp", Value: "r"}}},
		}},
	}, nil
}

func startAuthz(t *testing.T) *testutils.AuthzServer {
	t.Helper()
	a, err := testutils.StartAuthzServer(authzDecider)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a
}

// authzRoutes serves every method (non-forwarding), with the filter
// disabled on SayBye's route.
func authzRoutes() *routev3.RouteConfiguration {
	nf := &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}
	return &routev3.RouteConfiguration{Name: "authz-routes", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{
			{
				Match:                &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: sayBye}},
				Action:               nf,
				TypedPerFilterConfig: map[string]*anypb.Any{"authz": testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})},
			},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: nf},
		},
	}}}
}

func authzEnv(t *testing.T, edit func(*bootstrap.Config), filter *hcmv3.HttpFilter) *env {
	t.Helper()
	e := newEnvWith(t, testutils.ManagementServerOptions{}, edit)
	e.srv.RegisterService(&echoDesc, struct{}{})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, authzRoutes(), filter)}})
	return e
}

func withWant(ctx context.Context, v string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-want", v)
}

// Allowed with the service's header changes, denied with its status and
// trailers, and not asked at all where a route disables the filter; the
// service hears the request's headers and peer, and from an untrusted
// management server none of the GrpcService's initial metadata.
func TestExtAuthzAllowDenyAndRouteDisable(t *testing.T) {
	a := startAuthz(t)
	e := authzEnv(t, testutils.AllowGRPCService(a.Target()), testutils.ExtAuthzFilter(a.Target(), nil))
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()

	var hdr metadata.MD
	got, err := echo(withWant(e.ctx, "allow"), conn, "x-authz", grpc.Header(&hdr))
	if err != nil || got != "yes" || strings.Join(hdr.Get("x-resp"), ",") != "r" {
		t.Fatalf("allowed: handler saw x-authz %q, response header x-resp %q, err %v", got, hdr.Get("x-resp"), err)
	}
	checks := a.Checks()
	if len(checks) != 1 {
		t.Fatalf("%d checks, want 1", len(checks))
	}
	attrs := checks[0].Request.GetAttributes()
	if h := attrs.GetRequest().GetHttp(); h.GetPath() != echoMethod || h.GetMethod() != "POST" || h.GetProtocol() != "HTTP/2" || h.GetSize() != -1 {
		t.Errorf("request attributes %v", h)
	}
	if src := attrs.GetSource().GetAddress().GetSocketAddress(); src.GetAddress() != "127.0.0.1" || attrs.GetDestination().GetAddress().GetSocketAddress().GetPortValue() != e.port {
		t.Errorf("source %v, destination %v", attrs.GetSource(), attrs.GetDestination())
	}
	if p := attrs.GetDestination().GetPrincipal(); p != "" {
		t.Errorf("destination principal %q without TLS, want none", p)
	}
	if v := checks[0].Metadata.Get("x-tenant"); len(v) != 0 {
		t.Errorf("the untrusted server's initial_metadata reached the service: x-tenant %q", v)
	}

	var trailer metadata.MD
	err = call(withWant(e.ctx, "deny"), conn, sayHello, grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unauthenticated || strings.Join(trailer.Get("x-reason"), ",") != "nope" {
		t.Fatalf("denied: %v (want UNAUTHENTICATED, HTTP 401), trailer x-reason %q", err, trailer.Get("x-reason"))
	}
	if err := call(withWant(e.ctx, "deny"), conn, sayBye); err != nil {
		t.Fatalf("SayBye, whose route disables the filter: %v", err)
	}
	if n := len(a.Checks()); n != 2 {
		t.Fatalf("%d checks after the route that disables the filter, want 2", n)
	}
}

// An authorization service that cannot be reached fails the RPC with
// status_on_error, unless failure_mode_allow lets it through (with the
// header that says so, when asked).
func TestExtAuthzServiceDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "passthrough:///" + lis.Addr().String()
	lis.Close()
	for _, allow := range []bool{false, true} {
		e := authzEnv(t, testutils.AllowGRPCService(down), testutils.ExtAuthzFilter(down, func(m *extauthzv3.ExtAuthz) {
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
			m.FailureModeAllow, m.FailureModeAllowHeaderAdd = allow, true
		}))
		e.waitMode(xdsserver.ServingModeServing)
		conn := e.dial()
		got, err := echo(e.ctx, conn, "x-envoy-auth-failure-mode-allowed")
		if !allow {
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), down) {
				t.Fatalf("failure_mode_allow false: %v, want UNAVAILABLE (status_on_error 503) naming %s", err, down)
			}
			continue
		}
		if err != nil || got != "true" {
			t.Fatalf("failure_mode_allow true: %v, header %q", err, got)
		}
	}
}

// From a trusted management server the GrpcService is used as given: a
// target the bootstrap does not list, and its initial_metadata.
func TestExtAuthzTrustedServer(t *testing.T) {
	a := startAuthz(t)
	trusted := func(c *bootstrap.Config) {
		c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
	}
	e := authzEnv(t, trusted, testutils.ExtAuthzFilter(a.Target(), nil))
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, e.dial(), sayHello); err != nil {
		t.Fatal(err)
	}
	if checks := a.Checks(); len(checks) != 1 || strings.Join(checks[0].Metadata.Get("x-tenant"), ",") != "blue" {
		t.Fatalf("checks %v, want one carrying x-tenant: blue", checks)
	}
}

// gRFC A102: an untrusted management server naming a target the bootstrap
// does not allow has its Listener NACKed, and the server does not serve;
// the error names the target.
func TestExtAuthzUntrustedDisallowedTargetNACKed(t *testing.T) {
	e := authzEnv(t, testutils.AllowGRPCService("dns:///allowed.example.com:443"), testutils.ExtAuthzFilter("dns:///evil.example.com:443", nil))
	args := e.waitMode(xdsserver.ServingModeNotServing)
	if args.Err == nil || !strings.Contains(args.Err.Error(), `"dns:///evil.example.com:443" is not in the bootstrap's allowed_grpc_services`) {
		t.Fatalf("not serving because of %v, want the disallowed target named", args.Err)
	}
}
