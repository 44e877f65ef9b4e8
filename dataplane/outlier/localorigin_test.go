package outlier

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Envoy's split of locally originated errors
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier#detection-types):
// split_external_local_origin_errors turns on
// consecutive_local_origin_failure (default 5, enforcing 100%) and the
// interval algorithms over the local outcomes (enforcing 100% for the
// success rate, 0% for the failure percentage); without it, or for gRPC
// (ConfigOf), those fields are ignored.
func TestConfigOfHTTPLocalOrigin(t *testing.T) {
	od := &clusterv3.OutlierDetection{ConsecutiveLocalOriginFailure: wrapperspb.UInt32(2), EnforcingLocalOriginSuccessRate: wrapperspb.UInt32(40)}
	if c := ConfigOfHTTP(od); c.SplitLocalOrigin || c.ConsecutiveLocalOrigin != nil || c.LocalOriginSuccessRate != nil || c.LocalOriginFailurePercentage != nil {
		t.Errorf("split off: local-origin detectors %+v", c)
	}
	od.SplitExternalLocalOriginErrors = true
	if c := ConfigOf(od); c.SplitLocalOrigin || c.ConsecutiveLocalOrigin != nil || c.LocalOriginSuccessRate != nil {
		t.Errorf("ConfigOf (gRPC) read the split: %+v", c)
	}
	c := ConfigOfHTTP(&clusterv3.OutlierDetection{SplitExternalLocalOriginErrors: true, SuccessRateMinimumHosts: wrapperspb.UInt32(2)})
	want := SuccessRate{StdevFactor: 1900, Enforcement: 100, MinimumHosts: 2, RequestVolume: 100}
	if !c.SplitLocalOrigin || c.ConsecutiveLocalOrigin == nil || *c.ConsecutiveLocalOrigin != (Consecutive{Threshold: 5, Enforcement: 100}) ||
		c.LocalOriginSuccessRate == nil || *c.LocalOriginSuccessRate != want || c.LocalOriginFailurePercentage != nil {
		t.Errorf("split defaults: %+v", c)
	}
	// The local-origin algorithms alone, the others off: a config.
	c = ConfigOfHTTP(&clusterv3.OutlierDetection{SplitExternalLocalOriginErrors: true, EnforcingSuccessRate: wrapperspb.UInt32(0),
		EnforcingConsecutive_5Xx: wrapperspb.UInt32(0), ConsecutiveLocalOriginFailure: wrapperspb.UInt32(0),
		EnforcingLocalOriginSuccessRate: wrapperspb.UInt32(0), EnforcingFailurePercentageLocalOrigin: wrapperspb.UInt32(30)})
	if c == nil || c.SuccessRate != nil || c.ConsecutiveLocalOrigin != nil || c.LocalOriginSuccessRate != nil ||
		c.LocalOriginFailurePercentage == nil || *c.LocalOriginFailurePercentage != (FailurePercentage{Threshold: 85, Enforcement: 30, MinimumHosts: 5, RequestVolume: 50}) {
		t.Errorf("local failure percentage alone: %+v", c)
	}
}

// Without the split, a request the endpoint never answered is a gateway
// failure: it extends the runs of 5xx and of gateway failures ("all end
// up in the same bucket").
func TestLocalOriginUnsplitIsGatewayFailure(t *testing.T) {
	h := newHarness(t, 2, Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute, MaxEjectionPercent: 100,
		Consecutive5xx: &Consecutive{Threshold: 3, Enforcement: 100}, ConsecutiveGatewayFailure: &Consecutive{Threshold: 4, Enforcement: 100}})
	h.record(0, LocalOriginFailure, Status5xx, LocalOriginFailure)
	if !h.ejected(0) {
		t.Error("3 failures in a row, two of them local-origin: not ejected by consecutive_5xx")
	}
	h.record(1, GatewayFailure, LocalOriginFailure, GatewayFailure, LocalOriginFailure)
	if !h.ejected(1) {
		t.Error("4 gateway failures in a row, two of them local-origin: not ejected by consecutive_gateway_failure")
	}
}

// With the split, the locally originated errors have a run of their own,
// which any response ends (the connection worked), and the 5xx and
// gateway runs ignore them.
func TestConsecutiveLocalOriginFailure(t *testing.T) {
	r := &recorder{t: t, got: map[string]int{}}
	h := newMeasuredHarness(t, 2, Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute, MaxEjectionPercent: 100,
		Consecutive5xx: &Consecutive{Threshold: 2, Enforcement: 100}, ConsecutiveGatewayFailure: &Consecutive{Threshold: 2, Enforcement: 100},
		SplitLocalOrigin: true, ConsecutiveLocalOrigin: &Consecutive{Threshold: 3, Enforcement: 100}}, r, "leaf")
	r.owner = &h.mu
	// The local failures neither extend nor end the 5xx run, and a 500
	// ends the local run.
	h.record(0, LocalOriginFailure, LocalOriginFailure, Status5xx, LocalOriginFailure, LocalOriginFailure)
	if h.ejected(0) {
		t.Fatal("ejected: local failures counted in the 5xx or gateway runs, or a 500 did not end the local run")
	}
	h.record(0, LocalOriginFailure)
	if !h.ejected(0) {
		t.Fatal("3 local-origin failures in a row: not ejected")
	}
	// A run of local failures after a success; a 503 ends it too.
	h.record(1, Success, LocalOriginFailure, LocalOriginFailure, GatewayFailure, LocalOriginFailure, LocalOriginFailure)
	if h.ejected(1) {
		t.Fatal("a 503 did not end the local-origin run")
	}
	if diff := cmp.Diff(map[string]int{"leaf/consecutive_local_origin_failure/enforced": 1}, r.take()); diff != "" {
		t.Errorf("outliers (-want +got):\n%s", diff)
	}
}

// With the split, the success rate judges the responses and the
// locally originated outcomes apart, each with its own enforcing
// percentage; without it, both in one rate.
func TestLocalOriginSuccessRate(t *testing.T) {
	sr := &SuccessRate{StdevFactor: 1000, Enforcement: 100, MinimumHosts: 3, RequestVolume: 10}
	base := Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute, MaxEjectionPercent: 100}
	// Endpoint 0 never answers half its requests; the others answer all,
	// with 200s.
	load := func(h *harness) {
		for i := range 4 {
			h.record(i, repeat(Success, 20)...)
		}
		h.record(0, repeat(LocalOriginFailure, 20)...)
	}

	unsplit := base
	unsplit.SuccessRate = sr
	h := newHarness(t, 4, unsplit)
	load(h)
	if !h.end(time.Second) || !h.ejected(0) || h.nEjected() != 1 {
		t.Errorf("one bucket: ejected %d, endpoint 0 %v; want endpoint 0 alone", h.nEjected(), h.ejected(0))
	}

	// Split, with the responses' success rate on and the local one off:
	// endpoint 0's responses are all successes.
	split := base
	split.SplitLocalOrigin, split.SuccessRate = true, sr
	h = newHarness(t, 4, split)
	load(h)
	if h.end(time.Second) || h.nEjected() != 0 {
		t.Errorf("split, local success rate off: %d ejected", h.nEjected())
	}
	// The local one on.
	r := &recorder{t: t, got: map[string]int{}}
	split.LocalOriginSuccessRate = sr
	h = newMeasuredHarness(t, 4, split, r, "leaf")
	r.owner = &h.mu
	load(h)
	if !h.end(time.Second) || !h.ejected(0) || h.nEjected() != 1 {
		t.Errorf("split, local success rate on: ejected %d, endpoint 0 %v; want endpoint 0 alone", h.nEjected(), h.ejected(0))
	}
	if diff := cmp.Diff(map[string]int{"leaf/local_origin_success_rate/enforced": 1}, r.take()); diff != "" {
		t.Errorf("outliers (-want +got):\n%s", diff)
	}
	// The local failure percentage: 50% failed is above 40.
	split.LocalOriginSuccessRate = nil
	split.LocalOriginFailurePercentage = &FailurePercentage{Threshold: 40, Enforcement: 100, MinimumHosts: 1, RequestVolume: 10}
	h = newHarness(t, 4, split)
	load(h)
	if !h.end(time.Second) || !h.ejected(0) || h.nEjected() != 1 {
		t.Errorf("split, local failure percentage: ejected %d, endpoint 0 %v; want endpoint 0 alone", h.nEjected(), h.ejected(0))
	}
}
