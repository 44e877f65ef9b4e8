package authz_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc/authz/audit"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/resources"
)

func toAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func exactSM(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func pathPerm(method string) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
		Rule: &matcherv3.PathMatcher_Path{Path: exactSM(method)},
	}}}
}

func anyPrincipal() *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Any{Any: true}}
}

func anyPerm() *rbacv3.Permission { return &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}} }

func headerPrincipal(name, value string) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Header{Header: &routev3.HeaderMatcher{
		Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: value},
	}}}
}

func rbacRules(action rbacv3.RBAC_Action, policies map[string]*rbacv3.Policy) *rbacfilterv3.RBAC {
	return &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: action, Policies: policies}}
}

func withAudit(m *rbacfilterv3.RBAC, optional bool, a *anypb.Any) *rbacfilterv3.RBAC {
	m.Rules.AuditLoggingOptions = &rbacv3.RBAC_AuditLoggingOptions{
		AuditCondition: rbacv3.RBAC_AuditLoggingOptions_ON_DENY,
		LoggerConfigs: []*rbacv3.RBAC_AuditLoggingOptions_AuditLoggerConfig{{
			AuditLogger: &corev3.TypedExtensionConfig{Name: "l", TypedConfig: a},
			IsOptional:  optional,
		}},
	}
	return m
}

// compileRBAC decodes m as the RBAC filter's registered type does when a
// Listener carries it.
func compileRBAC(t testing.TB, m *rbacfilterv3.RBAC) *resources.RBACRules {
	t.Helper()
	ft, ok := resources.LookupHTTPFilter("type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC")
	if !ok {
		t.Fatal("no RBAC filter registered")
	}
	c, err := ft.ParseConfig(toAny(m))
	if err != nil {
		t.Fatal(err)
	}
	return c.(*resources.RBACConfig).Rules
}

func TestRBACEngine(t *testing.T) {
	cert := &x509.Certificate{
		URIs:     []*url.URL{{Scheme: "spiffe", Host: "td", Path: "/ns/a/sa/client"}},
		DNSNames: []string{"ignored.example"},
	}
	dnsCert := &x509.Certificate{DNSNames: []string{"client.example"}}
	subjCert := &x509.Certificate{Subject: pkix.Name{CommonName: "client"}}
	base := authz.Request{
		Method:  "POST",
		Path:    "/pkg.Svc/Allowed",
		Headers: map[string][]string{":authority": {"svc.example"}, "x-user": {"alice"}},
		Local:   netip.MustParseAddrPort("10.0.0.1:8080"),
		Remote:  netip.MustParseAddrPort("[::ffff:192.168.0.7]:5000"),
	}
	tests := []struct {
		name    string
		action  rbacv3.RBAC_Action
		policy  *rbacv3.Policy
		req     func(r *authz.Request)
		matches bool
	}{
		{name: "path", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{pathPerm("/pkg.Svc/Allowed")}, Principals: []*rbacv3.Principal{anyPrincipal()}}, matches: true},
		{name: "other path", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{pathPerm("/pkg.Svc/Other")}, Principals: []*rbacv3.Principal{anyPrincipal()}}},
		{name: "host header is :authority", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal("Host", "svc.example")}}, matches: true},
		{name: ":path header", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal(":path", "/pkg.Svc/Allowed")}}, matches: true},
		{name: ":method header", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal(":method", "POST")}}, matches: true},
		{
			name:    ":method header is the request's method",
			policy:  &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal(":method", "GET")}},
			req:     func(r *authz.Request) { r.Method = "GET" },
			matches: true,
		},
		{
			name:   "no method: no :method header",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Header{Header: &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}}}},
			req:    func(r *authz.Request) { r.Method = "" },
		},
		{name: "header mismatch", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal("x-user", "bob")}}},
		{
			name: "source ip, mapped address",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_SourceIp{SourceIp: &corev3.CidrRange{AddressPrefix: "192.168.0.0", PrefixLen: wrapperspb.UInt32(16)}}},
			}},
			matches: true,
		},
		{
			name: "direct remote ip miss",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: &corev3.CidrRange{AddressPrefix: "10.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}},
			}},
		},
		{
			name: "destination ip and port",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{
				{Rule: &rbacv3.Permission_DestinationIp{DestinationIp: &corev3.CidrRange{AddressPrefix: "10.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}},
				{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 8080}},
			}}}}}, Principals: []*rbacv3.Principal{anyPrincipal()}},
			matches: true,
		},
		{
			name: "not port",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_NotRule{NotRule: &rbacv3.Permission{
				Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 8080},
			}}}}, Principals: []*rbacv3.Principal{anyPrincipal()}},
		},
		{
			name: "or ids",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{
				headerPrincipal("x-user", "bob"), headerPrincipal("x-user", "alice"),
			}}}}}},
			matches: true,
		},
		{
			name: "authenticated needs tls",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{}}},
			}},
		},
		{
			name: "authenticated uri san",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("spiffe://td/ns/a/sa/client")}}},
			}},
			req:     func(r *authz.Request) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{cert} },
			matches: true,
		},
		{
			name: "authenticated: dns sans are not looked at when there are uri sans",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("ignored.example")}}},
			}},
			req: func(r *authz.Request) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{cert} },
		},
		{
			name: "authenticated dns san",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("client.example")}}},
			}},
			req:     func(r *authz.Request) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{dnsCert} },
			matches: true,
		},
		{
			name: "authenticated subject",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("CN=client")}}},
			}},
			req:     func(r *authz.Request) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{subjCert} },
			matches: true,
		},
		{
			name: "metadata never matches, inverted always",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{
				{Rule: &rbacv3.Permission_Metadata{Metadata: &matcherv3.MetadataMatcher{Invert: true}}},
			}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_NotId{NotId: &rbacv3.Principal{
				Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{}},
			}}}}},
			matches: true,
		},
		{
			name: "requested server name is empty",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{
				{Rule: &rbacv3.Permission_RequestedServerName{RequestedServerName: exactSM("")}},
			}, Principals: []*rbacv3.Principal{anyPrincipal()}},
			matches: true,
		},
	}
	for _, tt := range tests {
		for _, action := range []rbacv3.RBAC_Action{rbacv3.RBAC_ALLOW, rbacv3.RBAC_DENY} {
			t.Run(tt.name+"/"+action.String(), func(t *testing.T) {
				e := compileRBAC(t, rbacRules(action, map[string]*rbacv3.Policy{"p": tt.policy}))
				req := base
				if tt.req != nil {
					tt.req(&req)
				}
				allowed, policy := authz.Authorize(e, &req)
				if want := tt.matches != (action == rbacv3.RBAC_DENY); allowed != want {
					t.Errorf("allowed = %v, want %v", allowed, want)
				}
				if (policy == "p") != tt.matches {
					t.Errorf("matched policy %q, want a match: %v", policy, tt.matches)
				}
			})
		}
	}
}

// A filter without rules (no rules, or the LOG action) decodes to nil
// rules, which let every request through.
func TestAuthorizeWithoutRules(t *testing.T) {
	for _, m := range []*rbacfilterv3.RBAC{{}, rbacRules(rbacv3.RBAC_LOG, map[string]*rbacv3.Policy{"p": {Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{anyPrincipal()}}})} {
		rules := compileRBAC(t, m)
		if allowed, policy := authz.Authorize(rules, &authz.Request{Path: "/s/m"}); rules != nil || !allowed || policy != "" {
			t.Errorf("rules %+v: allowed %v by %q, want nil rules that allow", rules, allowed, policy)
		}
	}
}

// recordingLogger is an audit logger registered through grpc-go's public
// registry, as a user would.
type recordingLogger struct {
	mu     sync.Mutex
	events []audit.Event
	prefix string
}

func (l *recordingLogger) Log(e *audit.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e2 := *e
	e2.MatchedRule = l.prefix + e2.MatchedRule
	l.events = append(l.events, e2)
}

type recordingBuilder struct{ l *recordingLogger }

type recordingConfig struct {
	audit.LoggerConfig
	Prefix string `json:"prefix"`
}

func (b recordingBuilder) ParseLoggerConfig(c json.RawMessage) (audit.LoggerConfig, error) {
	var rc recordingConfig
	err := json.Unmarshal(c, &rc)
	return rc, err
}
func (b recordingBuilder) Build(c audit.LoggerConfig) audit.Logger {
	b.l.prefix = c.(recordingConfig).Prefix
	return b.l
}
func (recordingBuilder) Name() string { return "goxds.test.RecordingLogger" }

func TestRBACAuditLogging(t *testing.T) {
	l := &recordingLogger{}
	audit.RegisterLoggerBuilder(recordingBuilder{l})
	cfg, _ := structpb.NewStruct(map[string]any{"prefix": "rule:"})
	m := rbacRules(rbacv3.RBAC_DENY, map[string]*rbacv3.Policy{
		"deny-other": {Permissions: []*rbacv3.Permission{pathPerm("/pkg.Svc/Other")}, Principals: []*rbacv3.Principal{anyPrincipal()}},
	})
	withAudit(m, false, toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/goxds.test.RecordingLogger", Value: cfg}))
	e := compileRBAC(t, m)
	for _, method := range []string{"/pkg.Svc/Allowed", "/pkg.Svc/Other"} {
		authz.Authorize(e, &authz.Request{Path: method, Principal: "spiffe://td/x"})
	}
	// ON_DENY: only the denied RPC is logged.
	want := []audit.Event{{FullMethodName: "/pkg.Svc/Other", Principal: "spiffe://td/x", MatchedRule: "rule:deny-other"}}
	if len(l.events) != 1 || l.events[0] != want[0] {
		t.Errorf("audit events = %+v, want %+v", l.events, want)
	}
}

// BenchmarkRBACAuthorize: one RPC checked against ten policies, the match
// in the last (names sort policy-0 … policy-9).
func BenchmarkRBACAuthorize(b *testing.B) {
	policies := make(map[string]*rbacv3.Policy)
	for i := range 10 {
		policies["policy-"+strconv.Itoa(i)] = &rbacv3.Policy{
			Permissions: []*rbacv3.Permission{pathPerm("/pkg.Svc/M" + strconv.Itoa(i))},
			Principals:  []*rbacv3.Principal{headerPrincipal("x-user", "alice")},
		}
	}
	e := compileRBAC(b, rbacRules(rbacv3.RBAC_ALLOW, policies))
	req := &authz.Request{Method: "POST", Path: "/pkg.Svc/M9", Headers: map[string][]string{"x-user": {"alice"}}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := authz.Authorize(e, req); !ok {
			b.Fatal("denied")
		}
	}
}

// FuzzAuthorize evaluates RBAC rules a management server could send
// against requests: evaluation never panics, the decision follows the
// rules' action and the policy reported is one of theirs.
func FuzzAuthorize(f *testing.F) {
	ft, ok := resources.LookupHTTPFilter("type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC")
	if !ok {
		f.Fatal("no RBAC filter registered")
	}
	f.Fuzz(func(t *testing.T, b []byte, path, user string) {
		c, err := ft.ParseConfig(&anypb.Any{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC", Value: b})
		if err != nil {
			return
		}
		rules := c.(*resources.RBACConfig).Rules
		if rules == nil {
			return
		}
		cert := &x509.Certificate{URIs: []*url.URL{{Scheme: "spiffe", Host: "td", Path: "/" + user}}}
		for _, tls := range []bool{false, true} {
			req := &authz.Request{
				Method: "POST", Path: path, Headers: map[string][]string{"x-user": {user}, ":authority": {user}},
				Local: netip.MustParseAddrPort("10.0.0.1:8080"), Remote: netip.MustParseAddrPort("[::ffff:192.168.0.7]:5000"),
				TLS: tls, PeerCertificates: []*x509.Certificate{cert},
			}
			allowed, policy := authz.Authorize(rules, req)
			if allowed != ((policy != "") != rules.Deny) {
				t.Fatalf("allowed = %v with policy %q and Deny %v", allowed, policy, rules.Deny)
			}
			if policy != "" && !slices.ContainsFunc(rules.Policies, func(p resources.RBACPolicy) bool { return p.Name == policy }) {
				t.Fatalf("matched policy %q is not one of the rules'", policy)
			}
		}
	})
}

// TestPathHeaderSeesQuery: a :path header matcher sees the path with its
// query, url_path the path without it, as Envoy's RBAC docs say
// (Permission.header: "The pseudo-header :path includes the query and
// fragment string. Use the url_path field if you want to match the URL
// path without the query and fragment string").
func TestPathHeaderSeesQuery(t *testing.T) {
	pathHeader := func(sm *matcherv3.StringMatcher) *rbacv3.Permission {
		return &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{
			Name: ":path", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}}}}
	}
	rules := compileRBAC(t, rbacRules(rbacv3.RBAC_DENY, map[string]*rbacv3.Policy{
		"debug-query": {Permissions: []*rbacv3.Permission{pathHeader(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "debug=1"}})}, Principals: []*rbacv3.Principal{anyPrincipal()}},
		"exact-path": {Permissions: []*rbacv3.Permission{pathHeader(exactSM("/exact"))}, Principals: []*rbacv3.Principal{anyPrincipal()}},
		"url-path":   {Permissions: []*rbacv3.Permission{pathPerm("/url")}, Principals: []*rbacv3.Principal{anyPrincipal()}},
	}))
	for _, tc := range []struct {
		path, query string
		allowed     bool
	}{
		{"/a", "?debug=1", false},
		{"/a", "?x=2&debug=1", false},
		{"/a", "?x=2", true},
		{"/a", "", true},
		{"/exact", "", false},
		{"/exact", "?", true},    // :path is "/exact?"
		{"/exact", "?x=1", true}, // :path is "/exact?x=1"
		{"/url", "?x=1", false},  // url_path ignores the query
		{"/url", "?", false},
	} {
		if got, _ := authz.Authorize(rules, &authz.Request{Method: "GET", Path: tc.path, Query: tc.query}); got != tc.allowed {
			t.Errorf("%s%s: allowed = %v, want %v", tc.path, tc.query, got, tc.allowed)
		}
	}
}
