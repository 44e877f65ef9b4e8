package lbpolicy

import (
	"math"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// wrrConfig is A58's defaults but for blackout, given.
func wrrConfig(blackout time.Duration) resources.WRRConfig {
	return resources.WRRConfig{BlackoutPeriod: blackout, WeightExpirationPeriod: 3 * time.Minute,
		WeightUpdatePeriod: time.Second, ErrorUtilizationPenalty: 1}
}

// A weight is QPS / (utilization + EPS/QPS × penalty), the application's
// utilization preferred to the CPU's; a report without QPS or without
// utilization is ignored; a weight counts after blackout_period of
// reports, and not once weight_expiration_period passes without one, and
// then sits out the blackout again.
func TestEndpointWeight(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	cfg := wrrConfig(10 * time.Second)
	w := &EndpointWeight{clock: clk, penalty: 2}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

	w.Report(LoadReport{QPS: 100, CPUUtilization: 0})
	w.Report(LoadReport{QPS: 0, CPUUtilization: 0.5})
	if got := w.value(clk.now.Add(time.Hour), &cfg); got != 0 || !w.lastUpdated.IsZero() {
		t.Fatalf("reports without utilization or QPS: weight %v, last report %v; want none", got, w.lastUpdated)
	}
	w.Report(LoadReport{QPS: 100, EPS: 10, CPUUtilization: 0.5})
	if got := w.value(clk.now, &cfg); got != 0 {
		t.Errorf("weight in its blackout: %v, want 0", got)
	}
	clk.now = clk.now.Add(10 * time.Second)
	if got := w.value(clk.now, &cfg); !near(got, 100/(0.5+0.1*2)) {
		t.Errorf("weight after the blackout: %v, want %v", got, 100/(0.5+0.1*2))
	}
	w.Report(LoadReport{QPS: 100, ApplicationUtilization: 0.25, CPUUtilization: 0.9})
	if got := w.value(clk.now, &cfg); !near(got, 400) {
		t.Errorf("weight with the application's utilization: %v, want 400 (its 0.25, not the CPU's 0.9)", got)
	}
	clk.now = clk.now.Add(3 * time.Minute)
	if got := w.value(clk.now, &cfg); got != 0 {
		t.Errorf("weight 3 minutes after the last report: %v, want 0 (expired)", got)
	}
	w.Report(LoadReport{QPS: 100, CPUUtilization: 0.5})
	if got := w.value(clk.now, &cfg); got != 0 {
		t.Errorf("weight of a report after expiry: %v, want 0 (a new blackout)", got)
	}
}

// wrrLeaf is a leaf under weighted_round_robin over n ready endpoints,
// with cfg and a fake clock.
func wrrLeaf(n int, cfg resources.WRRConfig) (*testLeaf, *fakeClock) {
	return wrrLeafWith(fakeDialer{}, n, cfg)
}

// wrrLeafWith is wrrLeaf with connections made by d.
func wrrLeafWith(d fakeDialer, n int, cfg resources.WRRConfig) (*testLeaf, *fakeClock) {
	eps := make([]uint32, n)
	for i := range eps {
		eps[i] = 1
	}
	l := leafWith(d, endpoint.Ready, eps).with(resources.LBPolicy{Kind: resources.LBWeightedRoundRobin, WRR: cfg})
	clk := &fakeClock{now: time.Unix(1000, 0)}
	l.Clock = clk
	return l, clk
}

// pickAndReport makes n picks, reporting for each endpoint the load of
// loads (by name) at the end of each request, and counts the picks.
func pickAndReport(t *testing.T, p Picker, n int, loads map[string]LoadReport) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		res, err := p.Pick(0)
		if err != nil {
			t.Fatal(err)
		}
		got[res.Endpoint.Key()]++
		if r, ok := loads[res.Endpoint.Key()]; ok {
			if res.Load == nil {
				t.Fatal("a pick of weighted_round_robin with per-request reports has no Load")
			}
			res.Load.Report(r)
		}
	}
	return got
}

// With per-request reports, weighted_round_robin picks in proportion to
// the weights, once the picker's update period has passed; an endpoint
// that reports nothing takes the mean of the others.
func TestWRRPerRequestWeights(t *testing.T) {
	l, clk := wrrLeaf(3, wrrConfig(0))
	p := readyPicker(t, l)
	loads := map[string]LoadReport{"a": {QPS: 100, CPUUtilization: 1}, "b": {QPS: 300, CPUUtilization: 1}}
	got := pickAndReport(t, p, 300, loads)
	if got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
		t.Errorf("picks before the first weight update: %v, want a round robin", got)
	}
	clk.advance(time.Second)
	const n = 60000
	got = pickAndReport(t, p, n, loads)
	// Weights 100, 300 and (the mean) 200: a sixth, half, a third.
	for name, want := range map[string]float64{"a": 1.0 / 6, "b": 1.0 / 2, "c": 1.0 / 3} {
		if share := float64(got[name]) / n; math.Abs(share-want) > 0.005 {
			t.Errorf("%s: %.4f of the picks (%v), want %.4f", name, share, got, want)
		}
	}
}

// The picker's updates run while it picks, and stop when the leaf
// replaces it or closes: no timer is left behind.
func TestWRRUpdatesStop(t *testing.T) {
	l, clk := wrrLeaf(2, wrrConfig(0))
	running := func() int {
		n := 0
		for _, tm := range clk.timers {
			if !tm.stopped {
				n++
			}
		}
		return n
	}
	p := readyPicker(t, l)
	if running() != 0 {
		t.Fatal("a weight update armed before any pick")
	}
	picks(t, p, 1)
	if running() != 1 {
		t.Fatalf("%d weight updates armed after a pick, want 1", running())
	}
	clk.advance(time.Second)
	if running() != 1 {
		t.Fatalf("%d weight updates armed after an update with a pick since, want 1", running())
	}
	clk.advance(time.Second)
	if running() != 0 {
		t.Fatalf("%d weight updates armed after a period without picks, want none", running())
	}
	picks(t, p, 1)
	readyPicker(t, l) // replaces p
	clk.advance(time.Second)
	picks(t, p, 1) // a pick still in flight on the old picker
	clk.advance(time.Second)
	if running() != 0 {
		t.Errorf("the replaced picker's updates still run: %d", running())
	}
}

// With enable_oob_load_report, the leaf watches each ready endpoint's
// out-of-band reports at oob_reporting_period (and picks carry no Load),
// stops the watch of one no longer ready, and stops every watch on Close.
func TestWRROutOfBand(t *testing.T) {
	cfg := wrrConfig(0)
	cfg.EnableOOBLoadReport, cfg.OOBReportingPeriod = true, 5*time.Second
	watching := make(map[string]*EndpointWeight)
	l, clk := wrrLeafWith(fakeDialer{watch: func(name string, period time.Duration, w *EndpointWeight) func() {
		if period != 5*time.Second {
			t.Errorf("watch of %s every %v, want 5s", name, period)
		}
		if watching[name] != nil {
			t.Errorf("a second watch of %s", name)
		}
		watching[name] = w
		return func() { delete(watching, name) }
	}}, 2, cfg)
	p := readyPicker(t, l)
	if len(watching) != 2 {
		t.Fatalf("watching %v, want a and b", watching)
	}
	if res, _ := p.Pick(0); res.Load != nil {
		t.Error("a pick with out-of-band reports carries a Load")
	}
	watching["a"].Report(LoadReport{QPS: 100, CPUUtilization: 1})
	watching["b"].Report(LoadReport{QPS: 300, CPUUtilization: 1})
	clk.advance(time.Second)
	if got := picks(t, p, 4000); got["b"] != 3000 {
		t.Errorf("picks with out-of-band weights 1:3: %v, want 1000 and 3000", got)
	}
	l.set(l.ep(0, 0), endpoint.TransientFailure)
	readyPicker(t, l)
	if _, ok := watching["a"]; ok || len(watching) != 1 {
		t.Errorf("watching %v with a failing, want b only", watching)
	}
	l.Close()
	if len(watching) != 0 {
		t.Errorf("watching %v after Close", watching)
	}
}

// A leaf of the next configuration keeps the weights of the endpoints it
// still lists (Before): no new blackout; an endpoint that becomes
// ready again starts with none.
func TestWRRWeightsCarryOver(t *testing.T) {
	l, clk := wrrLeaf(2, wrrConfig(10*time.Second))
	p := readyPicker(t, l)
	loads := map[string]LoadReport{"a": {QPS: 100, CPUUtilization: 1}, "b": {QPS: 300, CPUUtilization: 1}}
	pickAndReport(t, p, 10, loads)
	clk.now = clk.now.Add(10 * time.Second)
	pickAndReport(t, p, 10, loads)
	next := &testLeaf{Leaf: &Leaf{Policy: l.Policy, Localities: l.Localities, Clock: clk, Before: l.Carry(nil)}, pool: l.pool}
	l.Close()
	if got := picks(t, readyPicker(t, next), 4000); got["b"] != 3000 {
		t.Errorf("picks of the next configuration: %v, want 1000 and 3000 (weights kept)", got)
	}
	next.set(next.ep(0, 0), endpoint.Idle)
	readyPicker(t, next)
	next.set(next.ep(0, 0), endpoint.Ready)
	if got := picks(t, readyPicker(t, next), 4000); got["b"] != 2000 {
		t.Errorf("picks with a connected again: %v, want a round robin (a's weight forgotten)", got)
	}
}
