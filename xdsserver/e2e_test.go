package xdsserver_test

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

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

func TestListenerDeletedAndRestored(t *testing.T) {
	e := newEnv(t)
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
	// The connection is drained (GOAWAY): wait for the channel to see it
	// go. A new connection is closed at once, so the RPC then fails
	// without waiting for its deadline.
	for s := conn.GetState(); s == connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(e.ctx, s) {
			t.Fatal("the connection was not drained")
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	if err := call(ctx, conn, sayHello); status.Code(err) != codes.Unavailable {
		t.Errorf("not serving: %v, want UNAVAILABLE", err)
	}

	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{lis}})
	e.waitMode(xdsserver.ServingModeServing)
	// WaitForReady: the channel may be in backoff from the refused
	// connections; the RPC waits for the next attempt, which is served.
	if err := call(e.ctx, conn, sayHello, waitForReady); err != nil {
		t.Errorf("serving again: %v", err)
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
