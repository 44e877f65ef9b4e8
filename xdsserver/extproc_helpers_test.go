package xdsserver_test

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// The helpers of extproc_e2e_test.go: the environment, a scripted
// processor, and the answers it gives.

// procRoutes serves every method (non-forwarding); SayBye's route has
// sayByeOverride, when set, as its typed_per_filter_config for the filter
// "proc".
func procRoutes(sayByeOverride *anypb.Any) *routev3.RouteConfiguration {
	nf := &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}
	bye := &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: sayBye}}, Action: nf}
	if sayByeOverride != nil {
		bye.TypedPerFilterConfig = map[string]*anypb.Any{"proc": sayByeOverride}
	}
	return &routev3.RouteConfiguration{Name: "proc-routes", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{bye, {Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: nf}},
	}}}
}

// procEnv is a serving server (Greeter and Echo) whose chain has filter,
// with target in the bootstrap's allowed_grpc_services.
func procEnv(t *testing.T, target string, filter *hcmv3.HttpFilter, rc *routev3.RouteConfiguration) *env {
	t.Helper()
	return procEnvChain(t, target, rc, filter)
}

// procEnvChain is procEnv with a chain of filters.
func procEnvChain(t *testing.T, target string, rc *routev3.RouteConfiguration, filters ...*hcmv3.HttpFilter) *env {
	t.Helper()
	e := newEnvWith(t, testutils.ManagementServerOptions{}, testutils.AllowGRPCService(target))
	e.srv.RegisterService(&echoDesc, struct{}{})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, rc, filters...)}})
	e.waitMode(xdsserver.ServingModeServing)
	return e
}

// bodyValue is the StringValue a body event carries ("" for none).
func bodyValue(t *testing.T, b *procv3.HttpBody) string {
	v := new(wrapperspb.StringValue)
	if err := proto.Unmarshal(b.GetBody(), v); err != nil {
		t.Errorf("body %q is not a StringValue: %v", b.GetBody(), err)
	}
	return v.GetValue()
}

// marking is testutils.ProcMarking's processor (messages marked, in GRPC
// body mode), answering headers and trailers unchanged.
var marking = testutils.ProcMarking(nil, nil, nil)
