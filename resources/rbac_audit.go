package resources

import (
	"encoding/json"
	"errors"
	"fmt"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/rbac/audit_loggers/stream/v3"
	"google.golang.org/grpc/authz/audit"
	"google.golang.org/grpc/authz/audit/stdout"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// RBACAuditLogger is one audit logger of RBAC rules (gRFC A59). It is
// built when the rules are decoded, through grpc-go's public registry
// (google.golang.org/grpc/authz/audit), so that loggers registered for
// grpc-go's servers work here too and a logger that is not registered
// makes the rules invalid; the stdout logger is always there. It is
// handed decisions as plain data, so that what evaluates the rules needs
// none of grpc-go's types.
type RBACAuditLogger struct {
	// Name is the name the logger is registered under.
	Name string
	l    audit.Logger
}

// RBACAuditEvent is one authorization decision, as an audit logger gets
// it.
type RBACAuditEvent struct {
	// Path is the request's path; for gRPC "/service/method".
	Path string
	// Principal is the client's identity (its SPIFFE ID); "" if none.
	Principal string
	// Policy is the policy that decided; "" when none matched.
	Policy string
	// Allowed is the decision.
	Allowed bool
}

// Log hands e to the logger. Each call gives the logger an event of its
// own, which it may keep.
func (l *RBACAuditLogger) Log(e RBACAuditEvent) {
	l.l.Log(&audit.Event{FullMethodName: e.Path, Principal: e.Principal, MatchedRule: e.Policy, Authorized: e.Allowed})
}

// setAudit validates the audit logging options and builds their loggers.
func (r *RBACRules) setAudit(o *rbacv3.RBAC_AuditLoggingOptions) error {
	if o == nil {
		return nil
	}
	switch c := o.GetAuditCondition(); c {
	case rbacv3.RBAC_AuditLoggingOptions_NONE:
		r.AuditCondition = RBACAuditNone
	case rbacv3.RBAC_AuditLoggingOptions_ON_DENY:
		r.AuditCondition = RBACAuditOnDeny
	case rbacv3.RBAC_AuditLoggingOptions_ON_ALLOW:
		r.AuditCondition = RBACAuditOnAllow
	case rbacv3.RBAC_AuditLoggingOptions_ON_DENY_AND_ALLOW:
		r.AuditCondition = RBACAuditOnDenyAndAllow
	default:
		// A condition this code does not know logs nothing.
		r.AuditCondition = RBACAuditNone
	}
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
		r.AuditLoggers = append(r.AuditLoggers, &RBACAuditLogger{Name: name, l: b.Build(c)})
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
