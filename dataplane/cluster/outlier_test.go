package cluster

import (
	"errors"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/resources"
)

// fakeClock is a clock whose time the test sets; its timers never fire:
// the tests end intervals themselves.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time                                 { return c.now }
func (c *fakeClock) AfterFunc(time.Duration, func()) lbpolicy.Timer { return fakeTimer{} }

type fakeTimer struct{}

func (fakeTimer) Stop() bool { return true }

func TestOutlierConfigOf(t *testing.T) {
	if outlierConfigOf(nil) != nil {
		t.Error("no outlier_detection, a config")
	}
	c := outlierConfigOf(&clusterv3.OutlierDetection{})
	want := outlierConfig{interval: 10 * time.Second, baseEjection: 30 * time.Second, maxEjection: 300 * time.Second,
		maxEjectionPercent: 10, successRate: &ejectionConfig{threshold: 1900, enforcement: 100, minimumHosts: 5, requestVolume: 100}}
	if c == nil || c.interval != want.interval || c.baseEjection != want.baseEjection || c.maxEjection != want.maxEjection ||
		c.maxEjectionPercent != 10 || c.successRate == nil || *c.successRate != *want.successRate || c.failurePercent != nil {
		t.Errorf("defaults: %+v", c)
	}
	// enforcing_success_rate 0 turns the success rate off; the failure
	// percentage is on only with enforcing_failure_percentage above 0.
	if c := outlierConfigOf(&clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0)}); c != nil {
		t.Errorf("both algorithms off: %+v, want nil", c)
	}
	c = outlierConfigOf(&clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0), EnforcingFailurePercentage: wrapperspb.UInt32(40),
		FailurePercentageMinimumHosts: wrapperspb.UInt32(0), MaxEjectionPercent: wrapperspb.UInt32(0), Interval: durationpb.New(time.Second)})
	if c == nil || c.successRate != nil || c.failurePercent == nil ||
		*c.failurePercent != (ejectionConfig{threshold: 85, enforcement: 40, minimumHosts: 0, requestVolume: 50}) ||
		c.maxEjectionPercent != 0 || c.interval != time.Second {
		t.Errorf("failure percentage: %+v", c)
	}
}

// detector returns a detector over the endpoints of p with cfg and a
// fake clock.
func detector(p *priority, cfg outlierConfig) (*outlierDetector, *fakeClock) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	d := &outlierDetector{clock: clk}
	d.update(cfg, p)
	p.lb.Ejected = d
	return d, clk
}

// calls records ok successes and failed failures on each endpoint of p,
// by index.
func calls(d *outlierDetector, p *priority, outcomes ...[2]int) {
	i := 0
	for _, l := range p.lb.Localities {
		for _, e := range l.Endpoints {
			for range outcomes[i][0] {
				d.eps[e.Endpoint].record(nil)
			}
			for range outcomes[i][1] {
				d.eps[e.Endpoint].record(errors.New("boom"))
			}
			i++
		}
	}
}

func conn(p *priority, i int) *endpoint.Endpoint { return p.lb.Localities[0].Endpoints[i].Endpoint }

// An endpoint failing every RPC is ejected at the end of the interval,
// the policy passes it over, and it returns after base_ejection_time ×
// the number of its ejections, which shrinks by one per interval without
// one.
func TestFailurePercentageEjection(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1, 1, 1})
	d, clk := detector(p, outlierConfig{interval: time.Second, baseEjection: 30 * time.Second, maxEjection: 300 * time.Second,
		maxEjectionPercent: 50, failurePercent: &ejectionConfig{threshold: 50, enforcement: 100, minimumHosts: 3, requestVolume: 10}})
	calls(d, p, [2]int{0, 20}, [2]int{20, 0}, [2]int{20, 0})
	if !d.runInterval() || !d.ejected(conn(p, 0)) || d.ejected(conn(p, 1)) {
		t.Fatal("a, failing every RPC, not ejected")
	}
	if got := picks(t, readyPicker(t, p), 20); got["a"] != 0 {
		t.Errorf("a ejected still picked: %v", got)
	}
	if s, err := p.state(map[*endpoint.Endpoint]struct{}{}); s != endpoint.Ready || err != nil {
		t.Errorf("priority with b and c ready: %v, %v", s, err)
	}
	clk.now = clk.now.Add(29 * time.Second)
	if d.runInterval() || !d.ejected(conn(p, 0)) {
		t.Fatal("a returned before base_ejection_time")
	}
	clk.now = clk.now.Add(time.Second)
	if !d.runInterval() || d.ejected(conn(p, 0)) {
		t.Fatal("a not back after base_ejection_time")
	}
	// Ejected again at once, it stays out twice as long.
	calls(d, p, [2]int{0, 20}, [2]int{20, 0}, [2]int{20, 0})
	d.runInterval()
	clk.now = clk.now.Add(59 * time.Second)
	if d.runInterval(); !d.ejected(conn(p, 0)) {
		t.Fatal("a second ejection lasted less than 2 × base_ejection_time")
	}
	clk.now = clk.now.Add(time.Second)
	if d.runInterval(); d.ejected(conn(p, 0)) {
		t.Fatal("a not back after 2 × base_ejection_time")
	}
	// Fewer than minimum_hosts endpoints with request_volume RPCs: no
	// ejection.
	calls(d, p, [2]int{0, 20}, [2]int{9, 0}, [2]int{20, 0})
	if d.runInterval(); d.ejected(conn(p, 0)) {
		t.Error("ejected with 2 endpoints of request_volume, minimum_hosts 3")
	}
}

// max_ejection_percent caps the ejected endpoints: of four failing ones,
// 50% lets two go.
func TestMaxEjectionPercent(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1, 1, 1, 1})
	d, _ := detector(p, outlierConfig{interval: time.Second, baseEjection: time.Minute, maxEjection: time.Minute,
		maxEjectionPercent: 50, failurePercent: &ejectionConfig{threshold: 50, enforcement: 100, minimumHosts: 1, requestVolume: 1}})
	calls(d, p, [2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5})
	d.runInterval()
	n := 0
	for i := range 4 {
		if d.ejected(conn(p, i)) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d of 4 failing endpoints ejected with max_ejection_percent 50, want 2", n)
	}
	// Every endpoint ejected would fail the priority over to the next.
	d.cfg.maxEjectionPercent = 100
	calls(d, p, [2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5}, [2]int{0, 5})
	d.runInterval()
	if s, err := p.state(map[*endpoint.Endpoint]struct{}{}); s != endpoint.TransientFailure || !errors.Is(err, errEjected) {
		t.Errorf("every endpoint ejected: %v, %v; want TRANSIENT_FAILURE", s, err)
	}
}

// The success rate ejects an endpoint below mean - stdev × factor/1000:
// four at 100% and one at 50% give mean 90%, stdev 20%, and with the
// default factor 1.9 a threshold of 52%.
func TestSuccessRateEjection(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1, 1, 1, 1, 1})
	d, _ := detector(p, *outlierConfigOf(&clusterv3.OutlierDetection{}))
	calls(d, p, [2]int{50, 50}, [2]int{100, 0}, [2]int{100, 0}, [2]int{100, 0}, [2]int{100, 0})
	if d.runInterval(); !d.ejected(conn(p, 0)) {
		t.Error("50% success among endpoints at 100% not ejected")
	}
	p = prio(endpoint.Ready, []uint32{1, 1, 1, 1, 1})
	d, _ = detector(p, *outlierConfigOf(&clusterv3.OutlierDetection{}))
	// 90%, 95% and three at 100%: mean 97%, stdev 4%, threshold 89.4%.
	calls(d, p, [2]int{90, 10}, [2]int{95, 5}, [2]int{100, 0}, [2]int{100, 0}, [2]int{100, 0})
	if d.runInterval(); d.ejected(conn(p, 0)) || d.ejected(conn(p, 1)) {
		t.Error("90% success, above the 89.4% threshold, ejected")
	}
}

// The picker of a priority with outlier detection counts each RPC's
// outcome on its endpoint.
func TestPickerCountsOutcomes(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1}).with(resources.LBPolicy{Kind: resources.LBRoundRobin})
	d, _ := detector(p, *outlierConfigOf(&clusterv3.OutlierDetection{}))
	pp := p.picker(endpoint.Ready, testHeaderHash)
	for _, err := range []error{nil, nil, errors.New("boom")} {
		res, perr := pp.Pick(nil, 0)
		if perr != nil {
			t.Fatal(perr)
		}
		res.Done.Finish(err, nil)
	}
	c := d.eps[conn(p, 0)].active.Load()
	if c.ok.Load() != 2 || c.failed.Load() != 1 {
		t.Errorf("counted %d ok, %d failed; want 2, 1", c.ok.Load(), c.failed.Load())
	}
}

// Every policy passes over an ejected endpoint, as over a failing one.
func TestEjectedPassedOver(t *testing.T) {
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2},
		{Kind: resources.LBPickFirst},
		{Kind: resources.LBRingHash},
		{Kind: resources.LBWeightedRoundRobin},
	} {
		p := prio(endpoint.Ready, []uint32{1, 1, 1}).with(pol)
		d, clk := detector(p, *outlierConfigOf(&clusterv3.OutlierDetection{}))
		d.eps[conn(p, 0)].ejectedAt = clk.now
		pp := p.picker(endpoint.Ready, testHeaderHash)
		for i := range 100 {
			res, err := pp.Pick(nil, uint64(i)*0x9e3779b97f4a7c15)
			if err != nil {
				t.Fatalf("%v: %v", pol.Kind, err)
			}
			if res.Endpoint.Key() == "a" {
				t.Fatalf("%+v: the ejected endpoint was picked", pol)
			}
		}
	}
}
