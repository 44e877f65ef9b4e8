package grpcxds_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

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
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// The external authorization filter (gRFC A92) on a goxds channel,
// configured by go-control-plane's server, calling a fake authorization
// service (testutils.AuthzServer).

// authzEnv is newEnv with a bootstrap edited by edit.
func authzEnv(t *testing.T, edit func(*bootstrap.Config)) *env {
	t.Helper()
	return authzEnvWith(t, edit, grpcxds.Options{})
}

// authzEnvWith is authzEnv with the Builder's options opts (their
// bootstrap and client options replaced).
func authzEnvWith(t *testing.T, edit func(*bootstrap.Config), opts grpcxds.Options) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	opts.Bootstrap, opts.ClientOptions = cfg, client.Options{
		Logger:           quietLogger,
		WatchExpiry:      2 * time.Second,
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{fastConnect}},
	}
	b, err := grpcxds.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &env{t: t, ctx: ctx, ms: ms, builder: b}
}

// authzAllowUnlessDeny allows an RPC unless its x-want header is "deny",
// which it denies with HTTP 401; an allowed RPC gets x-authz: yes.
func authzAllowUnlessDeny(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	for _, h := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
		if h.GetKey() == "x-want" && string(h.GetRawValue()) == "deny" {
			return &authv3.CheckResponse{
				Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
				HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
					Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				}},
			}, nil
		}
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
		Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-authz", Value: "yes"}}},
	}}}, nil
}

// authzTree routes every RPC to cluster A, served by b; RPCs with header
// x-route: open take a route that disables the filter.
func authzTree(t *testing.T, b *backend, filter *hcmv3.HttpFilter) testutils.Resources {
	open := toCluster(prefix("/"), "A")
	open.Match.Headers = []*routev3.HeaderMatcher{{Name: "x-route", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "open"}}}
	open.TypedPerFilterConfig = map[string]*anypb.Any{"authz": disabledOverride()}
	res := tree(routes(open, toCluster(prefix("/"), "A")), clusters("A"), eds("A", b))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, filter)}
	return res
}

// seenHeader makes b fail every RPC whose incoming header name is not
// want, so that a test sees what the filter let through.
func seenHeader(b *backend, name, want string) {
	h := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := strings.Join(md.Get(name), ","); got != want {
			return status.Errorf(codes.FailedPrecondition, "backend saw %s %q, want %q", name, got, want)
		}
		return nil
	}
	b.handler.Store(&h)
}

// Allowed with the service's header changes, denied with its status, not
// asked where a route disables the filter; the service hears the
// RPC's headers, none of the GrpcService's initial metadata from an
// untrusted server.
func TestExtAuthzClientAllowDenyRouteDisable(t *testing.T) {
	a, err := testutils.StartAuthzServer(authzAllowUnlessDeny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	e := authzEnv(t, testutils.AllowGRPCService(a.Target()))
	b := startBackend(t, "a")
	e.update(authzTree(t, b, testutils.ExtAuthzFilter(a.Target(), nil)))
	conn := e.dial()
	seenHeader(b, "x-authz", "yes")
	if _, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-want", "allow"), conn, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("allowed RPC: %v", err)
	}
	checks := a.Checks()
	if len(checks) != 1 {
		t.Fatalf("%d checks, want 1", len(checks))
	}
	http := checks[0].Request.GetAttributes().GetRequest().GetHttp()
	if http.GetPath() != sayHello || checks[0].Request.GetAttributes().GetSource() != nil || len(checks[0].Metadata.Get("x-tenant")) != 0 {
		t.Errorf("check %v, metadata %v", checks[0].Request, checks[0].Metadata)
	}

	_, err = call(metadata.AppendToOutgoingContext(e.ctx, "x-want", "deny"), conn)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("denied RPC: %v, want UNAUTHENTICATED (HTTP 401)", err)
	}
	seenHeader(b, "x-authz", "")
	if _, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-want", "deny", "x-route", "open"), conn); err != nil {
		t.Fatalf("RPC on the route that disables the filter: %v", err)
	}
	if n := len(a.Checks()); n != 2 {
		t.Fatalf("%d checks, want 2: the route that disables the filter asks nothing", n)
	}
}

// An authorization service that cannot be reached fails the RPC with
// status_on_error, unless failure_mode_allow lets it through with the
// header that says so.
func TestExtAuthzClientServiceDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "passthrough:///" + lis.Addr().String()
	lis.Close()
	for _, allow := range []bool{false, true} {
		e := authzEnv(t, testutils.AllowGRPCService(down))
		b := startBackend(t, "a")
		seenHeader(b, "x-envoy-auth-failure-mode-allowed", "true")
		e.update(authzTree(t, b, testutils.ExtAuthzFilter(down, func(m *extauthzv3.ExtAuthz) {
			m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
			m.FailureModeAllow, m.FailureModeAllowHeaderAdd = allow, true
		})))
		_, err := call(e.ctx, e.dial(), grpc.WaitForReady(true))
		if !allow {
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), down) {
				t.Fatalf("failure_mode_allow false: %v, want UNAVAILABLE (status_on_error 503) naming %s", err, down)
			}
			continue
		}
		if err != nil {
			t.Fatalf("failure_mode_allow true: %v", err)
		}
	}
}

// From a trusted management server the GrpcService is used as given, its
// initial metadata included, each header's raw_value read before its
// value (gRFC A102, -bin or not); the RPC's own metadata never rides
// along on the call to the service.
func TestExtAuthzClientTrustedServer(t *testing.T) {
	a, err := testutils.StartAuthzServer(authzAllowUnlessDeny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	e := authzEnv(t, func(c *bootstrap.Config) {
		c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
	})
	b := startBackend(t, "a")
	e.update(authzTree(t, b, testutils.ExtAuthzFilter(a.Target(), func(m *extauthzv3.ExtAuthz) {
		m.GetGrpcService().InitialMetadata = append(m.GetGrpcService().InitialMetadata,
			&corev3.HeaderValue{Key: "x-raw", RawValue: []byte("r")},
			&corev3.HeaderValue{Key: "x-both", Value: "legacy", RawValue: []byte("raw")},
			&corev3.HeaderValue{Key: "x-id-bin", RawValue: []byte{0, 0xff}})
	})))
	if _, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-app", "1"), e.dial(), grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	checks := a.Checks()
	if len(checks) != 1 || strings.Join(checks[0].Metadata.Get("x-tenant"), ",") != "blue" || len(checks[0].Metadata.Get("x-app")) != 0 {
		t.Fatalf("checks %v, want one carrying x-tenant: blue and not the RPC's x-app", checks)
	}
	md := checks[0].Metadata
	if got, want := [3]string{strings.Join(md.Get("x-raw"), ","), strings.Join(md.Get("x-both"), ","), strings.Join(md.Get("x-id-bin"), ",")},
		[3]string{"r", "raw", "\x00\xff"}; got != want {
		t.Fatalf("the service got x-raw, x-both, x-id-bin %q, want %q (raw_value before value)", got, want)
	}
}

// gRFC A102: an untrusted management server naming a target the bootstrap
// does not allow has its Listener NACKed; the channel's RPCs fail with
// the error, which names the target.
func TestExtAuthzClientUntrustedDisallowedTargetNACKed(t *testing.T) {
	e := authzEnv(t, testutils.AllowGRPCService("dns:///allowed.example.com:443"))
	b := startBackend(t, "a")
	e.update(authzTree(t, b, testutils.ExtAuthzFilter("dns:///evil.example.com:443", nil)))
	_, err := call(e.ctx, e.dial())
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `"dns:///evil.example.com:443" is not in the bootstrap's allowed_grpc_services`) {
		t.Fatalf("RPC: %v, want UNAVAILABLE naming the disallowed target", err)
	}
}

// authzWithHeaders denies an RPC whose x-want header is "deny" with
// x-deny-reason: over-quota among its headers, and allows the others with
// x-authz-note: checked among the response headers to add.
func authzWithHeaders(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	for _, h := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
		if h.GetKey() == "x-want" && string(h.GetRawValue()) == "deny" {
			return &authv3.CheckResponse{
				Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
				HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
					Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
					Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-deny-reason", Value: "over-quota"}}},
				}},
			}, nil
		}
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-authz-note", Value: "checked"}}},
	}}}, nil
}

// A denial's headers reach the application as the RPC's trailers, and an
// allowed RPC's response headers to add as part of its response headers,
// through grpc.Header and grpc.Trailer on unary RPCs and streams and
// through a stream's Header, beside the server's own.
func TestExtAuthzClientResponseHeadersAndDenialTrailers(t *testing.T) {
	a, err := testutils.StartAuthzServer(authzWithHeaders)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	e := authzEnv(t, testutils.AllowGRPCService(a.Target()))
	b := startBackend(t, "a")
	e.update(authzTree(t, b, testutils.ExtAuthzFilter(a.Target(), nil)))
	conn := e.dial()

	var header, trailer metadata.MD
	if _, err := call(e.ctx, conn, grpc.WaitForReady(true), grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
		t.Fatalf("allowed RPC: %v", err)
	}
	if got := header.Get("x-authz-note"); len(got) != 1 || got[0] != "checked" || len(header.Get("content-type")) != 1 {
		t.Errorf("allowed unary RPC's header %v, want the server's with x-authz-note: checked", header)
	}

	header, trailer = nil, nil
	_, err = call(metadata.AppendToOutgoingContext(e.ctx, "x-want", "deny"), conn, grpc.Header(&header), grpc.Trailer(&trailer))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("denied RPC: %v, want PERMISSION_DENIED (HTTP 403)", err)
	}
	if got := trailer.Get("x-deny-reason"); len(got) != 1 || got[0] != "over-quota" {
		t.Errorf("denied unary RPC's trailer %v, want x-deny-reason: over-quota", trailer)
	}

	chat := &grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}
	header, trailer = nil, nil
	s, err := conn.NewStream(e.ctx, chat, "/goxds.test.Greeter/Chat", grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatalf("allowed stream: %v", err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	md, err := s.Header()
	if err != nil || strings.Join(md.Get("x-authz-note"), ",") != "checked" {
		t.Errorf("allowed stream's Header() = %v, %v; want x-authz-note: checked", md, err)
	}
	for err = s.RecvMsg(new(wrapperspb.StringValue)); err == nil; err = s.RecvMsg(new(wrapperspb.StringValue)) {
	}
	if err != io.EOF {
		t.Fatalf("allowed stream ended with %v", err)
	}
	if got := header.Get("x-authz-note"); len(got) != 1 || got[0] != "checked" {
		t.Errorf("allowed stream's grpc.Header %v, want x-authz-note: checked once", header)
	}

	header, trailer = nil, nil
	_, err = conn.NewStream(metadata.AppendToOutgoingContext(e.ctx, "x-want", "deny"), chat, "/goxds.test.Greeter/Chat", grpc.Header(&header), grpc.Trailer(&trailer))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("denied stream: %v, want PERMISSION_DENIED", err)
	}
	if got := trailer.Get("x-deny-reason"); len(got) != 1 || got[0] != "over-quota" {
		t.Errorf("denied stream's trailer %v, want x-deny-reason: over-quota", trailer)
	}
}
