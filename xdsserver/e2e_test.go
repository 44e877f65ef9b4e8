package xdsserver_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// The tests run an xDS-enabled server on 127.0.0.1 configured by
// go-control-plane's management server, with plain gRPC channels as its
// clients. They wait on serving-mode events and RPC outcomes with
// deadlines, never on sleeps.

func TestServesByListenerWithRBACAndNonForwardingRoutes(t *testing.T) {
	e := newEnv(t)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{
		e.serverListener(nil, serverRoutes(), rbacAllowing(sayHello, forward)),
	}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	tests := []struct {
		method string
		want   codes.Code
	}{
		{sayHello, codes.OK},
		{sayBye, codes.PermissionDenied}, // RBAC allows SayHello and Forward only
		{forward, codes.Unavailable},     // allowed, but its route forwards
	}
	for _, tt := range tests {
		err := call(e.ctx, conn, tt.method)
		if got := status.Code(err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.method, err, tt.want)
		}
	}
}

// failOnDataErrors marks the bootstrap's management server
// fail_on_data_errors: only then does its deletion of a Listener drop it
// (gRFC A88).
func failOnDataErrors(c *bootstrap.Config) {
	c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureFailOnDataErrors)
}

func TestListenerDeletedAndRestored(t *testing.T) {
	e := newEnvWith(t, testutils.ManagementServerOptions{}, failOnDataErrors)
	lis := e.serverListener(nil, serverRoutes())
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	if err := call(e.ctx, conn, sayHello); err != nil {
		t.Fatalf("serving: %v", err)
	}

	e.update(testutils.Resources{})
	if got := e.waitMode(xdsserver.ServingModeNotServing); got.Err == nil {
		t.Error("not serving without a reason")
	}
	// The open connection is drained (GOAWAY): the channel loses it.
	for s := conn.GetState(); s == connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(e.ctx, s) {
			t.Fatal("the connection was not drained")
		}
	}
	// A new connection is closed at accept.
	refused(t, e.ctx, "new channel while not serving", e.dial())

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	// WaitForReady: the channel may be in backoff from the refused
	// connections; the RPC waits for the next attempt, which is served.
	if err := call(e.ctx, conn, sayHello, waitForReady); err != nil {
		t.Errorf("serving again: %v", err)
	}
}

// A server not marked fail_on_data_errors deleting the Listener is a data
// error (gRFC A88): the Listener held stays in force, and so does serving.
func TestListenerDeletedKeptWithoutFailOnDataErrors(t *testing.T) {
	e := newEnv(t)
	lis := e.serverListener(nil, serverRoutes())
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	if err := call(e.ctx, conn, sayHello); err != nil {
		t.Fatalf("serving: %v", err)
	}

	e.update(testutils.Resources{})
	// The server is told of the deletion as an ambient error, and says so.
	e.waitWarning("serving goes on with the Listener held listener=" + lis.GetName())
	if err := call(e.ctx, e.dial(), sayHello); err != nil {
		t.Errorf("after the deletion, a new channel: %v, want served", err)
	}
	select {
	case m := <-e.modes:
		t.Errorf("serving mode changed to %v (%v) on a deletion A88 says to ignore", m.Mode, m.Err)
	default:
	}
}

func TestConnectionNoFilterChainMatchesIsClosed(t *testing.T) {
	e := newEnv(t)
	// The only chain is for peers in 10.0.0.0/8; the client is 127.0.0.1,
	// and there is no default chain.
	m := &listenerv3.FilterChainMatch{SourcePrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(m, serverRoutes())}})
	e.waitMode(xdsserver.ServingModeServing)
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	conn := e.dial()
	if err := call(ctx, conn, sayHello); status.Code(err) != codes.Unavailable {
		t.Errorf("unmatched peer: %v, want UNAVAILABLE", err)
	}
	// Closed at accept: the channel never got a connection, so the RPC
	// was not refused by the routing of a served one.
	if s := conn.GetState(); s == connectivity.Ready {
		t.Errorf("channel %v, want no connection", s)
	}

	// A chain for loopback peers beside it serves the same client.
	lis := e.serverListener(m, serverRoutes())
	loop := e.serverListener(&listenerv3.FilterChainMatch{SourceType: listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK}, serverRoutes())
	lis.FilterChains = append(lis.FilterChains, loop.FilterChains[0])
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	if err := call(e.ctx, e.dial(), sayHello, waitForReady); err != nil {
		t.Errorf("loopback chain: %v", err)
	}
}

func TestListenerChangeDrainsOldConnections(t *testing.T) {
	e := newEnv(t)
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{
		e.serverListener(nil, serverRoutes(), rbacAllowing(sayHello)),
	}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	if err := call(e.ctx, conn, sayHello); err != nil {
		t.Fatal(err)
	}
	// The new version denies SayHello. The old connection gets a GOAWAY
	// and the channel reconnects to the new version: the RPCs on it
	// never fail otherwise than by the new rules.
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{
		e.serverListener(nil, serverRoutes(), rbacAllowing(sayBye)),
	}})
	for {
		err := call(e.ctx, conn, sayHello, waitForReady)
		if status.Code(err) == codes.PermissionDenied {
			break
		}
		if err != nil {
			t.Fatalf("during the change: %v, want OK then PERMISSION_DENIED", err)
		}
	}
	if err := call(e.ctx, conn, sayBye); err != nil {
		t.Errorf("new version: %v", err)
	}
}

func TestNotServingUntilRouteConfigurationArrives(t *testing.T) {
	rdsAsked := make(chan struct{})
	var once sync.Once
	e := newEnvWith(t, testutils.ManagementServerOptions{
		OnStreamRequest: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			if req.GetTypeUrl() == resources.RouteConfigTypeURL && slices.Contains(req.GetResourceNames(), "server-routes") {
				once.Do(func() { close(rdsAsked) })
			}
			return nil
		},
	}, nil)
	lis := e.serverListener(nil, serverRoutes())
	setRDS(lis, "server-routes")
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	select {
	case <-rdsAsked:
	case <-e.ctx.Done():
		t.Fatal("the server never asked for its route configuration")
	}
	// The Listener is held but its routes are not: connections are closed.
	conn := e.dial()
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	if err := call(ctx, conn, sayHello); status.Code(err) != codes.Unavailable {
		t.Errorf("without routes: %v, want UNAVAILABLE", err)
	}
	select {
	case m := <-e.modes:
		t.Fatalf("serving mode %v before the route configuration arrived", m.Mode)
	default:
	}

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}, Routes: []*routev3.RouteConfiguration{serverRoutes()}})
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, conn, sayHello, waitForReady); err != nil {
		t.Fatalf("with routes: %v", err)
	}

	// A new route configuration applies to the open connection: SayHello
	// now forwards, which a server refuses.
	rc := serverRoutes()
	all := rc.VirtualHosts[0].Routes
	rc.VirtualHosts[0].Routes = all[len(all)-1:] // only Forward
	rc.VirtualHosts[0].Routes[0].Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}, Routes: []*routev3.RouteConfiguration{rc}})
	for {
		err := call(e.ctx, conn, sayHello)
		// gRPC's words, and the node ID, as gRPC's errors name it.
		if status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "the incoming RPC matched to a route that was not of action type non forwarding") &&
			strings.Contains(err.Error(), "[xDS node id: "+nodeID+"]") {
			break
		}
		if err != nil {
			t.Fatalf("during the route change: %v, want OK then UNAVAILABLE", err)
		}
	}
}

func TestRBACOverridesAndStreams(t *testing.T) {
	e := newEnv(t)
	rc := serverRoutes()
	routes := rc.VirtualHosts[0].Routes
	// SayBye: RBAC disabled on its route, so the Listener's rules (which
	// allow SayHello and Chat only) do not apply to it.
	routes[1].TypedPerFilterConfig = map[string]*anypb.Any{
		"rbac": testutils.MarshalAny(&routev3.FilterConfig{Disabled: true}),
	}
	// Chat: an RBACPerRoute that denies everything replaces the
	// Listener's rules on its route.
	routes[2].TypedPerFilterConfig = map[string]*anypb.Any{
		"rbac": testutils.MarshalAny(&rbacfilterv3.RBACPerRoute{Rbac: &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
			Action: rbacv3.RBAC_DENY,
			Policies: map[string]*rbacv3.Policy{"no-chat": {
				Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
				Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
			}},
		}}}),
	}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, rc, rbacAllowing(sayHello, chatMethod))}})
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	if err := call(e.ctx, conn, sayHello); err != nil {
		t.Errorf("SayHello (allowed by the Listener's rules): %v", err)
	}
	if err := call(e.ctx, conn, sayBye); err != nil {
		t.Errorf("SayBye (RBAC disabled on its route): %v", err)
	}
	if err := chat(e.ctx, conn); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Chat (denied by its route's override): %v, want PERMISSION_DENIED", err)
	}

	// Without the override the stream is allowed: the stream interceptor
	// applies the Listener's rules.
	routes[2].TypedPerFilterConfig = nil
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, rc, rbacAllowing(sayHello, chatMethod))}})
	for {
		err := chat(e.ctx, conn)
		if err == nil {
			break
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Chat during the change: %v", err)
		}
	}
}

func TestListenerForAnotherAddressIsNotServed(t *testing.T) {
	e := newEnv(t)
	lis := e.serverListener(nil, serverRoutes())
	lis.Address.GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: e.port + 1}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	if got := e.waitMode(xdsserver.ServingModeNotServing); got.Err == nil || !strings.Contains(got.Err.Error(), "does not match listening address") ||
		!strings.Contains(got.Err.Error(), nodeID) {
		t.Errorf("not serving because %v, want the address mismatch in gRPC's words, with the node ID", got.Err)
	}
	refused(t, e.ctx, "Listener for another port", e.dial())

	// A client-side Listener under the server's name is not one to serve
	// either; the callback is told the new reason, as grpc-go tells it.
	client := testutils.Listener(e.name, "rc")
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{client}})
	if got := e.waitMode(xdsserver.ServingModeNotServing); got.Err == nil || !strings.Contains(got.Err.Error(), "received client-side listener resource") ||
		!strings.Contains(got.Err.Error(), nodeID) {
		t.Errorf("not serving because %v, want the client-side Listener named in gRPC's words, with the node ID", got.Err)
	}

	// Port 0 in the Listener stands for any port. (A new message: the
	// management server holds the one it was given.)
	lis = e.serverListener(nil, serverRoutes())
	lis.Address.GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: 0}
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	if err := call(e.ctx, e.dial(), sayHello, waitForReady); err != nil {
		t.Errorf("Listener with port 0: %v", err)
	}
}
