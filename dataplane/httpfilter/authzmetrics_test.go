package httpfilter

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// observedRequest records the outcomes it is told of.
type observedRequest struct {
	testRequest
	outcomes []extauthz.Outcome
}

func (r *observedRequest) AuthzChecked(o extauthz.Outcome) { r.outcomes = append(r.outcomes, o) }

// A Request that is an AuthzObserver hears of each check's outcome once;
// a route that turns the filter off makes no check and no call.
func TestAuthzObserver(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		fa     *fakeAuthz
		change func(*extauthzv3.ExtAuthz)
		want   extauthz.Outcome
	}{
		{&fakeAuthz{resp: &extauthz.CheckResponse{}}, nil, extauthz.Allowed},
		{&fakeAuthz{resp: &extauthz.CheckResponse{Code: int32(codes.PermissionDenied)}}, nil, extauthz.Denied},
		{&fakeAuthz{err: errors.New("down")}, func(m *extauthzv3.ExtAuthz) { m.FailureModeAllow = true }, extauthz.Failed},
		{&fakeAuthz{resp: &extauthz.CheckResponse{}}, func(m *extauthzv3.ExtAuthz) {
			m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{}} // 0%
		}, extauthz.Disabled},
	} {
		l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{authzFilter(t, "authz", tc.change), router()}}
		req := &observedRequest{testRequest: pairs()}
		NewChain(l, Env{Authz: tc.fa}).RunRoute(ctx, nil, &resources.Route{}, -1, req)
		if !slices.Equal(req.outcomes, []extauthz.Outcome{tc.want}) {
			t.Errorf("outcomes %v, want [%d]", req.outcomes, tc.want)
		}
	}
	l := &resources.Listener{HTTPFilters: []resources.HTTPFilter{authzFilter(t, "authz", nil), router()}}
	req := &observedRequest{testRequest: pairs()}
	off := &resources.Route{FilterOverrides: map[string]resources.HTTPFilterConfig{"authz": resources.DisabledFilterOverride{}}}
	NewChain(l, Env{Authz: &fakeAuthz{resp: &extauthz.CheckResponse{}}}).RunRoute(ctx, nil, off, -1, req)
	if len(req.outcomes) != 0 {
		t.Errorf("outcomes %v on a route that turns the filter off, want none", req.outcomes)
	}
}
