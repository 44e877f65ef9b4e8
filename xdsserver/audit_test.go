package xdsserver_test

import (
	"encoding/json"
	"sync"
	"testing"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/grpc/authz/audit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// auditEvents is an audit logger registered in grpc-go's public registry,
// as a user of grpc-go's xDS server registers one.
type auditEvents struct {
	mu     sync.Mutex
	events []audit.Event
}

func (a *auditEvents) Log(e *audit.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, *e)
}

type auditConfig struct{ audit.LoggerConfig }

type auditBuilder struct{ a *auditEvents }

func (auditBuilder) ParseLoggerConfig(json.RawMessage) (audit.LoggerConfig, error) {
	return auditConfig{}, nil
}
func (b auditBuilder) Build(audit.LoggerConfig) audit.Logger { return b.a }
func (auditBuilder) Name() string                            { return "goxds.xdsserver.test.Audit" }

func TestRBACAuditLoggerSeesDenials(t *testing.T) {
	events := &auditEvents{}
	audit.RegisterLoggerBuilder(auditBuilder{events})
	e := newEnv(t)
	cfg := new(rbacfilterv3.RBAC)
	if err := rbacAllowing(sayHello).GetTypedConfig().UnmarshalTo(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Rules.AuditLoggingOptions = &rbacv3.RBAC_AuditLoggingOptions{
		AuditCondition: rbacv3.RBAC_AuditLoggingOptions_ON_DENY,
		LoggerConfigs: []*rbacv3.RBAC_AuditLoggingOptions_AuditLoggerConfig{{AuditLogger: &corev3.TypedExtensionConfig{
			Name:        "audit",
			TypedConfig: testutils.MarshalAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/goxds.xdsserver.test.Audit"}),
		}}},
	}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, serverRoutes(), rbacWith(cfg))}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	if err := call(e.ctx, conn, sayHello); err != nil {
		t.Fatal(err)
	}
	if err := call(e.ctx, conn, sayBye); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("SayBye: %v, want PERMISSION_DENIED", err)
	}
	// The interceptor logs before it fails the RPC: the event is there.
	events.mu.Lock()
	defer events.mu.Unlock()
	if len(events.events) != 1 || events.events[0].FullMethodName != sayBye || events.events[0].Authorized {
		t.Errorf("audit events %+v, want one: SayBye denied", events.events)
	}
}
