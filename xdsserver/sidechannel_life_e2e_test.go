package xdsserver_test

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// A Listener update that moves ext_authz to another service closes the
// server's channel to the old one (gRFC A92 keeps a channel only across
// updates that keep its target and credentials), but only once the check
// in flight on it, on a connection of the version replaced, has finished:
// that RPC completes. An update that keeps the service keeps its channel.
func TestExtAuthzSideChannelClosedAfterUpdate(t *testing.T) {
	oldSvc, newSvc := testutils.StartHeldAuthz(t), testutils.StartHeldAuthz(t)
	e := authzEnv(t, func(c *bootstrap.Config) {
		testutils.AllowGRPCService(oldSvc.Target())(c)
		c.AllowedGRPCServices[newSvc.Target()] = c.AllowedGRPCServices[oldSvc.Target()]
	}, testutils.ExtAuthzFilter(oldSvc.Target(), nil))
	e.waitMode(xdsserver.ServingModeServing)
	conn := e.dial()
	if err := call(e.ctx, conn, sayHello, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("RPC checked by the first service: %v", err)
	}

	held := make(chan error, 1)
	go func() { held <- call(withWant(e.ctx, "hold"), conn, sayHello) }()
	select {
	case <-oldSvc.Entered:
	case <-e.ctx.Done():
		t.Fatal("the held check never reached the first service")
	}

	// The filter moves to the second service; once a check reaches it the
	// new version serves. Then a version that keeps it and checks SayBye
	// too: the server takes Listener updates one at a time, so once
	// SayBye is checked it is done with the first update in full.
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{
		e.serverListener(nil, authzRoutes(), testutils.ExtAuthzFilter(newSvc.Target(), nil))}})
	for len(newSvc.Checks()) == 0 {
		if err := call(e.ctx, conn, sayHello, grpc.WaitForReady(true)); err != nil {
			t.Fatalf("RPC while the update to the second service is applied: %v", err)
		}
	}
	checkAll := authzRoutes()
	checkAll.VirtualHosts[0].Routes[0].TypedPerFilterConfig = nil
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{
		e.serverListener(nil, checkAll, testutils.ExtAuthzFilter(newSvc.Target(), nil))}})
	for before := len(newSvc.Checks()); len(newSvc.Checks()) == before; {
		if err := call(e.ctx, conn, sayBye, grpc.WaitForReady(true)); err != nil {
			t.Fatalf("SayBye while the second update is applied: %v", err)
		}
	}

	close(oldSvc.Release)
	if err := <-held; err != nil {
		t.Fatalf("RPC whose check was in flight across the update: %v, want it allowed", err)
	}
	if err := oldSvc.Conns.WaitEnded(e.ctx, 1); err != nil {
		t.Fatalf("the first service's connection was not closed after the update: %v", err)
	}
	if begun, _ := oldSvc.Conns.Counts(); begun != 1 {
		t.Errorf("%d connections to the first service, want 1", begun)
	}
	if begun, ended := newSvc.Conns.Counts(); begun != 1 || ended != 0 {
		t.Errorf("second service: %d connections begun, %d ended; want one kept across the update that kept it", begun, ended)
	}
}
