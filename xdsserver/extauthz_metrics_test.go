package xdsserver_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// An allowed, a denied, a disabled (filter_enabled 0%) and a failed RPC
// each count once, on its outcome (gRFC A92's grpc.server_ext_authz.*).
func TestExtAuthzServerMetrics(t *testing.T) {
	a, err := testutils.StartAuthzServer(func(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		for _, h := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
			switch {
			case h.GetKey() != "x-want":
			case string(h.GetRawValue()) == "deny":
				return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied), Message: "no quota left"}}, nil
			case string(h.GetRawValue()) == "fail":
				return nil, errors.New("the authorization service broke")
			}
		}
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	rec := &testutils.AuthzCounts{}
	e := newEnvOpts(t, envOptions{edit: testutils.AllowGRPCService(a.Target()), server: func(e *env, cfg *bootstrap.Config) []grpc.ServerOption {
		return append(e.defaultOptions(cfg), xdsserver.RecordExtAuthz(rec))
	}})
	// "authz" asks the service, on every route but SayBye's, where only
	// "sampled" runs, whose filter_enabled of 0% leaves every RPC out.
	sampled := testutils.ExtAuthzFilter(a.Target(), func(m *extauthzv3.ExtAuthz) {
		m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{}}
	})
	sampled.Name = "sampled"
	off := testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})
	nf := &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}
	rc := &routev3.RouteConfiguration{Name: "authz-routes", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: sayBye}}, Action: nf, TypedPerFilterConfig: map[string]*anypb.Any{"authz": off}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: nf, TypedPerFilterConfig: map[string]*anypb.Any{"sampled": off}},
		},
	}}}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, rc, testutils.ExtAuthzFilter(a.Target(), nil), sampled)}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()

	if err := call(withWant(e.ctx, "allow"), conn, sayHello); err != nil {
		t.Fatalf("allowed RPC: %v", err)
	}
	if got := rec.Take(); !slices.Equal(got, []testutils.AuthzCount{{Target: "server", Cluster: "", Outcome: "allowed"}}) {
		t.Errorf("allowed RPC counted %v", got)
	}
	err = call(withWant(e.ctx, "deny"), conn, sayHello)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "no quota left") {
		t.Errorf("denied RPC: %v, want PERMISSION_DENIED with the service's message", err)
	}
	if got := rec.Take(); !slices.Equal(got, []testutils.AuthzCount{{Target: "server", Cluster: "", Outcome: "denied"}}) {
		t.Errorf("denied RPC counted %v", got)
	}
	if err := call(withWant(e.ctx, "fail"), conn, sayHello); status.Code(err) != codes.PermissionDenied {
		t.Errorf("RPC whose check failed: %v, want PERMISSION_DENIED (status_on_error unset: 403)", err)
	}
	if got := rec.Take(); !slices.Equal(got, []testutils.AuthzCount{{Target: "server", Cluster: "", Outcome: "failed"}}) {
		t.Errorf("RPC whose check failed counted %v", got)
	}
	if err := call(withWant(e.ctx, "deny"), conn, sayBye); err != nil {
		t.Errorf("RPC the filter is disabled for: %v", err)
	}
	if got := rec.Take(); !slices.Equal(got, []testutils.AuthzCount{{Target: "server", Cluster: "", Outcome: "filter_disabled"}}) {
		t.Errorf("RPC the filter is disabled for counted %v", got)
	}
	if n := len(a.Checks()); n != 3 {
		t.Errorf("%d checks, want 3 (allowed, denied, failed)", n)
	}
}
