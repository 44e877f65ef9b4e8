package resources

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Config messages of the RBAC filter (gRFC A41) and its audit loggers.
const (
	rbacName         = "envoy.extensions.filters.http.rbac.v3.RBAC"
	rbacPerRouteName = "envoy.extensions.filters.http.rbac.v3.RBACPerRoute"
	stdoutAuditName  = "envoy.extensions.rbac.audit_loggers.stream.v3.StdoutAuditLog"
)

// rbacFilterType is the RBAC filter: it runs on servers only, and an
// override (RBACPerRoute) replaces the top-level config whole.
var rbacFilterType = HTTPFilterType{
	Name:     "rbac",
	TypeURLs: []string{"type.googleapis.com/" + rbacName, "type.googleapis.com/" + rbacPerRouteName},
	ParseConfig: func(a *anypb.Any) (HTTPFilterConfig, error) {
		if !anyIs(a, rbacName) {
			return nil, fmt.Errorf("holds %s, want %s", anyName(a), rbacName)
		}
		m := new(rbacfilterv3.RBAC)
		if err := proto.Unmarshal(a.GetValue(), m); err != nil {
			return nil, fmt.Errorf("unmarshal RBAC: %v", err)
		}
		return newRBACConfig(m)
	},
	ParseOverride: func(a *anypb.Any) (HTTPFilterConfig, error) {
		if !anyIs(a, rbacPerRouteName) {
			return nil, fmt.Errorf("holds %s, want %s", anyName(a), rbacPerRouteName)
		}
		m := new(rbacfilterv3.RBACPerRoute)
		if err := proto.Unmarshal(a.GetValue(), m); err != nil {
			return nil, fmt.Errorf("unmarshal RBACPerRoute: %v", err)
		}
		// No rbac in the override: the route has no rules, so every RPC
		// passes, as in gRPC.
		return newRBACConfig(m.GetRbac())
	},
	ServerSide: true,
}

func init() {
	if err := RegisterHTTPFilter(rbacFilterType); err != nil {
		panic(err)
	}
}

// RBACConfig is the parsed configuration of the RBAC filter or of its
// per-route override (gRFC A41).
type RBACConfig struct {
	// Rules are the validated rules; nil when the filter lets every
	// request through (no rules, or the LOG action, which gRPC does not
	// enforce). Package dataplane/authz evaluates them.
	Rules *RBACRules
}

// newRBACConfig validates rules as gRPC does (gRFC A41): header matchers
// may not name :scheme or grpc-* headers (host means :authority); policies
// may not have conditions; every permission and principal must be of a
// kind gRPC supports. No rules, or the LOG action, make a filter that lets
// everything through.
func newRBACConfig(m *rbacfilterv3.RBAC) (*RBACConfig, error) {
	rules := m.GetRules()
	names := make([]string, 0, len(rules.GetPolicies()))
	for name := range rules.GetPolicies() {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := rules.GetPolicies()[name]
		if p.GetCondition() != nil {
			return nil, fieldErrorf("rules.policies["+name+"].condition", "not supported")
		}
		if p.GetCheckedCondition() != nil {
			return nil, fieldErrorf("rules.policies["+name+"].checked_condition", "not supported")
		}
	}
	if rules == nil || rules.GetAction() == rbacv3.RBAC_LOG {
		// gRPC checks the header names even here; the decode below does.
		if _, err := decodePolicies(rules, names); err != nil {
			if errors.Is(err, errHeaderName) {
				return nil, err
			}
		}
		return &RBACConfig{}, nil
	}
	r := &RBACRules{}
	switch rules.GetAction() {
	case rbacv3.RBAC_ALLOW:
	case rbacv3.RBAC_DENY:
		r.Deny = true
	default:
		return nil, fieldErrorf("rules.action", "unsupported value %v", rules.GetAction())
	}
	ps, err := decodePolicies(rules, names)
	if err != nil {
		return nil, err
	}
	r.Policies = ps
	if err := r.setAudit(rules.GetAuditLoggingOptions()); err != nil {
		return nil, atIf("rules.audit_logging_options", err)
	}
	return &RBACConfig{Rules: r}, nil
}

func decodePolicies(rules *rbacv3.RBAC, names []string) ([]RBACPolicy, error) {
	out := make([]RBACPolicy, 0, len(names))
	for _, name := range names {
		p := rules.GetPolicies()[name]
		path := "rules.policies[" + name + "]"
		perms, err := permissionMatchers(p.GetPermissions())
		if err != nil {
			return nil, at(path+".permissions", err)
		}
		princs, err := principalMatchers(p.GetPrincipals())
		if err != nil {
			return nil, at(path+".principals", err)
		}
		out = append(out, RBACPolicy{Name: name, Permissions: perms, Principals: princs})
	}
	return out, nil
}

// atIf is at for an error that may be nil.
func atIf(field string, err error) error {
	if err == nil {
		return nil
	}
	return at(field, err)
}

// errHeaderName marks a header matcher on a header gRPC's RBAC refuses.
var errHeaderName = errors.New("header not allowed in an RBAC rule")

func rbacHeader(p *routev3.HeaderMatcher) (RBACMatcher, error) {
	name := strings.ToLower(p.GetName())
	switch {
	case name == ":scheme", strings.HasPrefix(name, "grpc-"):
		return nil, fieldErrorf("header.name", "%q: %w", p.GetName(), errHeaderName)
	case name == "host":
		name = ":authority"
	}
	if name != p.GetName() {
		p = proto.Clone(p).(*routev3.HeaderMatcher)
		p.Name = name
	}
	h, err := newHeaderMatcher(p)
	if err != nil {
		return nil, atIf("header", err)
	}
	return &RBACHeader{Header: h}, nil
}

// rbacPrefix parses a CidrRange of an RBAC rule; an IPv4-mapped address
// counts as IPv4.
func rbacPrefix(c *corev3.CidrRange) (netip.Prefix, error) {
	a, err := netip.ParseAddr(c.GetAddressPrefix())
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid address %q", c.GetAddressPrefix())
	}
	p, err := a.Unmap().Prefix(int(c.GetPrefixLen().GetValue()))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid prefix %s/%d: %v", c.GetAddressPrefix(), c.GetPrefixLen().GetValue(), err)
	}
	return p, nil
}

func permissionMatchers(in []*rbacv3.Permission) ([]RBACMatcher, error) {
	out := make([]RBACMatcher, 0, len(in))
	for i, p := range in {
		m, err := permissionMatcher(p)
		if err != nil {
			return nil, at(index("", i), err)
		}
		out = append(out, m)
	}
	return out, nil
}

func permissionMatcher(p *rbacv3.Permission) (RBACMatcher, error) {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_AndRules:
		ms, err := permissionMatchers(r.AndRules.GetRules())
		return &RBACAnd{Rules: ms}, atIf("and_rules.rules", err)
	case *rbacv3.Permission_OrRules:
		ms, err := permissionMatchers(r.OrRules.GetRules())
		return &RBACOr{Rules: ms}, atIf("or_rules.rules", err)
	case *rbacv3.Permission_NotRule:
		m, err := permissionMatcher(r.NotRule)
		return &RBACNot{Rule: m}, atIf("not_rule", err)
	case *rbacv3.Permission_Any:
		return &RBACAny{}, nil
	case *rbacv3.Permission_Header:
		return rbacHeader(r.Header)
	case *rbacv3.Permission_UrlPath:
		s, err := newStringMatcher(r.UrlPath.GetPath())
		return &RBACPath{Path: s}, atIf("url_path.path", err)
	case *rbacv3.Permission_DestinationIp:
		p, err := rbacPrefix(r.DestinationIp)
		return &RBACDestinationIP{Prefix: p}, atIf("destination_ip", err)
	case *rbacv3.Permission_DestinationPort:
		return &RBACDestinationPort{Port: r.DestinationPort}, nil
	case *rbacv3.Permission_Metadata:
		return &RBACMetadata{Invert: r.Metadata.GetInvert()}, nil
	case *rbacv3.Permission_RequestedServerName:
		s, err := newStringMatcher(r.RequestedServerName)
		return &RBACRequestedServerName{Name: s}, atIf("requested_server_name", err)
	default:
		return nil, fmt.Errorf("unsupported permission rule %T", r)
	}
}

func principalMatchers(in []*rbacv3.Principal) ([]RBACMatcher, error) {
	out := make([]RBACMatcher, 0, len(in))
	for i, p := range in {
		m, err := principalMatcher(p)
		if err != nil {
			return nil, at(index("", i), err)
		}
		out = append(out, m)
	}
	return out, nil
}

func principalMatcher(p *rbacv3.Principal) (RBACMatcher, error) {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_AndIds:
		ms, err := principalMatchers(id.AndIds.GetIds())
		return &RBACAnd{Rules: ms}, atIf("and_ids.ids", err)
	case *rbacv3.Principal_OrIds:
		ms, err := principalMatchers(id.OrIds.GetIds())
		return &RBACOr{Rules: ms}, atIf("or_ids.ids", err)
	case *rbacv3.Principal_NotId:
		m, err := principalMatcher(id.NotId)
		return &RBACNot{Rule: m}, atIf("not_id", err)
	case *rbacv3.Principal_Any:
		return &RBACAny{}, nil
	case *rbacv3.Principal_Authenticated_:
		if id.Authenticated.GetPrincipalName() == nil {
			return &RBACAuthenticated{}, nil
		}
		s, err := newStringMatcher(id.Authenticated.GetPrincipalName())
		return &RBACAuthenticated{Name: &s}, atIf("authenticated.principal_name", err)
	case *rbacv3.Principal_SourceIp:
		p, err := rbacPrefix(id.SourceIp)
		return &RBACSourceIP{Prefix: p}, atIf("source_ip", err)
	case *rbacv3.Principal_DirectRemoteIp:
		p, err := rbacPrefix(id.DirectRemoteIp)
		return &RBACDirectRemoteIP{Prefix: p}, atIf("direct_remote_ip", err)
	case *rbacv3.Principal_RemoteIp:
		p, err := rbacPrefix(id.RemoteIp)
		return &RBACRemoteIP{Prefix: p}, atIf("remote_ip", err)
	case *rbacv3.Principal_Header:
		return rbacHeader(id.Header)
	case *rbacv3.Principal_UrlPath:
		s, err := newStringMatcher(id.UrlPath.GetPath())
		return &RBACPath{Path: s}, atIf("url_path.path", err)
	case *rbacv3.Principal_Metadata:
		return &RBACMetadata{Invert: id.Metadata.GetInvert()}, nil
	default:
		return nil, fmt.Errorf("unsupported principal identifier %T", id)
	}
}
