package cluster

import (
	"errors"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/resources"
)

// The algorithms are dataplane/outlier's, tested there; these tests are
// about what a cluster does with a detector.

// ejectFailing is outlier detection ejecting, at the end of each 1s
// interval, every endpoint that failed more than half of its requests, up to
// all of them, for a minute.
var ejectFailing = outlier.Config{Interval: time.Second, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Minute,
	MaxEjectionPercent: 100, FailurePercentage: &outlier.FailurePercentage{Threshold: 50, Enforcement: 100, MinimumHosts: 1, RequestVolume: 1}}

// attachDetector gives p a detector with cfg on a manual clock, whose
// intervals end on the test's goroutine when it advances the clock.
func attachDetector(p *priority, cfg outlier.Config) (*outlier.Detector, *testClock) {
	clk := &testClock{now: time.Unix(1000, 0)}
	d := outlier.New(clk, func(f func() bool) { f() }, nil, "")
	d.Update(cfg, p.lb.Localities)
	p.lb.Ejected = d
	return d, clk
}

// withOutlierDetection gives p a detector with the default configuration.
func withOutlierDetection(p *priority) {
	attachDetector(p, *outlier.ConfigOf(&clusterv3.OutlierDetection{}))
}

func conn(p *priority, i int) *endpoint.Endpoint { return p.lb.Localities[0].Endpoints[i].Endpoint }

// eject has p's detector (ejectFailing's) eject the endpoints of the
// given indexes: each fails an RPC, the others succeed one, and the
// interval ends.
func eject(t *testing.T, p *priority, d *outlier.Detector, clk *testClock, failing ...int) {
	t.Helper()
	for i, e := range p.lb.Localities[0].Endpoints {
		ok := true
		for _, f := range failing {
			ok = ok && f != i
		}
		d.Record(e.Endpoint, ok)
	}
	clk.advance(time.Second)
	for _, i := range failing {
		if !d.Ejected(conn(p, i)) {
			t.Fatalf("endpoint %d, failing, not ejected", i)
		}
	}
}

// An ejected endpoint is failing to its priority's state: with others
// ready, the priority is ready; with every one ejected, it is
// TRANSIENT_FAILURE because of the ejection, and the next priority takes
// over.
func TestEjectedPriorityState(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1, 1, 1})
	d, clk := attachDetector(p, ejectFailing)
	eject(t, p, d, clk, 0)
	if got := picks(t, readyPicker(t, p), 20); got["a"] != 0 {
		t.Errorf("a ejected still picked: %v", got)
	}
	if s, err := p.state(map[*endpoint.Endpoint]struct{}{}); s != endpoint.Ready || err != nil {
		t.Errorf("priority with b and c ready: %v, %v", s, err)
	}
	eject(t, p, d, clk, 1, 2)
	if s, err := p.state(map[*endpoint.Endpoint]struct{}{}); s != endpoint.TransientFailure || !errors.Is(err, lbpolicy.ErrEjected) {
		t.Errorf("every endpoint ejected: %v, %v; want TRANSIENT_FAILURE", s, err)
	}
}

// The picker of a priority with outlier detection reports each request's
// outcome to its detector: any error is a failure, so an endpoint whose
// requests fail is ejected at the end of the interval, and one whose requests
// succeed is not.
func TestPickerCountsOutcomes(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1, 1, 1}).with(resources.LBPolicy{Kind: resources.LBRoundRobin})
	cfg := ejectFailing
	cfg.MaxEjectionPercent = 50
	d, clk := attachDetector(p, cfg)
	pp := p.picker(endpoint.Ready, testHeaderHash)
	for range 30 {
		res, err := pp.Pick(nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var rpcErr error
		if res.Endpoint.Key() == "a" {
			rpcErr = errors.New("boom")
		}
		res.Done.Finish(rpcErr, nil)
	}
	clk.advance(time.Second)
	if !d.Ejected(conn(p, 0)) || d.Ejected(conn(p, 1)) || d.Ejected(conn(p, 2)) {
		t.Errorf("ejected a, b, c: %v, %v, %v; want only a, whose requests failed",
			d.Ejected(conn(p, 0)), d.Ejected(conn(p, 1)), d.Ejected(conn(p, 2)))
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
		d, clk := attachDetector(p, ejectFailing)
		eject(t, p, d, clk, 0)
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
