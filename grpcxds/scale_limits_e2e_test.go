package grpcxds_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
)

// An RPC queued for a connection being made counts against the cluster's
// max_requests until it is picked again or ends, as gRFC A105 counts an
// RPC its subchannel queues ("implementations will need to increment the
// counter in the picker. It will then be necessary to decrement the
// counter when the RPC finishes, regardless of whether it was actually
// sent out"): with max_requests 2, one RPC running and one queued, a
// third is refused at once; the queued one cancelled gives its place
// back, and one queued then runs once the connection is made, counted
// once (its new pick is not refused for the place it held).
func TestConnectionScalingQueuedCountsAgainstMaxRequests(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	sb := startStreamsBackend(t, "b", 1)
	e := newEnv(t)
	c := perHostCluster("c", 2, true)
	c.CircuitBreakers.Thresholds = []*clusterv3.CircuitBreakers_Thresholds{{Priority: corev3.RoutingPriority_DEFAULT, MaxRequests: wrapperspb.UInt32(2)}}
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{c}, eds("c", sb.backend)))
	// The held attempt must not time out during the test.
	conn := e.dial(grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: testTimeout}))
	first := startRPCs(e.ctx, conn, 1)
	sb.waitArrived(t, e.ctx, 1, "the first RPC")
	hold := make(chan struct{})
	sb.hold.Store(&hold)
	held := false
	defer func() {
		if !held {
			close(hold)
		}
	}()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	queued := startRPCs(ctx, conn, 1)
	select {
	case <-sb.holding: // the second RPC is queued for this connection
	case <-e.ctx.Done():
		t.Fatal("no second connection was attempted")
	}

	// Refused at once, not queued: a later deadline is a failure.
	ctx3, cancel3 := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel3()
	_, err := call(ctx3, conn, grpc.WaitForReady(true))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "max_requests") {
		t.Fatalf("an RPC with one running and one queued, max_requests 2: %v, want UNAVAILABLE naming max_requests", err)
	}

	cancel()
	if err := <-queued; status.Code(err) != codes.Canceled {
		t.Fatalf("the queued RPC, cancelled: %v", err)
	}
	// Its place is given back as its context ends, from a goroutine of
	// the context's: maybe after the RPC returned.
	for grpcxds.QueuedPlaces() != 0 {
		select {
		case <-e.ctx.Done():
			t.Fatal("the cancelled RPC's place was not given back")
		case <-time.After(time.Millisecond):
		}
	}
	queuedBefore := grpcxds.QueuedPicks() // none is queued now
	// Its place given back, another queues in it (not refused), and runs
	// once the connection is made.
	again := startRPCs(e.ctx, conn, 1)
	for grpcxds.QueuedPicks() == queuedBefore {
		select {
		case err := <-again:
			t.Fatalf("an RPC in the place of the cancelled one: %v, want it queued", err)
		case <-e.ctx.Done():
			t.Fatal("the RPC in the place of the cancelled one was not queued")
		case <-time.After(time.Millisecond):
		}
	}
	held = true
	sb.hold.Store(nil)
	close(hold)
	sb.waitArrived(t, e.ctx, 1, "the RPC queued in the cancelled one's place")
	sb.release <- struct{}{}
	sb.release <- struct{}{}
	for _, errs := range []<-chan error{first, again} {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("RPC: %v", err)
			}
		case <-e.ctx.Done():
			t.Fatalf("RPCs did not end: %v", e.ctx.Err())
		}
	}
	// Every place given back: two at once run.
	both := startRPCs(e.ctx, conn, 2)
	sb.waitArrived(t, e.ctx, 2, "two RPCs once the others ended")
	finish(t, e.ctx, sb, both, 2)
}
