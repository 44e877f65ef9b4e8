package resources

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/rbac/audit_loggers/stream/v3"
	"google.golang.org/grpc/authz/audit"
	"google.golang.org/grpc/authz/audit/stdout"
	"google.golang.org/protobuf/encoding/protojson"
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
	// Engine decides each RPC; nil when the filter lets every RPC through
	// (no rules, or the LOG action, which gRPC does not enforce).
	Engine *RBACEngine
}

// RBACEngine is a compiled set of RBAC rules: an RPC that matches a
// policy is allowed (action ALLOW) or denied (DENY); one that matches none
// gets the opposite.
type RBACEngine struct {
	// Deny is true for the DENY action, false for ALLOW.
	Deny bool
	// policies are sorted by name, so that the policy reported as matched
	// is always the same one.
	policies []rbacPolicy
	// auditOn says when the loggers are called.
	auditOn rbacv3.RBAC_AuditLoggingOptions_AuditCondition
	loggers []audit.Logger
}

// RBACRequest is what the RBAC rules see of an RPC.
type RBACRequest struct {
	// FullMethod is the RPC's path, "/service/method".
	FullMethod string
	// Headers are the request's metadata, keys in lower case; the engine
	// adds :method and :path.
	Headers map[string][]string
	// Local and Remote are the connection's addresses.
	Local, Remote netip.AddrPort
	// TLS is whether the connection is TLS; PeerCertificates are the
	// client's certificates (the leaf first), if it sent any.
	TLS              bool
	PeerCertificates []*x509.Certificate
	// Principal is the client's SPIFFE ID, for audit loggers; "" if none.
	Principal string
}

// Authorize reports whether the rules let req through, and the policy
// that decided it ("" when none matched). The audit loggers are called,
// as their condition says, before it returns.
func (e *RBACEngine) Authorize(req *RBACRequest) (allowed bool, policy string) {
	for _, p := range e.policies {
		if p.permissions.match(req) && p.principals.match(req) {
			policy = p.name
			break
		}
	}
	allowed = (policy != "") != e.Deny
	var log bool
	switch e.auditOn {
	case rbacv3.RBAC_AuditLoggingOptions_ON_DENY:
		log = !allowed
	case rbacv3.RBAC_AuditLoggingOptions_ON_ALLOW:
		log = allowed
	case rbacv3.RBAC_AuditLoggingOptions_ON_DENY_AND_ALLOW:
		log = true
	}
	if log && len(e.loggers) > 0 {
		ev := &audit.Event{FullMethodName: req.FullMethod, Principal: req.Principal, MatchedRule: policy, Authorized: allowed}
		for _, l := range e.loggers {
			l.Log(ev)
		}
	}
	return allowed, policy
}

type rbacPolicy struct {
	name                    string
	permissions, principals rbacMatcher
}

// newRBACConfig compiles rules as gRPC does (gRFC A41): header matchers
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
		// gRPC checks the header names even here; the compile below does.
		if _, err := compilePolicies(rules, names); err != nil {
			if errors.Is(err, errHeaderName) {
				return nil, err
			}
		}
		return &RBACConfig{}, nil
	}
	e := &RBACEngine{}
	switch rules.GetAction() {
	case rbacv3.RBAC_ALLOW:
	case rbacv3.RBAC_DENY:
		e.Deny = true
	default:
		return nil, fieldErrorf("rules.action", "unsupported value %v", rules.GetAction())
	}
	ps, err := compilePolicies(rules, names)
	if err != nil {
		return nil, err
	}
	e.policies = ps
	if err := e.setAudit(rules.GetAuditLoggingOptions()); err != nil {
		return nil, atIf("rules.audit_logging_options", err)
	}
	return &RBACConfig{Engine: e}, nil
}

func compilePolicies(rules *rbacv3.RBAC, names []string) ([]rbacPolicy, error) {
	out := make([]rbacPolicy, 0, len(names))
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
		out = append(out, rbacPolicy{name: name, permissions: anyOf(perms), principals: anyOf(princs)})
	}
	return out, nil
}

// setAudit builds the audit loggers through grpc-go's public registry
// (google.golang.org/grpc/authz/audit), so that loggers registered for
// grpc-go's servers work here too; the stdout logger is always there.
func (e *RBACEngine) setAudit(o *rbacv3.RBAC_AuditLoggingOptions) error {
	if o == nil {
		return nil
	}
	e.auditOn = o.GetAuditCondition()
	for i, lc := range o.GetLoggerConfigs() {
		path := index("logger_configs", i) + ".audit_logger.typed_config"
		tc := lc.GetAuditLogger().GetTypedConfig()
		if tc == nil {
			return fieldErrorf(path, "missing")
		}
		name, cfg, err := auditLoggerConfig(tc)
		if err != nil {
			return at(path, err)
		}
		b := audit.GetLoggerBuilder(name)
		if b == nil {
			if lc.GetIsOptional() {
				continue
			}
			return fieldErrorf(path, "no audit logger registered for %q", name)
		}
		c, err := b.ParseLoggerConfig(cfg)
		if err != nil {
			return fieldErrorf(path, "audit logger %q: %v", name, err)
		}
		e.loggers = append(e.loggers, b.Build(c))
	}
	return nil
}

// auditLoggerConfig returns the registry name and JSON config of an audit
// logger's typed_config: a TypedStruct names a custom logger by its type
// URL's last segment; StdoutAuditLog is the stdout logger.
func auditLoggerConfig(a *anypb.Any) (string, json.RawMessage, error) {
	var (
		typeURL string
		body    proto.Message
	)
	switch {
	case anyIs(a, typedStructName):
		ts := new(xdstypev3.TypedStruct)
		if err := proto.Unmarshal(a.GetValue(), ts); err != nil {
			return "", nil, fmt.Errorf("unmarshal TypedStruct: %v", err)
		}
		typeURL, body = ts.GetTypeUrl(), ts.GetValue()
	case anyIs(a, udpaStructName):
		ts := new(udpatypev1.TypedStruct)
		if err := proto.Unmarshal(a.GetValue(), ts); err != nil {
			return "", nil, fmt.Errorf("unmarshal TypedStruct: %v", err)
		}
		typeURL, body = ts.GetTypeUrl(), ts.GetValue()
	case anyIs(a, stdoutAuditName):
		m := new(streamv3.StdoutAuditLog)
		if err := proto.Unmarshal(a.GetValue(), m); err != nil {
			return "", nil, fmt.Errorf("unmarshal StdoutAuditLog: %v", err)
		}
		j, err := protojson.Marshal(m)
		return stdout.Name, j, err
	default:
		return "", nil, fmt.Errorf("unsupported audit logger config %s", anyName(a))
	}
	name := messageName(typeURL)
	if name == "" {
		return "", nil, errors.New("TypedStruct has no type_url")
	}
	cfg := []byte("{}")
	if body != nil && proto.Size(body) > 0 {
		j, err := protojson.Marshal(body)
		if err != nil {
			return "", nil, err
		}
		cfg = j
	}
	return name, cfg, nil
}

// rbacMatcher is one compiled permission or principal.
type rbacMatcher interface {
	match(*RBACRequest) bool
}

type (
	matchAll   []rbacMatcher // and_rules, and_ids
	matchOne   []rbacMatcher // or_rules, or_ids, and a policy's lists
	matchNot   struct{ m rbacMatcher }
	matchConst bool
	// matchHeader checks a request header.
	matchHeader struct{ h HeaderMatcher }
	// matchPath checks the RPC's path.
	matchPath struct{ s StringMatcher }
	// matchIP checks the local (destination) or remote address.
	matchIP struct {
		p     netip.Prefix
		local bool
	}
	matchPort uint32
	// matchAuthenticated checks the client's certificate; nil s: any
	// TLS client.
	matchAuthenticated struct{ s *StringMatcher }
)

func anyOf(ms []rbacMatcher) rbacMatcher { return matchOne(ms) }

func (m matchAll) match(r *RBACRequest) bool {
	for _, x := range m {
		if !x.match(r) {
			return false
		}
	}
	return true
}

func (m matchOne) match(r *RBACRequest) bool {
	for _, x := range m {
		if x.match(r) {
			return true
		}
	}
	return false
}

func (m matchNot) match(r *RBACRequest) bool  { return !m.m.match(r) }
func (m matchConst) match(*RBACRequest) bool  { return bool(m) }
func (m matchPath) match(r *RBACRequest) bool { return m.s.Match(r.FullMethod) }
func (m matchPort) match(r *RBACRequest) bool { return uint32(m) == uint32(r.Local.Port()) }
func (m matchHeader) match(r *RBACRequest) bool {
	var vs []string
	switch m.h.Name() {
	case ":method":
		vs = []string{"POST"}
	case ":path":
		vs = []string{r.FullMethod}
	default:
		vs = r.Headers[m.h.Name()]
	}
	return m.h.Match(strings.Join(vs, ","), len(vs) > 0)
}

func (m matchIP) match(r *RBACRequest) bool {
	a := r.Remote.Addr()
	if m.local {
		a = r.Local.Addr()
	}
	return a.IsValid() && m.p.Contains(a.Unmap())
}

// match follows gRPC: the URI SANs of the leaf certificate if it has any,
// else its DNS SANs, else its subject; a TLS client without a certificate
// has the name "".
func (m matchAuthenticated) match(r *RBACRequest) bool {
	if !r.TLS {
		return false
	}
	if m.s == nil {
		return true
	}
	if len(r.PeerCertificates) == 0 {
		return m.s.Match("")
	}
	c := r.PeerCertificates[0]
	if len(c.URIs) > 0 {
		for _, u := range c.URIs {
			if m.s.Match(u.String()) {
				return true
			}
		}
		return false
	}
	if len(c.DNSNames) > 0 {
		for _, d := range c.DNSNames {
			if m.s.Match(d) {
				return true
			}
		}
		return false
	}
	return m.s.Match(c.Subject.String())
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

func rbacHeader(p *routev3.HeaderMatcher) (rbacMatcher, error) {
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
	return matchHeader{h}, nil
}

func rbacIP(c *corev3.CidrRange, local bool) (rbacMatcher, error) {
	a, err := netip.ParseAddr(c.GetAddressPrefix())
	if err != nil {
		return nil, fmt.Errorf("invalid address %q", c.GetAddressPrefix())
	}
	p, err := a.Unmap().Prefix(int(c.GetPrefixLen().GetValue()))
	if err != nil {
		return nil, fmt.Errorf("invalid prefix %s/%d: %v", c.GetAddressPrefix(), c.GetPrefixLen().GetValue(), err)
	}
	return matchIP{p: p, local: local}, nil
}

func permissionMatchers(in []*rbacv3.Permission) ([]rbacMatcher, error) {
	out := make([]rbacMatcher, 0, len(in))
	for i, p := range in {
		m, err := permissionMatcher(p)
		if err != nil {
			return nil, at(index("", i), err)
		}
		out = append(out, m)
	}
	return out, nil
}

func permissionMatcher(p *rbacv3.Permission) (rbacMatcher, error) {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_AndRules:
		ms, err := permissionMatchers(r.AndRules.GetRules())
		return matchAll(ms), atIf("and_rules.rules", err)
	case *rbacv3.Permission_OrRules:
		ms, err := permissionMatchers(r.OrRules.GetRules())
		return matchOne(ms), atIf("or_rules.rules", err)
	case *rbacv3.Permission_NotRule:
		m, err := permissionMatcher(r.NotRule)
		return matchNot{m}, atIf("not_rule", err)
	case *rbacv3.Permission_Any:
		return matchConst(true), nil
	case *rbacv3.Permission_Header:
		return rbacHeader(r.Header)
	case *rbacv3.Permission_UrlPath:
		s, err := newStringMatcher(r.UrlPath.GetPath())
		return matchPath{s}, atIf("url_path.path", err)
	case *rbacv3.Permission_DestinationIp:
		m, err := rbacIP(r.DestinationIp, true)
		return m, atIf("destination_ip", err)
	case *rbacv3.Permission_DestinationPort:
		return matchPort(r.DestinationPort), nil
	case *rbacv3.Permission_Metadata:
		// gRPC has no metadata to match: only an inverted matcher matches.
		return matchConst(r.Metadata.GetInvert()), nil
	case *rbacv3.Permission_RequestedServerName:
		// gRPC does not see the SNI; it matches as if it were empty.
		s, err := newStringMatcher(r.RequestedServerName)
		if err != nil {
			return nil, atIf("requested_server_name", err)
		}
		return matchConst(s.Match("")), nil
	default:
		return nil, fmt.Errorf("unsupported permission rule %T", r)
	}
}

func principalMatchers(in []*rbacv3.Principal) ([]rbacMatcher, error) {
	out := make([]rbacMatcher, 0, len(in))
	for i, p := range in {
		m, err := principalMatcher(p)
		if err != nil {
			return nil, at(index("", i), err)
		}
		out = append(out, m)
	}
	return out, nil
}

func principalMatcher(p *rbacv3.Principal) (rbacMatcher, error) {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_AndIds:
		ms, err := principalMatchers(id.AndIds.GetIds())
		return matchAll(ms), atIf("and_ids.ids", err)
	case *rbacv3.Principal_OrIds:
		ms, err := principalMatchers(id.OrIds.GetIds())
		return matchOne(ms), atIf("or_ids.ids", err)
	case *rbacv3.Principal_NotId:
		m, err := principalMatcher(id.NotId)
		return matchNot{m}, atIf("not_id", err)
	case *rbacv3.Principal_Any:
		return matchConst(true), nil
	case *rbacv3.Principal_Authenticated_:
		if id.Authenticated.GetPrincipalName() == nil {
			return matchAuthenticated{}, nil
		}
		s, err := newStringMatcher(id.Authenticated.GetPrincipalName())
		if err != nil {
			return nil, atIf("authenticated.principal_name", err)
		}
		return matchAuthenticated{&s}, nil
	case *rbacv3.Principal_SourceIp:
		m, err := rbacIP(id.SourceIp, false)
		return m, atIf("source_ip", err)
	case *rbacv3.Principal_DirectRemoteIp:
		m, err := rbacIP(id.DirectRemoteIp, false)
		return m, atIf("direct_remote_ip", err)
	case *rbacv3.Principal_RemoteIp:
		// With xff_num_trusted_hops 0 (the Listener makes sure), the
		// remote address is the peer's.
		m, err := rbacIP(id.RemoteIp, false)
		return m, atIf("remote_ip", err)
	case *rbacv3.Principal_Header:
		return rbacHeader(id.Header)
	case *rbacv3.Principal_UrlPath:
		s, err := newStringMatcher(id.UrlPath.GetPath())
		return matchPath{s}, atIf("url_path.path", err)
	case *rbacv3.Principal_Metadata:
		return matchConst(id.Metadata.GetInvert()), nil
	default:
		return nil, fmt.Errorf("unsupported principal identifier %T", id)
	}
}
