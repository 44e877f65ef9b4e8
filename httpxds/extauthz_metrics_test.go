package httpxds_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

// The Transport counts each check once on its outcome, labelled with the
// route's cluster and no target; a route that disables the filter counts
// nothing.
func TestClientExtAuthzMetrics(t *testing.T) {
	a, err := testutils.StartAuthzServer(func(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		for _, h := range req.GetAttributes().GetRequest().GetHttp().GetHeaderMap().GetHeaders() {
			if h.GetKey() == "x-want" && string(h.GetRawValue()) == "fail" {
				return nil, errors.New("the authorization service broke")
			}
		}
		return authzDecide(ctx, req)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	rec := &testutils.AuthzCounts{}
	e := newCEnv(t, cenvOptions{edit: testutils.AllowGRPCService(a.Target()), opts: func(o *httpxds.TransportOptions) { o.ExtAuthzMetrics = rec }})
	b := newBackend(t, "a")
	e.update(authzWorld(b, testutils.ExtAuthzFilter(a.Target(), nil)))

	for _, tc := range []struct {
		path, want string
		status     int
		counts     []testutils.AuthzCount
	}{
		{"/x", "allow", http.StatusOK, []testutils.AuthzCount{{Target: "", Cluster: "c", Outcome: "allowed"}}},
		{"/x", "deny", http.StatusUnauthorized, []testutils.AuthzCount{{Target: "", Cluster: "c", Outcome: "denied"}}},
		{"/x", "fail", http.StatusForbidden, []testutils.AuthzCount{{Target: "", Cluster: "c", Outcome: "failed"}}},
		{"/open", "deny", http.StatusOK, nil},
	} {
		if got := e.get(tc.path, "x-want: "+tc.want); got.status != tc.status {
			t.Errorf("%s x-want %s: %d, want %d", tc.path, tc.want, got.status, tc.status)
		}
		if got := rec.Take(); !slices.Equal(got, tc.counts) {
			t.Errorf("%s x-want %s counted %v, want %v", tc.path, tc.want, got, tc.counts)
		}
	}
}

// The Server counts each check once on its outcome; a header change
// disallow_is_error refuses counts as failed; a route that disables the
// filter counts nothing.
func TestServerExtAuthzMetrics(t *testing.T) {
	a := startAuthzServer(t)
	rec := &testutils.AuthzCounts{}
	e := authzServerEnvWith(t, a.Target(), func(m *extauthzv3.ExtAuthz) {
		m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{
			DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-forbidden"},
			DisallowIsError:    wrapperspb.Bool(true),
		}
	}, rec)
	for _, tc := range []struct {
		path, want string
		status     int
		counts     []testutils.AuthzCount
	}{
		{"/x", "allow", http.StatusOK, []testutils.AuthzCount{{Target: "server", Cluster: "", Outcome: "allowed"}}},
		{"/x", "deny", http.StatusUnauthorized, []testutils.AuthzCount{{Target: "server", Cluster: "", Outcome: "denied"}}},
		{"/x", "disallowed", http.StatusInternalServerError, []testutils.AuthzCount{{Target: "server", Cluster: "", Outcome: "failed"}}},
		{"/off", "deny", http.StatusOK, nil},
	} {
		if got := e.get(tc.path, "X-Want: "+tc.want); got.status != tc.status {
			t.Errorf("%s x-want %s: %d, want %d", tc.path, tc.want, got.status, tc.status)
		}
		if got := rec.Take(); !slices.Equal(got, tc.counts) {
			t.Errorf("%s x-want %s counted %v, want %v", tc.path, tc.want, got, tc.counts)
		}
	}
}
