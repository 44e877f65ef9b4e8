package httpxds_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/goxds/xds/testutils"
)

// bypasses are the classic ways to spell "/admin" past a check on
// "/admin".
var bypasses = []string{"/admin", "//admin", "/./admin", "/%61dmin", "/public/../admin"}

// TestPathBypassesDeniedByRBAC: an RBAC policy denying "/admin" denies
// each spelling of it, since paths are normalized before RBAC sees them
// (Envoy's HttpConnectionManager normalize_path and merge_slashes; goxds
// turns both on where the Listener is silent, as Envoy's edge guide
// recommends for RBAC by path:
// https://www.envoyproxy.io/docs/envoy/latest/configuration/best_practices/edge).
func TestPathBypassesDeniedByRBAC(t *testing.T) {
	logs := make(records, 64)
	e := newEnv(t, envOptions{logger: slog.New(logs)})
	e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, rbacDenyingPrefix("/admin")))
	for _, p := range bypasses {
		// Envoy's body, and nothing of the policy; the server's debug
		// log says which path was judged and why.
		got := e.get(p)
		if got.status != http.StatusForbidden || got.body != "httpxds: RBAC: access denied" {
			t.Errorf("GET %s: %d %q, want 403 \"httpxds: RBAC: access denied\"", p, got.status, got.body)
		}
		want := `DEBUG httpxds: RBAC: access denied method=GET path=/admin why=matched deny policy "no-admin" filter=rbac route_configuration=rc`
		if l := nextLog(t, e.ctx, logs, "RBAC"); !strings.HasPrefix(l, want) {
			t.Errorf("GET %s logged %q, want it to start %q", p, l, want)
		}
	}
	// The handler is served the normalized path that RBAC judged.
	e.want(e.get("/public/./x/../%7Euser"), http.StatusOK, "served GET /public/~user /public/~user")
}

// TestPathBypassesRoutedAsAdmin: each spelling of "/admin" reaches the
// route of "/admin" and no other (the route a check on "/admin" would put
// there: here a direct_response).
func TestPathBypassesRoutedAsAdmin(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.serve(e.listener(routes("rc", directRoute(prefix("/admin"), 418, "admin route"), serveRoute(prefix("/"))), "", nil))
	for _, p := range bypasses {
		e.want(e.get(p), 418, "admin route")
	}
}

// TestPathNotNormalizable: a path normalization refuses is answered 400,
// as Envoy answers it, naming the listener; so is an escaped slash under
// REJECT_REQUEST, and UNESCAPE_AND_REDIRECT redirects (307) to the
// unescaped path
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto,
// path_with_escaped_slashes_action).
func TestPathNotNormalizable(t *testing.T) {
	e := newEnv(t, envOptions{})
	setAction := func(a hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction) func(*hcmv3.HttpConnectionManager) {
		return func(h *hcmv3.HttpConnectionManager) { h.PathWithEscapedSlashesAction = a }
	}
	e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", setAction(hcmv3.HttpConnectionManager_REJECT_REQUEST)))
	e.want(e.get("/a#frag"), http.StatusBadRequest, `listener "`+e.name+`": path "/a#frag" holds a fragment`)
	e.want(e.get("/public%2F..%2Fadmin"), http.StatusBadRequest, "REJECT_REQUEST")
	e.want(e.get("/ok"), http.StatusOK, "served GET /ok")

	e2 := newEnv(t, envOptions{})
	e2.serve(e2.listener(routes("rc", serveRoute(prefix("/"))), "", setAction(hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT)))
	got := e2.get("/public%2F..%2Fadmin?x=1")
	if got.status != http.StatusTemporaryRedirect || got.header.Get("Location") != "/admin?x=1" {
		t.Errorf("got %d Location %q, want 307 to /admin?x=1", got.status, got.header.Get("Location"))
	}
	e2.want(e2.get("/public/../admin?x=1"), http.StatusOK, "served GET /admin /admin")
}

// rbacDeny is an RBAC filter with one DENY policy of the permission p.
func rbacDeny(p *rbacv3.Permission) *hcmv3.HttpFilter {
	cfg := &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_DENY,
		Policies: map[string]*rbacv3.Policy{"deny": {
			Permissions: []*rbacv3.Permission{p},
			Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}},
	}}
	return &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(cfg)}}
}

// TestRBACPathHeaderSeesQuery: RBAC's :path header matcher sees the
// (normalized) path with the query, url_path the path without it, as
// Envoy's RBAC docs say of Permission.header
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/rbac/v3/rbac.proto:
// the pseudo-header :path includes the query and fragment string, and
// url_path matches the path without them).
func TestRBACPathHeaderSeesQuery(t *testing.T) {
	t.Run(":path", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		debug := &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{
			Name: ":path", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "/x?debug=1"}}}}}}
		e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, rbacDeny(debug)))
		e.want(e.get("/x?debug=1"), http.StatusForbidden, "RBAC: access denied")
		e.want(e.get("//y/../x?debug=1"), http.StatusForbidden, "RBAC: access denied")
		e.want(e.get("/x?debug=0"), http.StatusOK, "served GET /x")
		e.want(e.get("/x"), http.StatusOK, "served GET /x")
	})
	t.Run("url_path", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		e.serve(e.listener(routes("rc", serveRoute(prefix("/"))), "", nil, rbacDeny(&rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
			Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "/admin"}}}}}})))
		e.want(e.get("/admin?x=1"), http.StatusForbidden, "RBAC: access denied")
		e.want(e.get("/admin?"), http.StatusForbidden, "RBAC: access denied")
		e.want(e.get("/admin2?x=1"), http.StatusOK, "served GET /admin2")
	})
}

// nextLog is the next record logged that contains sub, waiting until ctx
// ends.
func nextLog(t *testing.T, ctx context.Context, logs records, sub string) string {
	t.Helper()
	for {
		select {
		case l := <-logs:
			if strings.Contains(l, sub) {
				return l
			}
		case <-ctx.Done():
			t.Fatalf("no log record with %q: %v", sub, ctx.Err())
			return ""
		}
	}
}
