package grpcxds_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/grpcxds"
)

// eventRecorder is an OutlierMetrics that keeps each measurement as a
// line and wakes waiters on every new one.
type eventRecorder struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // a token after each new line
}

func newEventRecorder() *eventRecorder {
	return &eventRecorder{changed: make(chan struct{}, 1)}
}

func (r *eventRecorder) add(format string, args ...any) {
	r.mu.Lock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *eventRecorder) EjectionEnforced(target, backendService, method string) {
	r.add("%s %s %s enforced", target, backendService, method)
}

func (r *eventRecorder) EjectionUnenforced(target, backendService, method, reason string) {
	r.add("%s %s %s %s", target, backendService, method, reason)
}

// wait waits until every line of want has been recorded (each at least
// once), failing t with what was recorded if ctx ends first.
func (r *eventRecorder) wait(t *testing.T, ctx context.Context, when string, want ...string) {
	t.Helper()
	for {
		r.mu.Lock()
		got := slices.Clone(r.lines)
		r.mu.Unlock()
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return slices.Contains(got, w) })
		if len(missing) == 0 {
			return
		}
		select {
		case <-r.changed:
		case <-ctx.Done():
			t.Fatalf("%s: %q not measured; measured %q", when, missing, got)
		}
	}
}

// gRFC A91 end to end, against go-control-plane's server: outlier
// detection's failure percentage ejects the backend failing every RPC,
// measured once as an enforced ejection labelled with the channel's
// target, the cluster (gRFC A89's grpc.lb.backend_service) and the
// method.
func TestOutlierMetricsEndToEnd(t *testing.T) {
	t.Parallel()
	rec := newEventRecorder()
	e := newEnvWith(t, grpcxds.Options{OutlierMetrics: rec})
	bad, a, b := startBackend(t, "bad"), startBackend(t, "a"), startBackend(t, "b")
	bad.fail.Store(true)
	cluster := clusters("A")[0]
	cluster.OutlierDetection = &clusterv3.OutlierDetection{
		Interval:                       durationpb.New(50 * time.Millisecond),
		BaseEjectionTime:               durationpb.New(time.Minute), // stays out for the test
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
	enforced := conn.CanonicalTarget() + " A failure_percentage enforced"
	rec.wait(t, e.ctx, "bad ejected", enforced)
	// Found again while ejected, it is not counted again (its ejection
	// runs on for the test): more RPCs, and the intervals they span, add
	// nothing.
	e.waitServed(conn, 30, func(name string) bool { return name == "a" || name == "b" })
	rec.mu.Lock()
	got := slices.Clone(rec.lines)
	rec.mu.Unlock()
	if want := []string{enforced}; !slices.Equal(got, want) {
		t.Errorf("measured %q, want %q", got, want)
	}
}
