package resources

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/rbac/audit_loggers/stream/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	exprpb "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/grpc/authz/audit"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

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

func compileRBAC(t *testing.T, m *rbacfilterv3.RBAC) *RBACEngine {
	t.Helper()
	c, err := rbacFilterType.ParseConfig(toAny(m))
	if err != nil {
		t.Fatal(err)
	}
	return c.(*RBACConfig).Engine
}

func TestRBACEngine(t *testing.T) {
	cert := &x509.Certificate{
		URIs:     []*url.URL{{Scheme: "spiffe", Host: "td", Path: "/ns/a/sa/client"}},
		DNSNames: []string{"ignored.example"},
	}
	dnsCert := &x509.Certificate{DNSNames: []string{"client.example"}}
	subjCert := &x509.Certificate{Subject: pkix.Name{CommonName: "client"}}
	base := RBACRequest{
		FullMethod: "/pkg.Svc/Allowed",
		Headers:    map[string][]string{":authority": {"svc.example"}, "x-user": {"alice"}},
		Local:      netip.MustParseAddrPort("10.0.0.1:8080"),
		Remote:     netip.MustParseAddrPort("[::ffff:192.168.0.7]:5000"),
	}
	tests := []struct {
		name    string
		action  rbacv3.RBAC_Action
		policy  *rbacv3.Policy
		req     func(r *RBACRequest)
		matches bool
	}{
		{name: "path", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{pathPerm("/pkg.Svc/Allowed")}, Principals: []*rbacv3.Principal{anyPrincipal()}}, matches: true},
		{name: "other path", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{pathPerm("/pkg.Svc/Other")}, Principals: []*rbacv3.Principal{anyPrincipal()}}},
		{name: "host header is :authority", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal("Host", "svc.example")}}, matches: true},
		{name: ":path header", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal(":path", "/pkg.Svc/Allowed")}}, matches: true},
		{name: ":method header", policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal(":method", "POST")}}, matches: true},
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
			req:     func(r *RBACRequest) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{cert} },
			matches: true,
		},
		{
			name: "authenticated: dns sans are not looked at when there are uri sans",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("ignored.example")}}},
			}},
			req: func(r *RBACRequest) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{cert} },
		},
		{
			name: "authenticated dns san",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("client.example")}}},
			}},
			req:     func(r *RBACRequest) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{dnsCert} },
			matches: true,
		},
		{
			name: "authenticated subject",
			policy: &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("CN=client")}}},
			}},
			req:     func(r *RBACRequest) { r.TLS, r.PeerCertificates = true, []*x509.Certificate{subjCert} },
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
				allowed, policy := e.Authorize(&req)
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

func TestRBACConfigRules(t *testing.T) {
	ok := &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{anyPrincipal()}}
	tests := []struct {
		name       string
		cfg        *rbacfilterv3.RBAC
		wantErr    string
		wantEngine bool
	}{
		{name: "no rules", cfg: &rbacfilterv3.RBAC{}},
		{name: "log action", cfg: rbacRules(rbacv3.RBAC_LOG, map[string]*rbacv3.Policy{"p": ok})},
		{name: "allow", cfg: rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": ok}), wantEngine: true},
		{
			name:    "condition",
			cfg:     rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": {Condition: &exprpb.Expr{}}}),
			wantErr: "rules.policies[p].condition: not supported",
		},
		{
			name: "grpc- header",
			cfg: rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": {
				Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal("grpc-timeout", "1")},
			}}),
			wantErr: `rules.policies[p].principals[0].header.name: "grpc-timeout": header not allowed`,
		},
		{
			name: ":scheme header, even with the log action",
			cfg: rbacRules(rbacv3.RBAC_LOG, map[string]*rbacv3.Policy{"p": {
				Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{headerPrincipal(":scheme", "http")},
			}}),
			wantErr: `":scheme": header not allowed`,
		},
		{
			name: "unsupported principal",
			cfg: rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": {
				Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_FilterState{}}},
			}}),
			wantErr: "principals[0]: unsupported principal identifier *rbacv3.Principal_FilterState",
		},
		{
			name: "empty permission",
			cfg: rbacRules(rbacv3.RBAC_DENY, map[string]*rbacv3.Policy{"p": {
				Permissions: []*rbacv3.Permission{{}}, Principals: []*rbacv3.Principal{anyPrincipal()},
			}}),
			wantErr: "permissions[0]: unsupported permission rule <nil>",
		},
		{
			name: "bad cidr",
			cfg: rbacRules(rbacv3.RBAC_DENY, map[string]*rbacv3.Policy{"p": {
				Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{
					{Identifier: &rbacv3.Principal_SourceIp{SourceIp: &corev3.CidrRange{AddressPrefix: "1.2.3.4", PrefixLen: wrapperspb.UInt32(40)}}},
				},
			}}),
			wantErr: "principals[0].source_ip: invalid prefix 1.2.3.4/40",
		},
		{
			name: "unknown audit logger",
			cfg: withAudit(rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": ok}), false,
				toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/acme.NoSuchLogger"})),
			wantErr: `audit_logging_options.logger_configs[0].audit_logger.typed_config: no audit logger registered for "acme.NoSuchLogger"`,
		},
		{
			name: "unknown optional audit logger",
			cfg: withAudit(rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": ok}), true,
				toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/acme.NoSuchLogger"})),
			wantEngine: true,
		},
		{
			name:       "stdout audit logger",
			cfg:        withAudit(rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": ok}), false, toAny(&streamv3.StdoutAuditLog{})),
			wantEngine: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := rbacFilterType.ParseConfig(toAny(tt.cfg))
			checkErr(t, err, tt.wantErr)
			if err == nil && (c.(*RBACConfig).Engine != nil) != tt.wantEngine {
				t.Errorf("engine = %v, want one: %v", c.(*RBACConfig).Engine, tt.wantEngine)
			}
		})
	}
	// An override without rules lets every RPC through.
	c, err := rbacFilterType.ParseOverride(toAny(&rbacfilterv3.RBACPerRoute{}))
	if err != nil || c.(*RBACConfig).Engine != nil {
		t.Errorf("empty RBACPerRoute = %+v, %v; want no engine", c, err)
	}
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
		e.Authorize(&RBACRequest{FullMethod: method, Principal: "spiffe://td/x"})
	}
	// ON_DENY: only the denied RPC is logged.
	want := []audit.Event{{FullMethodName: "/pkg.Svc/Other", Principal: "spiffe://td/x", MatchedRule: "rule:deny-other"}}
	if len(l.events) != 1 || l.events[0] != want[0] {
		t.Errorf("audit events = %+v, want %+v", l.events, want)
	}
}

func TestRBACFilterIsServerOnly(t *testing.T) {
	rbacFilter := &hcmv3.HttpFilter{Name: "rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(&rbacfilterv3.RBAC{})}}
	h := rdsHCM("rc")
	h.HttpFilters = append([]*hcmv3.HttpFilter{rbacFilter}, h.HttpFilters...)
	_, _, err := decodeMsg(ListenerType, listenerWith("l", h))
	if err == nil || !strings.Contains(err.Error(), "cannot run on a gRPC client") {
		t.Errorf("client Listener with RBAC: %v, want it refused", err)
	}
	rbacFilter.IsOptional = true
	if _, l, err := decodeMsg(ListenerType, listenerWith("l", h)); err != nil || len(l.HTTPFilters) != 1 {
		t.Errorf("client Listener with optional RBAC: %v, %v; want it left out", l, err)
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
	c, err := rbacFilterType.ParseConfig(toAny(rbacRules(rbacv3.RBAC_ALLOW, policies)))
	if err != nil {
		b.Fatal(err)
	}
	e := c.(*RBACConfig).Engine
	req := &RBACRequest{FullMethod: "/pkg.Svc/M9", Headers: map[string][]string{"x-user": {"alice"}}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := e.Authorize(req); !ok {
			b.Fatal("denied")
		}
	}
}
