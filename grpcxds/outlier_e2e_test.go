package grpcxds_test

import (
	"context"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// Outlier detection (gRFC A50) with the failure percentage: a backend
// failing every RPC is ejected and the traffic moves to the others; once
// it serves again it gets RPCs again after its ejection time. So it goes
// through grpc-go's resolver, and so through goxds's.
func TestOutlierDetectionEjectsAndReturns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Two channels in turn, each waiting out an ejection: more than
	// testTimeout on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()
	e.ctx = ctx
	bad, a, b := startBackend(t, "bad"), startBackend(t, "a"), startBackend(t, "b")
	bad.fail.Store(true)
	cluster := clusters("A")[0]
	cluster.OutlierDetection = &clusterv3.OutlierDetection{
		Interval:                       durationpb.New(50 * time.Millisecond),
		BaseEjectionTime:               durationpb.New(time.Second),
		MaxEjectionTime:                durationpb.New(2 * time.Second), // bounds the wait for its return
		MaxEjectionPercent:             wrapperspb.UInt32(50),
		EnforcingSuccessRate:           wrapperspb.UInt32(0),
		EnforcingFailurePercentage:     wrapperspb.UInt32(100),
		FailurePercentageThreshold:     wrapperspb.UInt32(50),
		FailurePercentageMinimumHosts:  wrapperspb.UInt32(3),
		FailurePercentageRequestVolume: wrapperspb.UInt32(3),
	}
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{cluster}, eds("A", bad, a, b)))
	grpcGo, err := xds.NewXDSResolverWithConfigForTesting(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: e.ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	// grpc-go's resolver first, as the yardstick, then goxds's.
	for _, target := range []string{"xds:///" + listener, "goxds:///" + listener} {
		bad.fail.Store(true)
		before := bad.rpcs.Load()
		conn, err := grpc.NewClient(target, grpc.WithResolvers(grpcGo, e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect)
		if err != nil {
			t.Fatal(err)
		}
		// Round robin over the three: every third RPC fails until "bad"
		// is ejected; 30 successes in a row mean it is out.
		e.waitServed(conn, 30, func(name string) bool { return name == "a" || name == "b" })
		failed := bad.rpcs.Load() - before
		if failed == 0 {
			t.Fatalf("%s: bad got no RPC before its ejection: nothing to detect", target)
		}
		// It recovers, and after the ejection time it serves again.
		bad.fail.Store(false)
		e.waitServed(conn, 1, func(name string) bool { return name == "bad" })
		conn.Close()
		t.Logf("%s: bad failed %d RPCs, was ejected, and came back", target, failed)
	}
}
