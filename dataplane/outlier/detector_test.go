package outlier

import (
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/lbpolicy"
)

func TestConfigOf(t *testing.T) {
	if ConfigOf(nil) != nil {
		t.Error("no outlier_detection, a config")
	}
	c := ConfigOf(&clusterv3.OutlierDetection{})
	want := Config{Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionTime: 300 * time.Second,
		MaxEjectionPercent: 10, SuccessRate: &SuccessRate{StdevFactor: 1900, Enforcement: 100, MinimumHosts: 5, RequestVolume: 100}}
	if c == nil || c.Interval != want.Interval || c.BaseEjectionTime != want.BaseEjectionTime || c.MaxEjectionTime != want.MaxEjectionTime ||
		c.MaxEjectionPercent != 10 || c.SuccessRate == nil || *c.SuccessRate != *want.SuccessRate || c.FailurePercentage != nil {
		t.Errorf("defaults: %+v", c)
	}
	// enforcing_success_rate 0 turns the success rate off; the failure
	// percentage is on only with enforcing_failure_percentage above 0.
	if c := ConfigOf(&clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0)}); c != nil {
		t.Errorf("both algorithms off: %+v, want nil", c)
	}
	c = ConfigOf(&clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0), EnforcingFailurePercentage: wrapperspb.UInt32(40),
		FailurePercentageMinimumHosts: wrapperspb.UInt32(0), MaxEjectionPercent: wrapperspb.UInt32(0), Interval: durationpb.New(time.Second)})
	if c == nil || c.SuccessRate != nil || c.FailurePercentage == nil ||
		*c.FailurePercentage != (FailurePercentage{Threshold: 85, Enforcement: 40, MinimumHosts: 0, RequestVolume: 50}) ||
		c.MaxEjectionPercent != 0 || c.Interval != time.Second {
		t.Errorf("failure percentage: %+v", c)
	}
}

// An endpoint failing every request is ejected at the end of the
// interval, and returns after base_ejection_time × the number of its
// ejections, which shrinks by one per interval without one.
func TestFailurePercentageEjection(t *testing.T) {
	h := newHarness(t, 3, Config{Interval: time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionTime: 300 * time.Second,
		MaxEjectionPercent: 50, FailurePercentage: &FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 3, RequestVolume: 10}})
	h.calls([2]int{0, 20}, [2]int{20, 0}, [2]int{20, 0})
	if !h.end(time.Second) || !h.ejected(0) || h.ejected(1) || h.ejected(2) {
		t.Fatal("a, failing every request, not ejected (or b or c ejected)")
	}
	if h.end(29*time.Second) || !h.ejected(0) {
		t.Fatal("a returned before base_ejection_time")
	}
	if !h.end(time.Second) || h.ejected(0) {
		t.Fatal("a not back after base_ejection_time")
	}
	// Ejected again at once, it stays out twice as long.
	h.calls([2]int{0, 20}, [2]int{20, 0}, [2]int{20, 0})
	if !h.end(time.Second) || !h.ejected(0) {
		t.Fatal("a, failing again, not ejected again")
	}
	if h.end(59 * time.Second); !h.ejected(0) {
		t.Fatal("a second ejection lasted less than 2 × base_ejection_time")
	}
	if h.end(time.Second); h.ejected(0) {
		t.Fatal("a not back after 2 × base_ejection_time")
	}
	// Three intervals without an ejection bring the multiplier from 2 to
	// 0 (the one a returned at kept it): the next ejection lasts 30s.
	h.end(time.Second)
	h.end(time.Second)
	h.calls([2]int{0, 20}, [2]int{20, 0}, [2]int{20, 0})
	h.end(time.Second)
	if h.end(30 * time.Second); h.ejected(0) {
		t.Fatal("after intervals without an ejection, the next one still lasted more than base_ejection_time")
	}
	// Fewer than minimum_hosts endpoints with request_volume requests: no
	// ejection.
	h.calls([2]int{0, 20}, [2]int{9, 0}, [2]int{20, 0})
	if h.end(time.Second); h.ejected(0) {
		t.Error("ejected with 2 endpoints of request_volume, minimum_hosts 3")
	}
}

// max_ejection_percent caps the ejected endpoints: of four failing ones,
// 50% lets two go; 100% all four.
func TestMaxEjectionPercent(t *testing.T) {
	cfg := Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		MaxEjectionPercent: 50, FailurePercentage: &FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 1, RequestVolume: 1}}
	h := newHarness(t, 4, cfg)
	h.calls([2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5})
	h.end(time.Second)
	if n := h.nEjected(); n != 2 {
		t.Errorf("%d of 4 failing endpoints ejected with max_ejection_percent 50, want 2", n)
	}
	cfg.MaxEjectionPercent = 100
	h.mu.Lock()
	h.d.Update(cfg, h.loc)
	h.mu.Unlock()
	h.calls([2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5})
	h.end(time.Second)
	if n := h.nEjected(); n != 4 {
		t.Errorf("%d of 4 failing endpoints ejected with max_ejection_percent 100, want 4", n)
	}
}

// The success rate ejects an endpoint below mean - stdev × factor/1000:
// four at 100% and one at 50% give mean 90%, stdev 20%, and with the
// default factor 1.9 a threshold of 52%.
func TestSuccessRateEjection(t *testing.T) {
	h := newHarness(t, 5, *ConfigOf(&clusterv3.OutlierDetection{}))
	h.calls([2]int{50, 50}, [2]int{100, 0}, [2]int{100, 0}, [2]int{100, 0}, [2]int{100, 0})
	if h.end(10 * time.Second); !h.ejected(0) {
		t.Error("50% success among endpoints at 100% not ejected")
	}
	h = newHarness(t, 5, *ConfigOf(&clusterv3.OutlierDetection{}))
	// 90%, 95% and three at 100%: mean 97%, stdev 4%, threshold 89.4%.
	h.calls([2]int{90, 10}, [2]int{95, 5}, [2]int{100, 0}, [2]int{100, 0}, [2]int{100, 0})
	if h.end(10 * time.Second); h.ejected(0) || h.ejected(1) {
		t.Error("90% success, above the 89.4% threshold, ejected")
	}
	// Fewer than success_rate_minimum_hosts (5) candidates: no ejection.
	h.calls([2]int{0, 100}, [2]int{100, 0}, [2]int{100, 0}, [2]int{100, 0}, [2]int{99, 0})
	if h.end(10 * time.Second); h.ejected(0) {
		t.Error("ejected with 4 endpoints of request_volume, minimum_hosts 5")
	}
}

// An ejection lasts at most max(base_ejection_time, max_ejection_time),
// however many times the endpoint was ejected, without overflowing.
func TestEjectionTimeCapped(t *testing.T) {
	for _, tc := range []struct {
		base, max time.Duration
		mult      int64
		want      time.Duration
	}{
		{30 * time.Second, 300 * time.Second, 3, 90 * time.Second},
		{30 * time.Second, 300 * time.Second, 11, 300 * time.Second},
		{30 * time.Second, time.Second, 2, 30 * time.Second}, // the base is the cap
		{time.Duration(math.MaxInt64 / 2), 0, 3, time.Duration(math.MaxInt64 / 2)},
		{time.Hour, 2 * time.Hour, math.MaxInt64, 2 * time.Hour},
	} {
		d := &Detector{cfg: Config{BaseEjectionTime: tc.base, MaxEjectionTime: tc.max}}
		if got := d.ejectionTime(&epState{multiplier: tc.mult}); got != tc.want {
			t.Errorf("base %v, max %v, multiplier %d: %v, want %v", tc.base, tc.max, tc.mult, got, tc.want)
		}
	}
}

// The interval timer runs on the detector's clock; an interval changed
// by an update counts from the start of the running one; an interval of
// 0 runs every MinInterval.
func TestIntervalTimer(t *testing.T) {
	cfg := Config{Interval: 10 * time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
		MaxEjectionPercent: 100, FailurePercentage: &FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 1, RequestVolume: 1}}
	h := newHarness(t, 2, cfg)
	if got := h.clk.pending(); !slices.Equal(got, []time.Duration{10 * time.Second}) {
		t.Fatalf("timers after the first update: %v, want [10s]", got)
	}
	h.end(10 * time.Second)
	h.clk.advance(4 * time.Second)
	update := func(interval time.Duration) {
		cfg.Interval = interval
		h.mu.Lock()
		h.d.Update(cfg, h.loc)
		h.mu.Unlock()
	}
	update(10 * time.Second) // unchanged: the timer runs on
	if got := h.clk.pending(); !slices.Equal(got, []time.Duration{6 * time.Second}) {
		t.Fatalf("timers after an update keeping the interval: %v, want [6s]", got)
	}
	update(6 * time.Second)
	if got := h.clk.pending(); !slices.Equal(got, []time.Duration{2 * time.Second}) {
		t.Fatalf("timers after the interval went from 10s to 6s, 4s into one: %v, want [2s]", got)
	}
	h.end(2 * time.Second)
	update(0)
	if got := h.clk.pending(); !slices.Equal(got, []time.Duration{MinInterval}) {
		t.Fatalf("timers with an interval of 0: %v, want [%v]", got, MinInterval)
	}
	h.calls([2]int{0, 3})
	if !h.end(MinInterval) || !h.ejected(0) {
		t.Fatal("a failing endpoint not ejected at the end of a MinInterval interval")
	}
	h.mu.Lock()
	h.d.Stop()
	h.mu.Unlock()
	if got := h.clk.pending(); len(got) != 0 {
		t.Fatalf("timers after Stop: %v", got)
	}
}

// A timer that fired while its owner held the lock and then stopped the
// detector does nothing once it gets the lock; a stopped detector starts
// no timer.
func TestStopBeatsFiredTimer(t *testing.T) {
	clk := &manualClock{now: time.Unix(1000, 0)}
	var queued []func() bool
	d := New(clk, func(f func() bool) { queued = append(queued, f) }, nil, "")
	eps, loc := endpoints(2)
	cfg := Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute, MaxEjectionPercent: 100,
		FailurePercentage: &FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 1, RequestVolume: 1}}
	d.Update(cfg, loc)
	d.Record(eps[0], false)
	clk.advance(time.Second)
	if len(queued) != 1 {
		t.Fatalf("%d interval ends waiting for the lock, want 1", len(queued))
	}
	d.Stop()
	if queued[0]() || d.Ejected(eps[0]) {
		t.Error("an interval ended after Stop")
	}
	d.Update(cfg, loc)
	if got := clk.pending(); len(got) != 0 {
		t.Errorf("timers of a stopped detector: %v", got)
	}
}

// Record runs from any goroutine while the owner updates the endpoints
// and intervals end (go test -race); an endpoint no longer listed is not
// counted, and a nil detector records nothing and ejects nothing.
func TestRecordConcurrently(t *testing.T) {
	cfg := Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute, MaxEjectionPercent: 100,
		FailurePercentage: &FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 1, RequestVolume: 1}}
	h := newHarness(t, 3, cfg)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h.d.Record(h.eps[(g+i)%3], true)
			}
		})
	}
	for i := range 50 {
		loc := h.loc
		if i%2 == 1 {
			loc = []lbpolicy.Locality{{Weight: 1, Endpoints: h.loc[0].Endpoints[:2]}}
		}
		h.mu.Lock()
		h.d.Update(cfg, loc)
		h.mu.Unlock()
		h.end(time.Second)
	}
	close(stop)
	wg.Wait()
	// c is no longer listed: its failures count nowhere.
	h.mu.Lock()
	h.d.Update(cfg, []lbpolicy.Locality{{Weight: 1, Endpoints: h.loc[0].Endpoints[:2]}})
	h.mu.Unlock()
	h.calls([2]int{5, 0}, [2]int{5, 0}, [2]int{0, 5})
	if h.end(time.Second); h.nEjected() != 0 {
		t.Error("an endpoint not listed was ejected")
	}
	var nilD *Detector
	nilD.Record(h.eps[0], false)
	if nilD.Ejected(h.eps[0]) {
		t.Error("a nil detector ejected an endpoint")
	}
}
