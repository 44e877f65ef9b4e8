package grpcxds_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// An update that moves ext_authz to another service closes the channel to
// the old one (gRFC A92 keeps a channel only across updates that keep its
// target and credentials), but only once the check in flight on it when
// the update came has finished: that RPC completes. An update that keeps
// the service keeps its channel: one connection serves every check.
func TestExtAuthzSideChannelClosedAfterUpdate(t *testing.T) {
	oldSvc, newSvc := testutils.StartHeldAuthz(t), testutils.StartHeldAuthz(t)
	e := authzEnv(t, func(c *bootstrap.Config) {
		testutils.AllowGRPCService(oldSvc.Target())(c)
		c.AllowedGRPCServices[newSvc.Target()] = c.AllowedGRPCServices[oldSvc.Target()]
	})
	b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
	e.update(authzTree(t, b1, testutils.ExtAuthzFilter(oldSvc.Target(), nil)))
	conn := e.dial()
	if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("RPC checked by the first service: %v", err)
	}

	// A check in flight at the old service across the update.
	held := make(chan error, 1)
	go func() {
		_, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-want", "hold"), conn)
		held <- err
	}()
	select {
	case <-oldSvc.Entered:
	case <-e.ctx.Done():
		t.Fatal("the held check never reached the first service")
	}

	// The filter moves to the second service. Once a check reaches it,
	// the resolver has applied that update; then an update that keeps it
	// (another backend, b2): the resolver takes updates one at a time, so
	// once RPCs reach b2 it is done with the first in full.
	e.update(authzTree(t, b1, testutils.ExtAuthzFilter(newSvc.Target(), nil)))
	for len(newSvc.Checks()) == 0 {
		if _, err := call(e.ctx, conn); err != nil {
			t.Fatalf("RPC while the update to the second service is applied: %v", err)
		}
	}
	e.update(authzTree(t, b2, testutils.ExtAuthzFilter(newSvc.Target(), nil)))
	e.waitServed(conn, 1, func(b string) bool { return b == "b2" })

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
