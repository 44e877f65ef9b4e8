package resources

import "net/netip"

// RBACRules is a validated envoy.config.rbac.v3.RBAC: a request that
// matches one of its policies is allowed (action ALLOW) or denied (DENY);
// one that matches none gets the opposite. It is plain data, decided once
// when the resource is decoded, with its string and header matchers
// compiled: evaluating it (package dataplane/authz does) needs no further
// checks. Like every decoded value it is shared and must not be modified.
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

// RBACMatcher is one validated permission or principal: a pointer to one
// of the RBAC matcher types of this package ([RBACAny], [RBACAnd],
// [RBACOr], [RBACNot], [RBACHeader], [RBACPath], [RBACDestinationIP],
// [RBACDestinationPort], [RBACSourceIP], [RBACDirectRemoteIP],
// [RBACRemoteIP], [RBACAuthenticated], [RBACMetadata],
// [RBACRequestedServerName]), each named for the proto field it comes
// from. It is an interface so that each kind costs only what it holds.
type RBACMatcher interface {
	isRBACMatcher()
}

type (
	// RBACAny matches every request (any).
	RBACAny struct{}
	// RBACAnd matches when all of Rules do (and_rules, and_ids).
	RBACAnd struct{ Rules []RBACMatcher }
	// RBACOr matches when one of Rules does (or_rules, or_ids).
	RBACOr struct{ Rules []RBACMatcher }
	// RBACNot matches when Rule does not (not_rule, not_id).
	RBACNot struct{ Rule RBACMatcher }
	// RBACHeader matches a request header (header). Header's name is in
	// lower case, and "host" is ":authority".
	RBACHeader struct{ Header HeaderMatcher }
	// RBACPath matches the request's path (url_path).
	RBACPath struct{ Path StringMatcher }
	// RBACDestinationIP matches the connection's local address
	// (destination_ip).
	RBACDestinationIP struct{ Prefix netip.Prefix }
	// RBACDestinationPort matches the connection's local port
	// (destination_port).
	RBACDestinationPort struct{ Port uint32 }
	// RBACSourceIP matches the peer's address (source_ip).
	RBACSourceIP struct{ Prefix netip.Prefix }
	// RBACDirectRemoteIP matches the peer's address (direct_remote_ip).
	RBACDirectRemoteIP struct{ Prefix netip.Prefix }
	// RBACRemoteIP matches the client's address (remote_ip): the peer's,
	// since a server Listener's xff_num_trusted_hops is 0.
	RBACRemoteIP struct{ Prefix netip.Prefix }
	// RBACAuthenticated matches a TLS client (authenticated): any when
	// Name is nil, else one whose certificate's name Name matches.
	RBACAuthenticated struct{ Name *StringMatcher }
	// RBACMetadata is a metadata matcher (metadata), of which only
	// invert is kept: a gRPC request has no metadata to match.
	RBACMetadata struct{ Invert bool }
	// RBACRequestedServerName matches the TLS server name
	// (requested_server_name).
	RBACRequestedServerName struct{ Name StringMatcher }
)

func (*RBACAny) isRBACMatcher()                 {}
func (*RBACAnd) isRBACMatcher()                 {}
func (*RBACOr) isRBACMatcher()                  {}
func (*RBACNot) isRBACMatcher()                 {}
func (*RBACHeader) isRBACMatcher()              {}
func (*RBACPath) isRBACMatcher()                {}
func (*RBACDestinationIP) isRBACMatcher()       {}
func (*RBACDestinationPort) isRBACMatcher()     {}
func (*RBACSourceIP) isRBACMatcher()            {}
func (*RBACDirectRemoteIP) isRBACMatcher()      {}
func (*RBACRemoteIP) isRBACMatcher()            {}
func (*RBACAuthenticated) isRBACMatcher()       {}
func (*RBACMetadata) isRBACMatcher()            {}
func (*RBACRequestedServerName) isRBACMatcher() {}

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
