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
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
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

// RBACRules is a validated envoy.config.rbac.v3.RBAC: a request that
// matches one of its policies is allowed (action ALLOW) or denied (DENY);
// one that matches none gets the opposite. It is plain data, decided once
// when the resource is decoded: evaluating it needs no further checks.
type RBACRules struct {
	// Deny is true for the DENY action, false for ALLOW.
	Deny bool
	// Policies are sorted by name, so that the policy reported as
	// matched is always the same one.
	Policies []RBACPolicy
	// AuditCondition says which decisions go to AuditLoggers.
	AuditCondition RBACAuditCondition
	// AuditLoggers are the audit loggers built for the rules (gRFC A59);
	// an optional logger that is not registered is left out.
	AuditLoggers []*RBACAuditLogger
}

// RBACPolicy is one named policy: a request matches it when it matches one
// of its permissions and one of its principals.
type RBACPolicy struct {
	// Name is the policy's key in the rules.
	Name string
	// Permissions and Principals are the policy's lists; an empty list
	// matches nothing.
	Permissions, Principals []RBACMatcher
}

// RBACMatchKind says what an RBACMatcher checks.
type RBACMatchKind uint8

// The kinds of permission and principal, by the proto field they come
// from. A permission's destination_ip and destination_port, and a
// principal's source_ip, direct_remote_ip and remote_ip, look at the
// connection's addresses; gRPC has no metadata and sees no server name.
const (
	// RBACAny matches every request (any).
	RBACAny RBACMatchKind = iota
	// RBACAnd matches when all of Rules do (and_rules, and_ids).
	RBACAnd
	// RBACOr matches when one of Rules does (or_rules, or_ids).
	RBACOr
	// RBACNot matches when Rules[0] does not (not_rule, not_id).
	RBACNot
	// RBACHeader matches a request header by Header (header).
	RBACHeader
	// RBACPath matches the request's path by String (url_path).
	RBACPath
	// RBACDestinationIP matches the local address against Prefix.
	RBACDestinationIP
	// RBACDestinationPort matches the local port against Port.
	RBACDestinationPort
	// RBACSourceIP, RBACDirectRemoteIP and RBACRemoteIP match the peer's
	// address against Prefix (xff_num_trusted_hops is 0, so all three
	// see the peer).
	RBACSourceIP
	RBACDirectRemoteIP
	RBACRemoteIP
	// RBACAuthenticated matches a TLS client, by its certificate's name
	// against String when HasPrincipalName (authenticated).
	RBACAuthenticated
	// RBACMetadata is a metadata matcher, Invert its invert field.
	RBACMetadata
	// RBACRequestedServerName matches the TLS server name by String.
	RBACRequestedServerName
)

// RBACMatcher is one validated permission or principal. Only the fields
// its Kind names are set.
type RBACMatcher struct {
	// Kind says what is matched.
	Kind RBACMatchKind
	// HasPrincipalName is set for an RBACAuthenticated with a
	// principal_name; without one any TLS client matches.
	HasPrincipalName bool
	// Invert is an RBACMetadata's invert field.
	Invert bool
	// Port is an RBACDestinationPort's port.
	Port uint32
	// Rules are the operands of RBACAnd and RBACOr, and the one matcher
	// an RBACNot negates.
	Rules []RBACMatcher
	// Header is an RBACHeader's matcher, its name in lower case ("host"
	// becomes ":authority").
	Header HeaderMatcher
	// String is the matcher of RBACPath, RBACAuthenticated and
	// RBACRequestedServerName.
	String StringMatcher
	// Prefix is the range of the address kinds, an IPv4-mapped address
	// as IPv4.
	Prefix netip.Prefix
}

// RBACAuditCondition is when audit loggers are called (gRFC A59).
type RBACAuditCondition uint8

// The audit conditions of RBAC.AuditLoggingOptions.
const (
	// RBACAuditNone logs nothing.
	RBACAuditNone RBACAuditCondition = iota
	// RBACAuditOnDeny logs denied requests.
	RBACAuditOnDeny
	// RBACAuditOnAllow logs allowed requests.
	RBACAuditOnAllow
	// RBACAuditOnDenyAndAllow logs every request.
	RBACAuditOnDenyAndAllow
)

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
		return RBACMatcher{}, fieldErrorf("header.name", "%q: %w", p.GetName(), errHeaderName)
	case name == "host":
		name = ":authority"
	}
	if name != p.GetName() {
		p = proto.Clone(p).(*routev3.HeaderMatcher)
		p.Name = name
	}
	h, err := newHeaderMatcher(p)
	if err != nil {
		return RBACMatcher{}, atIf("header", err)
	}
	return RBACMatcher{Kind: RBACHeader, Header: h}, nil
}

func rbacIP(kind RBACMatchKind, c *corev3.CidrRange) (RBACMatcher, error) {
	a, err := netip.ParseAddr(c.GetAddressPrefix())
	if err != nil {
		return RBACMatcher{}, fmt.Errorf("invalid address %q", c.GetAddressPrefix())
	}
	p, err := a.Unmap().Prefix(int(c.GetPrefixLen().GetValue()))
	if err != nil {
		return RBACMatcher{}, fmt.Errorf("invalid prefix %s/%d: %v", c.GetAddressPrefix(), c.GetPrefixLen().GetValue(), err)
	}
	return RBACMatcher{Kind: kind, Prefix: p}, nil
}

// rbacString is a matcher of kind that checks a string by p.
func rbacString(kind RBACMatchKind, p *matcherv3.StringMatcher) (RBACMatcher, error) {
	s, err := newStringMatcher(p)
	return RBACMatcher{Kind: kind, String: s}, err
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
		return RBACMatcher{Kind: RBACAnd, Rules: ms}, atIf("and_rules.rules", err)
	case *rbacv3.Permission_OrRules:
		ms, err := permissionMatchers(r.OrRules.GetRules())
		return RBACMatcher{Kind: RBACOr, Rules: ms}, atIf("or_rules.rules", err)
	case *rbacv3.Permission_NotRule:
		m, err := permissionMatcher(r.NotRule)
		return RBACMatcher{Kind: RBACNot, Rules: []RBACMatcher{m}}, atIf("not_rule", err)
	case *rbacv3.Permission_Any:
		return RBACMatcher{Kind: RBACAny}, nil
	case *rbacv3.Permission_Header:
		return rbacHeader(r.Header)
	case *rbacv3.Permission_UrlPath:
		m, err := rbacString(RBACPath, r.UrlPath.GetPath())
		return m, atIf("url_path.path", err)
	case *rbacv3.Permission_DestinationIp:
		m, err := rbacIP(RBACDestinationIP, r.DestinationIp)
		return m, atIf("destination_ip", err)
	case *rbacv3.Permission_DestinationPort:
		return RBACMatcher{Kind: RBACDestinationPort, Port: r.DestinationPort}, nil
	case *rbacv3.Permission_Metadata:
		return RBACMatcher{Kind: RBACMetadata, Invert: r.Metadata.GetInvert()}, nil
	case *rbacv3.Permission_RequestedServerName:
		m, err := rbacString(RBACRequestedServerName, r.RequestedServerName)
		return m, atIf("requested_server_name", err)
	default:
		return RBACMatcher{}, fmt.Errorf("unsupported permission rule %T", r)
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
		return RBACMatcher{Kind: RBACAnd, Rules: ms}, atIf("and_ids.ids", err)
	case *rbacv3.Principal_OrIds:
		ms, err := principalMatchers(id.OrIds.GetIds())
		return RBACMatcher{Kind: RBACOr, Rules: ms}, atIf("or_ids.ids", err)
	case *rbacv3.Principal_NotId:
		m, err := principalMatcher(id.NotId)
		return RBACMatcher{Kind: RBACNot, Rules: []RBACMatcher{m}}, atIf("not_id", err)
	case *rbacv3.Principal_Any:
		return RBACMatcher{Kind: RBACAny}, nil
	case *rbacv3.Principal_Authenticated_:
		if id.Authenticated.GetPrincipalName() == nil {
			return RBACMatcher{Kind: RBACAuthenticated}, nil
		}
		m, err := rbacString(RBACAuthenticated, id.Authenticated.GetPrincipalName())
		m.HasPrincipalName = true
		return m, atIf("authenticated.principal_name", err)
	case *rbacv3.Principal_SourceIp:
		m, err := rbacIP(RBACSourceIP, id.SourceIp)
		return m, atIf("source_ip", err)
	case *rbacv3.Principal_DirectRemoteIp:
		m, err := rbacIP(RBACDirectRemoteIP, id.DirectRemoteIp)
		return m, atIf("direct_remote_ip", err)
	case *rbacv3.Principal_RemoteIp:
		m, err := rbacIP(RBACRemoteIP, id.RemoteIp)
		return m, atIf("remote_ip", err)
	case *rbacv3.Principal_Header:
		return rbacHeader(id.Header)
	case *rbacv3.Principal_UrlPath:
		m, err := rbacString(RBACPath, id.UrlPath.GetPath())
		return m, atIf("url_path.path", err)
	case *rbacv3.Principal_Metadata:
		return RBACMatcher{Kind: RBACMetadata, Invert: id.Metadata.GetInvert()}, nil
	default:
		return RBACMatcher{}, fmt.Errorf("unsupported principal identifier %T", id)
	}
}
