package outlier

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The consecutive detectors are Envoy's
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier):
// HTTP only, so ConfigOf (gRPC, gRFC A50) ignores them and ConfigOfHTTP
// reads them with Envoy's defaults.
func TestConfigOfHTTP(t *testing.T) {
	if ConfigOfHTTP(nil) != nil {
		t.Error("no outlier_detection, a config")
	}
	od := &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(3), EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100)}
	if c := ConfigOf(od); c.Consecutive5xx != nil || c.ConsecutiveGatewayFailure != nil {
		t.Errorf("ConfigOf (gRPC) read the consecutive detectors: %+v, %+v", c.Consecutive5xx, c.ConsecutiveGatewayFailure)
	}
	c := ConfigOfHTTP(&clusterv3.OutlierDetection{})
	if c == nil || c.SuccessRate == nil || c.Consecutive5xx == nil || *c.Consecutive5xx != (Consecutive{Threshold: 5, Enforcement: 100}) ||
		c.ConsecutiveGatewayFailure != nil || c.MaxEjectionPercent != 10 || c.BaseEjectionTime != 30*time.Second {
		t.Errorf("defaults: %+v (consecutive_5xx %+v)", c, c.Consecutive5xx)
	}
	c = ConfigOfHTTP(od)
	if *c.Consecutive5xx != (Consecutive{Threshold: 3, Enforcement: 100}) ||
		c.ConsecutiveGatewayFailure == nil || *c.ConsecutiveGatewayFailure != (Consecutive{Threshold: 5, Enforcement: 100}) {
		t.Errorf("set: consecutive_5xx %+v, consecutive_gateway_failure %+v", c.Consecutive5xx, c.ConsecutiveGatewayFailure)
	}
	// Only the consecutive_5xx detector on: the interval algorithms off.
	c = ConfigOfHTTP(&clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0), MaxEjectionPercent: wrapperspb.UInt32(50)})
	if c == nil || c.SuccessRate != nil || c.FailurePercentage != nil || c.Consecutive5xx == nil || c.MaxEjectionPercent != 50 || c.Interval != 10*time.Second {
		t.Errorf("consecutive_5xx alone: %+v", c)
	}
	// Everything off: enforcing 0, or a threshold of 0.
	if c := ConfigOfHTTP(&clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0), EnforcingConsecutive_5Xx: wrapperspb.UInt32(0)}); c != nil {
		t.Errorf("all off: %+v, want nil", c)
	}
	if c := ConfigOfHTTP(&clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0), Consecutive_5Xx: wrapperspb.UInt32(0)}); c != nil {
		t.Errorf("consecutive_5xx 0: %+v, want nil", c)
	}
}

type outcomeErr Outcome

func (e outcomeErr) Error() string    { return "outcome" }
func (e outcomeErr) Outcome() Outcome { return Outcome(e) }

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, Success},
		{errors.New("any"), Failure},
		{outcomeErr(Status5xx), Status5xx},
		{fmt.Errorf("wrapped: %w", outcomeErr(GatewayFailure)), GatewayFailure},
	} {
		if got := OutcomeOf(tc.err); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// record records outcomes on endpoint i.
func (h *harness) record(i int, outcomes ...Outcome) {
	for _, o := range outcomes {
		h.d.RecordOutcome(h.eps[i], o)
	}
}

func repeat(o Outcome, n int) []Outcome {
	out := make([]Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}

// consecutive_5xx ejects an endpoint the moment its fifth 5xx in a row
// ends, without waiting for the interval; a success ends the run, a
// failure of no HTTP kind neither extends nor ends it, a gateway failure
// extends it. The ejection lasts base_ejection_time times the number of
// ejections, as the interval algorithms'.
func TestConsecutive5xxEjectsAtOnce(t *testing.T) {
	h := newHarness(t, 3, Config{Interval: time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionTime: 300 * time.Second,
		MaxEjectionPercent: 10, Consecutive5xx: &Consecutive{Threshold: 5, Enforcement: 100}})
	h.record(0, repeat(Status5xx, 4)...)
	h.record(0, Success)
	h.record(0, Status5xx, Status5xx, Failure, GatewayFailure, Status5xx)
	if h.ejected(0) || h.changes != 0 {
		t.Fatal("ejected before 5 5xx in a row")
	}
	h.record(0, Status5xx)
	if !h.ejected(0) || h.changes != 1 || h.runs != 1 {
		t.Fatalf("5 5xx in a row: ejected %v, owner's pickers rebuilt %d times (want 1)", h.ejected(0), h.changes)
	}
	// The run starts again: b's ejection would pass max_ejection_percent
	// (10%, one is out already).
	h.record(1, repeat(Status5xx, 5)...)
	if h.ejected(1) {
		t.Error("b ejected past max_ejection_percent")
	}
	if h.end(29*time.Second) || !h.ejected(0) {
		t.Fatal("a returned before base_ejection_time")
	}
	if !h.end(time.Second) || h.ejected(0) {
		t.Fatal("a not back after base_ejection_time")
	}
	// A second ejection lasts twice as long.
	h.record(0, repeat(Status5xx, 5)...)
	if !h.ejected(0) {
		t.Fatal("a not ejected again")
	}
	if h.end(59 * time.Second); !h.ejected(0) {
		t.Fatal("a second ejection lasted less than 2 × base_ejection_time")
	}
	if h.end(time.Second); h.ejected(0) {
		t.Fatal("a not back after 2 × base_ejection_time")
	}
}

// consecutive_gateway_failure counts only gateway failures (502, 503, 504,
// connection failures): a 500 ends its run.
func TestConsecutiveGatewayFailure(t *testing.T) {
	h := newHarness(t, 2, Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		MaxEjectionPercent: 100, ConsecutiveGatewayFailure: &Consecutive{Threshold: 5, Enforcement: 100}})
	h.record(0, repeat(GatewayFailure, 4)...)
	h.record(0, Status5xx)
	h.record(0, repeat(GatewayFailure, 4)...)
	h.record(1, repeat(Status5xx, 20)...)
	if h.ejected(0) || h.ejected(1) {
		t.Fatal("ejected with no 5 gateway failures in a row")
	}
	h.record(0, GatewayFailure)
	if !h.ejected(0) {
		t.Fatal("5 gateway failures in a row: not ejected")
	}
	// Unenforced (enforcing 0 is ConfigOfHTTP's nil): Record with the
	// detectors off ejects nothing, and Record(ep, false) is a Failure.
	h2 := newHarness(t, 2, Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute, MaxEjectionPercent: 100})
	h2.record(0, repeat(GatewayFailure, 10)...)
	if h2.ejected(0) || h2.runs != 0 {
		t.Error("ejected with no consecutive detector")
	}
}

// Each consecutive ejection, or one the cap stopped, is reported as
// Envoy's statistics name the method, with no owner's lock held.
func TestConsecutiveMetrics(t *testing.T) {
	r := &recorder{t: t, got: map[string]int{}}
	h := newMeasuredHarness(t, 4, Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		MaxEjectionPercent: 25, Consecutive5xx: &Consecutive{Threshold: 2, Enforcement: 100},
		ConsecutiveGatewayFailure: &Consecutive{Threshold: 3, Enforcement: 100}}, r, "leaf-a")
	r.owner = &h.mu
	h.record(0, Status5xx, Status5xx)
	h.record(1, repeat(GatewayFailure, 3)...)
	want := map[string]int{
		"leaf-a/consecutive_5xx/enforced": 1,
		// b's third gateway failure is its run of 5xx's second too.
		"leaf-a/consecutive_5xx/max_ejection_overflow":             1,
		"leaf-a/consecutive_gateway_failure/max_ejection_overflow": 1,
	}
	if diff := cmp.Diff(want, r.take()); diff != "" {
		t.Errorf("outliers (-want +got):\n%s", diff)
	}
}

// Runs counted from many goroutines at once eject the endpoint once, and
// the owner's callback runs on the goroutine that completed the run.
func TestConsecutiveConcurrently(t *testing.T) {
	h := newHarness(t, 2, Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		MaxEjectionPercent: 100, Consecutive5xx: &Consecutive{Threshold: 5, Enforcement: 100}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.record(0, repeat(Status5xx, 50)...)
			h.record(1, Success, Failure, GatewayFailure)
		}()
	}
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.d.Ejected(h.eps[0]) || h.d.Ejected(h.eps[1]) || h.changes != 1 {
		t.Errorf("a ejected %v, b %v, ejections %d; want a ejected once", h.d.Ejected(h.eps[0]), h.d.Ejected(h.eps[1]), h.changes)
	}
}
