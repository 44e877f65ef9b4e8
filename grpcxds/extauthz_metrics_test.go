package grpcxds_test

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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// authzByHeader allows an RPC, denies it (x-want: deny, with the status
// message "no quota left") or fails the call (x-want: fail).
func authzByHeader(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
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
}

// An allowed, a denied, a disabled (filter_enabled 0%) and a failed RPC
// each count once, on its outcome, labelled with the channel's target and
// the route's cluster (gRFC A92's grpc.client_ext_authz.*); an RPC on a
// route that turns the filter off counts nothing.
func TestExtAuthzClientMetrics(t *testing.T) {
	a, err := testutils.StartAuthzServer(authzByHeader)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	rec := &testutils.AuthzCounts{}
	e := authzEnvWith(t, testutils.AllowGRPCService(a.Target()), grpcxds.Options{ExtAuthzMetrics: rec})
	b := startBackend(t, "a")

	// Two filters: "authz" asks the service; "sampled" has filter_enabled
	// 0%, so every RPC it sees is disabled for it. x-route picks which
	// runs (the route's override turns the other off), or neither.
	sampled := testutils.ExtAuthzFilter(a.Target(), func(m *extauthzv3.ExtAuthz) {
		m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{}}
	})
	sampled.Name = "sampled"
	header := func(r *routev3.Route, v string) *routev3.Route {
		r.Match.Headers = []*routev3.HeaderMatcher{{Name: "x-route", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: v}}}
		return r
	}
	toSampled := header(toCluster(prefix("/"), "A"), "sampled")
	toSampled.TypedPerFilterConfig = map[string]*anypb.Any{"authz": disabledOverride()}
	open := header(toCluster(prefix("/"), "A"), "open")
	open.TypedPerFilterConfig = map[string]*anypb.Any{"authz": disabledOverride(), "sampled": disabledOverride()}
	checked := toCluster(prefix("/"), "A")
	checked.TypedPerFilterConfig = map[string]*anypb.Any{"sampled": disabledOverride()}
	res := tree(routes(toSampled, open, checked), clusters("A"), eds("A", b))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, testutils.ExtAuthzFilter(a.Target(), nil), sampled)}
	e.update(res)
	conn := e.dial()

	want := func(outcome string) []testutils.AuthzCount {
		return []testutils.AuthzCount{{Target: "goxds:///" + listener, Cluster: "A", Outcome: outcome}}
	}
	if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("allowed RPC: %v", err)
	}
	if got := rec.Take(); !slices.Equal(got, want("allowed")) {
		t.Errorf("allowed RPC counted %v, want %v", got, want("allowed"))
	}
	_, err = call(metadata.AppendToOutgoingContext(e.ctx, "x-want", "deny"), conn)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "no quota left") {
		t.Errorf("denied RPC: %v, want PERMISSION_DENIED with the service's message", err)
	}
	if got := rec.Take(); !slices.Equal(got, want("denied")) {
		t.Errorf("denied RPC counted %v, want %v", got, want("denied"))
	}
	if _, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-want", "fail"), conn); status.Code(err) != codes.PermissionDenied {
		t.Errorf("RPC whose check failed: %v, want PERMISSION_DENIED (status_on_error unset: 403)", err)
	}
	if got := rec.Take(); !slices.Equal(got, want("failed")) {
		t.Errorf("RPC whose check failed counted %v, want %v", got, want("failed"))
	}
	if _, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-route", "sampled", "x-want", "deny"), conn); err != nil {
		t.Errorf("RPC the filter is disabled for: %v", err)
	}
	if got := rec.Take(); !slices.Equal(got, want("filter_disabled")) {
		t.Errorf("RPC the filter is disabled for counted %v, want %v", got, want("filter_disabled"))
	}
	if _, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-route", "open", "x-want", "deny"), conn); err != nil {
		t.Errorf("RPC on the route that turns both filters off: %v", err)
	}
	if got := rec.Take(); len(got) != 0 {
		t.Errorf("RPC on the route that turns both filters off counted %v, want nothing", got)
	}
	if n := len(a.Checks()); n != 3 {
		t.Errorf("%d checks, want 3 (allowed, denied, failed)", n)
	}
}
