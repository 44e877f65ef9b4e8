package resources

import (
	"net/netip"
	"reflect"
	"strings"
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
	"google.golang.org/protobuf/types/known/anypb"
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

func TestRBACConfigRules(t *testing.T) {
	ok := &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{anyPrincipal()}}
	tests := []struct {
		name      string
		cfg       *rbacfilterv3.RBAC
		wantErr   string
		wantRules bool
	}{
		{name: "no rules", cfg: &rbacfilterv3.RBAC{}},
		{name: "log action", cfg: rbacRules(rbacv3.RBAC_LOG, map[string]*rbacv3.Policy{"p": ok})},
		{name: "allow", cfg: rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": ok}), wantRules: true},
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
			wantRules: true,
		},
		{
			name:      "stdout audit logger",
			cfg:       withAudit(rbacRules(rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"p": ok}), false, toAny(&streamv3.StdoutAuditLog{})),
			wantRules: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := rbacFilterType.ParseConfig(toAny(tt.cfg))
			checkErr(t, err, tt.wantErr)
			if err == nil && (c.(*RBACConfig).Rules != nil) != tt.wantRules {
				t.Errorf("rules = %v, want some: %v", c.(*RBACConfig).Rules, tt.wantRules)
			}
		})
	}
	// An override without rules lets every RPC through.
	c, err := rbacFilterType.ParseOverride(toAny(&rbacfilterv3.RBACPerRoute{}))
	if err != nil || c.(*RBACConfig).Rules != nil {
		t.Errorf("empty RBACPerRoute = %+v, %v; want no rules", c, err)
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

// The decoded rules are the data plane's input (dataplane/authz evaluates
// them as they are): each permission and principal keeps its kind and
// operands, header names are lower case with host as :authority,
// addresses are unmapped, policies are sorted by name.
func TestRBACRulesDecoded(t *testing.T) {
	hostPerm := &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{
		Name: "Host", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "svc"},
	}}}
	m := rbacRules(rbacv3.RBAC_DENY, map[string]*rbacv3.Policy{
		"b": {Permissions: []*rbacv3.Permission{anyPerm()}, Principals: []*rbacv3.Principal{anyPrincipal()}},
		"a": {
			Permissions: []*rbacv3.Permission{
				{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{hostPerm, pathPerm("/s/m")}}}},
				{Rule: &rbacv3.Permission_NotRule{NotRule: &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 80}}}},
				{Rule: &rbacv3.Permission_DestinationIp{DestinationIp: &corev3.CidrRange{AddressPrefix: "::ffff:10.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}},
				{Rule: &rbacv3.Permission_Metadata{Metadata: &matcherv3.MetadataMatcher{Invert: true}}},
				{Rule: &rbacv3.Permission_RequestedServerName{RequestedServerName: exactSM("sni")}},
			},
			Principals: []*rbacv3.Principal{
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{}}},
				{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactSM("spiffe://td/x")}}},
				{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{
					{Identifier: &rbacv3.Principal_SourceIp{SourceIp: &corev3.CidrRange{AddressPrefix: "192.168.0.0", PrefixLen: wrapperspb.UInt32(16)}}},
					{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: &corev3.CidrRange{AddressPrefix: "::1", PrefixLen: wrapperspb.UInt32(128)}}},
					{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: &corev3.CidrRange{AddressPrefix: "1.2.3.4", PrefixLen: wrapperspb.UInt32(32)}}},
				}}}},
			},
		},
	})
	withAudit(m, false, toAny(&streamv3.StdoutAuditLog{}))
	c, err := rbacFilterType.ParseConfig(toAny(m))
	if err != nil {
		t.Fatal(err)
	}
	r := c.(*RBACConfig).Rules
	if r == nil || !r.Deny || len(r.Policies) != 2 || r.Policies[0].Name != "a" || r.Policies[1].Name != "b" {
		t.Fatalf("rules = %+v, want DENY with policies a, b", r)
	}
	if r.AuditCondition != RBACAuditOnDeny || len(r.AuditLoggers) != 1 || r.AuditLoggers[0].Name != "stdout_logger" {
		t.Errorf("audit = %v, %+v; want ON_DENY to the stdout logger", r.AuditCondition, r.AuditLoggers)
	}
	perms, princs := r.Policies[0].Permissions, r.Policies[0].Principals
	and, ok := perms[0].(*RBACAnd)
	if !ok || len(and.Rules) != 2 {
		t.Fatalf("and_rules = %#v", perms[0])
	}
	if h, ok := and.Rules[0].(*RBACHeader); !ok || h.Header.Name() != ":authority" || !h.Header.Match("svc", true) {
		t.Errorf("host header = %#v, want :authority", and.Rules[0])
	}
	if p, ok := and.Rules[1].(*RBACPath); !ok || !p.Path.Match("/s/m") {
		t.Errorf("url_path = %#v", and.Rules[1])
	}
	if not, ok := perms[1].(*RBACNot); !ok || *not.Rule.(*RBACDestinationPort) != (RBACDestinationPort{Port: 80}) {
		t.Errorf("not_rule = %#v", perms[1])
	}
	if ip, ok := perms[2].(*RBACDestinationIP); !ok || ip.Prefix != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("destination_ip = %#v, want 10.0.0.0/8", perms[2])
	}
	if md, ok := perms[3].(*RBACMetadata); !ok || !md.Invert {
		t.Errorf("metadata = %#v, want inverted", perms[3])
	}
	if sni, ok := perms[4].(*RBACRequestedServerName); !ok || !sni.Name.Match("sni") {
		t.Errorf("requested_server_name = %#v", perms[4])
	}
	if a, ok := princs[0].(*RBACAuthenticated); !ok || a.Name != nil {
		t.Errorf("authenticated = %#v, want no principal name", princs[0])
	}
	if a, ok := princs[1].(*RBACAuthenticated); !ok || a.Name == nil || !a.Name.Match("spiffe://td/x") {
		t.Errorf("authenticated with name = %#v", princs[1])
	}
	or, ok := princs[2].(*RBACOr)
	if !ok || len(or.Rules) != 3 {
		t.Fatalf("or_ids = %#v", princs[2])
	}
	want := []RBACMatcher{
		&RBACSourceIP{Prefix: netip.MustParsePrefix("192.168.0.0/16")},
		&RBACDirectRemoteIP{Prefix: netip.MustParsePrefix("::1/128")},
		&RBACRemoteIP{Prefix: netip.MustParsePrefix("1.2.3.4/32")},
	}
	for i, m := range or.Rules {
		if !reflect.DeepEqual(m, want[i]) {
			t.Errorf("or_ids[%d] = %#v, want %#v", i, m, want[i])
		}
	}
}
