package grpcxds_test

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Outlier detection (gRFC A50) with the failure percentage: a backend
// failing every RPC is ejected and the traffic moves to the others; once
// it serves again it gets RPCs again after its ejection time.
func TestOutlierDetectionEjectsAndReturns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad, a, b := startBackend(t, "bad"), startBackend(t, "a"), startBackend(t, "b")
	bad.fail.Store(true)
	cluster := clusters("A")[0]
	cluster.OutlierDetection = &clusterv3.OutlierDetection{
		Interval:                       durationpb.New(50 * time.Millisecond),
		BaseEjectionTime:               durationpb.New(time.Second),
		MaxEjectionPercent:             wrapperspb.UInt32(50),
		EnforcingSuccessRate:           wrapperspb.UInt32(0),
		EnforcingFailurePercentage:     wrapperspb.UInt32(100),
		FailurePercentageThreshold:     wrapperspb.UInt32(50),
		FailurePercentageMinimumHosts:  wrapperspb.UInt32(3),
		FailurePercentageRequestVolume: wrapperspb.UInt32(3),
	}
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{cluster}, eds("A", bad, a, b)))
	conn := e.dial()
	// Round robin over the three: every third RPC fails until "bad" is
	// ejected; 30 successes in a row mean it is out.
	e.waitServed(conn, 30, func(name string) bool { return name == "a" || name == "b" })
	before := bad.rpcs.Load()
	if before == 0 {
		t.Fatal("bad got no RPC before its ejection: nothing to detect")
	}
	// It recovers, and after the ejection time it serves again.
	bad.fail.Store(false)
	e.waitServed(conn, 1, func(name string) bool { return name == "bad" })
	t.Logf("bad failed %d RPCs, was ejected, and came back", before)
}
