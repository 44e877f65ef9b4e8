package authz

import (
	"crypto/x509"
	"net/netip"
	"strings"

	"github.com/goxds/xds/resources"
)

// Request is what RBAC rules see of one request, whatever carried it.
type Request struct {
	// Method is the request's method, what a rule on the :method header
	// sees; a gRPC server sets "POST", which every RPC is. Empty, the
	// request has no :method header.
	Method string
	// Path is the request's path without its query, what url_path rules
	// see; for gRPC "/service/method".
	Path string
	// Query is the request's query with its leading "?" ("" when the
	// target has none): a :path header matcher sees Path+Query, as
	// Envoy's :path holds the query too (its RBAC docs: use url_path to
	// match the path without it). gRPC has none.
	Query string
	// Headers are the request's headers (for gRPC its metadata), keys in
	// lower case, the authority under ":authority". A header's values
	// are matched joined with ",".
	Headers map[string][]string
	// HeaderValues, if not nil, is used instead of Headers: the values of
	// header name (lower case, the authority as ":authority"), so that an
	// adapter whose headers are keyed otherwise (net/http's canonical
	// keys) need not copy them into a map for every request.
	HeaderValues func(name string) []string
	// Local and Remote are the connection's addresses.
	Local, Remote netip.AddrPort
	// TLS is whether the connection is TLS; PeerCertificates are the
	// client's certificates (the leaf first), if it sent any.
	TLS              bool
	PeerCertificates []*x509.Certificate
	// Principal is the client's SPIFFE ID, for audit loggers; "" if none.
	Principal string
}

// Authorize reports whether rules let req through, and the policy that
// decided it ("" when none matched): a request that matches a policy is
// allowed if the rules' action is ALLOW and denied if it is DENY; one that
// matches none gets the opposite. The rules' audit loggers are called, as
// their condition says, before it returns. rules are used as decoded,
// nothing is built from them: the call costs the matching only. nil rules
// (an RBACConfig without rules) let every request through.
func Authorize(rules *resources.RBACRules, req *Request) (allowed bool, policy string) {
	if rules == nil {
		return true, ""
	}
	for i := range rules.Policies {
		p := &rules.Policies[i]
		if anyMatch(p.Permissions, req) && anyMatch(p.Principals, req) {
			policy = p.Name
			break
		}
	}
	allowed = (policy != "") != rules.Deny
	if len(rules.AuditLoggers) > 0 && audited(rules.AuditCondition, allowed) {
		e := resources.RBACAuditEvent{Path: req.Path, Principal: req.Principal, Policy: policy, Allowed: allowed}
		for _, l := range rules.AuditLoggers {
			l.Log(e)
		}
	}
	return allowed, policy
}

// audited says whether the condition logs a decision.
func audited(c resources.RBACAuditCondition, allowed bool) bool {
	switch c {
	case resources.RBACAuditOnDeny:
		return !allowed
	case resources.RBACAuditOnAllow:
		return allowed
	case resources.RBACAuditOnDenyAndAllow:
		return true
	}
	return false
}

// anyMatch reports whether one of ms matches r; none does of an empty list.
func anyMatch(ms []resources.RBACMatcher, r *Request) bool {
	for _, m := range ms {
		if match(m, r) {
			return true
		}
	}
	return false
}

// match reports whether one permission or principal matches r.
func match(m resources.RBACMatcher, r *Request) bool {
	switch m := m.(type) {
	case *resources.RBACAny:
		return true
	case *resources.RBACAnd:
		for _, x := range m.Rules {
			if !match(x, r) {
				return false
			}
		}
		return true
	case *resources.RBACOr:
		return anyMatch(m.Rules, r)
	case *resources.RBACNot:
		return m.Rule != nil && !match(m.Rule, r)
	case *resources.RBACHeader:
		return matchHeader(&m.Header, r)
	case *resources.RBACPath:
		return m.Path.Match(r.Path)
	case *resources.RBACDestinationIP:
		return inPrefix(m.Prefix, r.Local.Addr())
	case *resources.RBACDestinationPort:
		return m.Port == uint32(r.Local.Port())
	case *resources.RBACSourceIP:
		return inPrefix(m.Prefix, r.Remote.Addr())
	case *resources.RBACDirectRemoteIP:
		return inPrefix(m.Prefix, r.Remote.Addr())
	case *resources.RBACRemoteIP:
		return inPrefix(m.Prefix, r.Remote.Addr())
	case *resources.RBACAuthenticated:
		return matchAuthenticated(m.Name, r)
	case *resources.RBACMetadata:
		// A request has no metadata (gRPC's has none to match): only an
		// inverted matcher matches.
		return m.Invert
	case *resources.RBACRequestedServerName:
		// The server name is not seen; it matches as if empty, as in
		// gRPC.
		return m.Name.Match("")
	}
	// nil, or a kind this code does not know: resources never decodes one.
	return false
}

func matchHeader(h *resources.HeaderMatcher, r *Request) bool {
	var vs []string
	switch h.Name() {
	case ":method":
		if r.Method != "" {
			return h.Match(r.Method, true)
		}
	case ":path":
		if r.Query != "" {
			return h.Match(r.Path+r.Query, true)
		}
		return h.Match(r.Path, true)
	default:
		if r.HeaderValues != nil {
			vs = r.HeaderValues(h.Name())
		} else {
			vs = r.Headers[h.Name()]
		}
	}
	return h.Match(strings.Join(vs, ","), len(vs) > 0)
}

func inPrefix(p netip.Prefix, a netip.Addr) bool {
	return a.IsValid() && p.Contains(a.Unmap())
}

// matchAuthenticated follows gRPC: the URI SANs of the leaf certificate if
// it has any, else its DNS SANs, else its subject; a TLS client without a
// certificate has the name "".
func matchAuthenticated(name *resources.StringMatcher, r *Request) bool {
	if !r.TLS {
		return false
	}
	if name == nil {
		return true
	}
	if len(r.PeerCertificates) == 0 {
		return name.Match("")
	}
	c := r.PeerCertificates[0]
	if len(c.URIs) > 0 {
		for _, u := range c.URIs {
			if name.Match(u.String()) {
				return true
			}
		}
		return false
	}
	if len(c.DNSNames) > 0 {
		for _, d := range c.DNSNames {
			if name.Match(d) {
				return true
			}
		}
		return false
	}
	return name.Match(c.Subject.String())
}
