package lbpolicy

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// Under wrr_locality (or the legacy ROUND_ROBIN) localities share the
// traffic by weight and round_robin shares each locality's part evenly,
// endpoint weights aside, as in gRPC: locality 1 (weight 1) holds a:1 and
// b:3, locality 2 (weight 2) holds c:1, so a and b get 1/6 each, c 2/3.
func TestPickerWRRLocalityRoundRobin(t *testing.T) {
	for _, kind := range []resources.LBPolicyKind{resources.LBRoundRobin, resources.LBWeightedRoundRobin} {
		l := leaf(endpoint.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: kind, WRRLocality: true})
		const n = 12000
		got := picks(t, readyPicker(t, l), n)
		for name, want := range map[string]int{"a": 2000, "b": 2000, "c": 8000} {
			if !within(got[name], want, 2) {
				t.Errorf("%v: %s picked %d times of %d, want %d", kind, name, got[name], n, want)
			}
		}
	}
}

// Without wrr_locality round_robin (and weighted_round_robin without ORCA
// reports) spreads requests evenly over the priority, whatever the
// weights.
func TestRoundRobinIgnoresWeights(t *testing.T) {
	for _, kind := range []resources.LBPolicyKind{resources.LBRoundRobin, resources.LBWeightedRoundRobin} {
		l := leaf(endpoint.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: kind})
		got := picks(t, readyPicker(t, l), 300)
		if got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
			t.Errorf("%v over 3 endpoints: %v, want 100 each", kind, got)
		}
	}
}

// Only ready endpoints count, and a locality with none gives up its share.
func TestOnlyReadyEndpoints(t *testing.T) {
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2, WRRLocality: true},
		{Kind: resources.LBPickFirst, WRRLocality: true},
		{Kind: resources.LBRingHash, WRRLocality: true},
		{Kind: resources.LBRoundRobin},
		{Kind: resources.LBPickFirst},
	} {
		l := leaf(endpoint.Ready, []uint32{1, 1}, []uint32{1}).with(pol)
		l.set(l.ep(0, 0), endpoint.TransientFailure)
		l.set(l.ep(1, 0), endpoint.Connecting)
		if got := picks(t, readyPicker(t, l), 30); got["b"] != 30 {
			t.Errorf("%+v: %v, want b alone", pol, got)
		}
	}
}

// With no ready endpoint there is no picker, whatever the policy.
func TestNoReadyEndpointNoPicker(t *testing.T) {
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2},
		{Kind: resources.LBPickFirst},
		{Kind: resources.LBRingHash},
	} {
		if p := leaf(endpoint.Connecting, []uint32{1, 1}).with(pol).Picker(); p != nil {
			t.Errorf("%+v with every endpoint connecting: picker %T, want none", pol, p)
		}
	}
}

// wrr_locality over least_request: localities by weight, then the less
// loaded of two within the locality.
func TestPickerWRRLocalityLeastRequest(t *testing.T) {
	l := leaf(endpoint.Ready, []uint32{1, 1}, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBLeastRequest, ChoiceCount: 2, WRRLocality: true})
	got := picks(t, readyPicker(t, l), 3000)
	if loc1 := got["a"] + got["b"]; !within(loc1, 1000, 2) {
		t.Errorf("locality 1 (weight 1 of 3) got %d of 3000: %v", loc1, got)
	}
}

// least_request counts a request in flight on the endpoint it picks,
// which the caller finishes, and of the endpoints it draws picks the one
// with the fewest in flight (gRFC A48). With choice_count 64 over two
// endpoints, both are drawn but with odds of 2^-63.
func TestLeastRequestCountsInFlight(t *testing.T) {
	l := leaf(endpoint.Ready, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBLeastRequest, ChoiceCount: 64})
	p := readyPicker(t, l)
	first, err := p.Pick(0)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Counted || first.Endpoint.InFlight() != 1 {
		t.Fatalf("pick: counted %v, %d in flight; want counted, 1", first.Counted, first.Endpoint.InFlight())
	}
	for range 10 {
		next, err := p.Pick(0)
		if err != nil {
			t.Fatal(err)
		}
		if next.Endpoint == first.Endpoint {
			t.Fatalf("picked %s, with 1 request in flight, over an endpoint with none", next.Endpoint.Key())
		}
		next.Endpoint.CallFinished()
	}
	first.Endpoint.CallFinished()
	if n := first.Endpoint.InFlight(); n != 0 {
		t.Errorf("%d in flight after the request finished, want 0", n)
	}
	// choice_count 1 is a random pick: both endpoints get some.
	l.with(resources.LBPolicy{Kind: resources.LBLeastRequest, ChoiceCount: 1})
	l.groups = nil
	if got := picks(t, readyPicker(t, l), 200); got["a"] == 0 || got["b"] == 0 {
		t.Errorf("choice_count 1 over two idle endpoints: %v, want both picked", got)
	}
}

// pick_first sends everything to the first ready endpoint and stays on it
// while it is ready; under wrr_locality there is one per locality.
func TestPickFirst(t *testing.T) {
	l := leaf(endpoint.Ready, []uint32{1, 1}, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBPickFirst})
	if got := picks(t, readyPicker(t, l), 10); got["a"] != 10 {
		t.Errorf("pick_first: %v, want all to a", got)
	}
	a := l.ep(0, 0)
	l.set(a, endpoint.Idle)
	// Its connection lost, pick_first is idle until a request asks
	// (gRFC A62): then a, failing, is passed over.
	if _, err := readyPicker(t, l).Pick(0); err != ErrIdle {
		t.Fatalf("pick_first with a lost: %v, want ErrIdle", err)
	}
	l.set(a, endpoint.TransientFailure)
	if !l.ExitIdle() {
		t.Fatal("ExitIdle found no idle group")
	}
	if got := picks(t, readyPicker(t, l), 10); got["b"] != 10 {
		t.Errorf("pick_first with a failing: %v, want all to b", got)
	}
	l.set(a, endpoint.Ready)
	if got := picks(t, readyPicker(t, l), 10); got["b"] != 10 {
		t.Errorf("pick_first with a back: %v, want it to stay on b", got)
	}
	// The endpoints are tried in order: one connecting is waited for,
	// even if one after it is ready, for 250ms per endpoint (Happy
	// Eyeballs): a and b connecting, c and d ready, c is chosen after
	// 500ms.
	q := leaf(endpoint.Ready, []uint32{1, 1, 1, 1}).with(resources.LBPolicy{Kind: resources.LBPickFirst})
	clk := &fakeClock{now: time.Unix(1000, 0)}
	q.Clock = clk
	q.set(q.ep(0, 0), endpoint.Connecting)
	q.set(q.ep(0, 1), endpoint.Connecting)
	for _, wait := range []time.Duration{0, 249 * time.Millisecond, 250 * time.Millisecond, 499 * time.Millisecond} {
		clk.now = time.Unix(1000, 0).Add(wait)
		if p := q.Picker(); p != nil {
			t.Errorf("pick_first chose an endpoint after %v while a, before it, is connecting", wait)
		}
	}
	clk.now = time.Unix(1000, 0).Add(500 * time.Millisecond)
	if got := picks(t, readyPicker(t, q), 10); got["c"] != 10 {
		t.Errorf("pick_first after 500ms with a and b connecting: %v, want c", got)
	}
	// A new leaf from an update keeps the endpoint chosen before.
	l2 := &testLeaf{Leaf: &Leaf{Policy: l.Policy, Localities: l.Localities, Before: l.Carry(nil)}, pool: l.pool}
	if got := picks(t, readyPicker(t, l2), 10); got["b"] != 10 {
		t.Errorf("pick_first after an update: %v, want it to stay on b", got)
	}

	l = leaf(endpoint.Ready, []uint32{1, 1}, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBPickFirst, WRRLocality: true})
	got := picks(t, readyPicker(t, l), 3000)
	if got["b"] != 0 || got["d"] != 0 || !within(got["a"], 1000, 2) || !within(got["c"], 2000, 2) {
		t.Errorf("wrr_locality over pick_first, localities 1:2: %v, want a 1000 and c 2000", got)
	}
}

// While pick_first waits for an endpoint still connecting, its timer asks
// the owner (Repick) for a new picker when the next endpoint's turn
// comes; the picker then chooses it.
func TestPickFirstHappyEyeballsTimer(t *testing.T) {
	l := leaf(endpoint.Ready, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBPickFirst})
	clk := &fakeClock{now: time.Unix(1000, 0)}
	l.Clock = clk
	var picker Picker
	repicks := 0
	l.Repick = func(f func()) {
		f()
		repicks++
		picker = l.Picker()
	}
	l.set(l.ep(0, 0), endpoint.Connecting)
	if picker = l.Picker(); picker != nil {
		t.Fatal("pick_first chose b at once while a, before it, is connecting")
	}
	clk.advance(HappyEyeballsDelay - time.Millisecond)
	if repicks != 0 {
		t.Fatalf("repicked %d times before a's turn ended", repicks)
	}
	clk.advance(time.Millisecond)
	if repicks != 1 || picker == nil {
		t.Fatalf("after a's turn: %d repicks, picker %v; want 1 and b's", repicks, picker)
	}
	if got := picks(t, picker, 5); got["b"] != 5 {
		t.Errorf("after a's turn: %v, want b", got)
	}
}

// shuffle_address_list draws the order anew for each leaf, an endpoint
// coming first in proportion to its weight (gRFC A113).
func TestPickFirstWeightedShuffle(t *testing.T) {
	const n = 4000
	first := make(map[string]int)
	for range n {
		l := leaf(endpoint.Ready, []uint32{1, 3}).with(resources.LBPolicy{Kind: resources.LBPickFirst, ShuffleAddressList: true})
		res, err := readyPicker(t, l).Pick(0)
		if err != nil {
			t.Fatal(err)
		}
		first[res.Endpoint.Key()]++
	}
	// b (weight 3 of 4) comes first 75% of the time: 3000 ± 5 sigma.
	if !within(first["b"], 3000, 140) {
		t.Errorf("b first %d times of %d, want about 3000", first["b"], n)
	}
}

func TestRing(t *testing.T) {
	l := leaf(endpoint.Ready, []uint32{1, 3}).with(resources.LBPolicy{Kind: resources.LBRingHash})
	ring := buildRing(l.endpointGroups()[0].eps, 1024, 8<<20)
	if len(ring) != 1024 {
		t.Errorf("ring of %d entries for weights 1:3 and the default sizes, want 1024", len(ring))
	}
	owned := make(map[int]int)
	for i, e := range ring {
		owned[e.ep]++
		if i > 0 && ring[i-1].hash > e.hash {
			t.Fatal("ring not sorted")
		}
	}
	if math.Abs(float64(owned[1])/float64(len(ring))-0.75) > 0.01 {
		t.Errorf("b owns %d of %d points, want 75%%", owned[1], len(ring))
	}
	for _, tc := range []struct{ min, max, want uint64 }{
		{4, 10, 4},
		{1 << 20, 8 << 20, RingSizeCap},
		{3, 3, 3}, // weights need 4 for a whole point each; max wins
	} {
		if got := len(buildRing(l.endpointGroups()[0].eps, tc.min, tc.max)); uint64(got) != tc.want {
			t.Errorf("ring sized %d..%d for weights 1:3 has %d entries, want %d", tc.min, tc.max, got, tc.want)
		}
	}
	// Without wrr_locality the ring weighs locality shares times endpoint
	// shares; with it, each locality has its own ring by endpoint weights.
	l = leaf(endpoint.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: resources.LBRingHash})
	if eps := l.endpointGroups()[0].eps; len(eps) != 3 || eps[0].weight != 1.0/12 || eps[1].weight != 3.0/12 || eps[2].weight != 2.0/3 {
		t.Errorf("ring weights %+v, want 1/12, 3/12, 2/3", eps)
	}
	l = leaf(endpoint.Ready, []uint32{1, 3}, []uint32{1}).with(resources.LBPolicy{Kind: resources.LBRingHash, WRRLocality: true})
	if gs := l.endpointGroups(); len(gs) != 2 || gs[0].weight != 1 || gs[0].eps[1].weight != 0.75 || gs[1].weight != 2 || gs[1].eps[0].weight != 1 {
		t.Errorf("wrr_locality ring groups %+v", gs)
	}

	// The owner of the hash takes the request; if it is connecting, the
	// request waits; if it fails, the next ready endpoint takes it.
	l = leaf(endpoint.Ready, []uint32{1, 1}).with(resources.LBPolicy{Kind: resources.LBRingHash})
	rp := l.ringPicker(l.endpointGroups()[0]).(*ringPicker)
	h := rp.ring[0].hash
	owner := rp.ring[0].ep
	if res, err := rp.Pick(h); err != nil || res.Endpoint != rp.eps[owner].p.Endpoint {
		t.Errorf("pick(%x) = %v, %v; want the owner", h, res.Endpoint, err)
	}
	rp.eps[owner].state = endpoint.Connecting
	if _, err := rp.Pick(h); !errors.Is(err, ErrQueue) {
		t.Errorf("owner connecting: %v; want the request queued", err)
	}
	rp.eps[owner].state = endpoint.TransientFailure
	if res, err := rp.Pick(h); err != nil || res.Endpoint != rp.eps[1-owner].p.Endpoint {
		t.Errorf("owner failing: %v, %v; want the other endpoint", res.Endpoint, err)
	}
	refused := errors.New("refused")
	rp.eps[1-owner].state, rp.eps[1-owner].err = endpoint.TransientFailure, errors.New("timeout")
	if _, err := rp.Pick(h); !errors.Is(err, ErrAllFailing) {
		t.Errorf("every endpoint failing, the owner without an error: %v, want ErrAllFailing", err)
	}
	rp.eps[owner].err = refused
	if _, err := rp.Pick(h); err != refused {
		t.Errorf("every endpoint failing: %v, want the owner's error", err)
	}
}

// ejectAll is an outlier detection that ejected the endpoints in it.
type ejectAll map[*endpoint.Endpoint]bool

func (e ejectAll) Ejected(ep *endpoint.Endpoint) bool { return e[ep] }

// Every policy passes over an ejected endpoint, as over a failing one; to
// ring_hash it fails with ErrEjected.
func TestEjectedPassedOver(t *testing.T) {
	for _, pol := range []resources.LBPolicy{
		{Kind: resources.LBRoundRobin, WRRLocality: true},
		{Kind: resources.LBLeastRequest, ChoiceCount: 2},
		{Kind: resources.LBPickFirst},
		{Kind: resources.LBRingHash},
		{Kind: resources.LBWeightedRoundRobin},
	} {
		l := leaf(endpoint.Ready, []uint32{1, 1, 1}).with(pol)
		l.Ejected = ejectAll{l.ep(0, 0): true}
		p := readyPicker(t, l)
		for i := range 100 {
			res, err := p.Pick(uint64(i) * 0x9e3779b97f4a7c15)
			if err != nil {
				t.Fatalf("%v: %v", pol.Kind, err)
			}
			if res.Counted {
				res.Endpoint.CallFinished()
			}
			if res.Endpoint.Key() == "a" {
				t.Fatalf("%+v: the ejected endpoint was picked", pol)
			}
		}
	}
	l := leaf(endpoint.Ready, []uint32{1}).with(resources.LBPolicy{Kind: resources.LBRingHash})
	l.Ejected = ejectAll{l.ep(0, 0): true}
	if p := l.Picker(); p != nil {
		t.Errorf("ring_hash with its one endpoint ejected: picker %T, want none", p)
	}
	rp := l.ringPicker(l.endpointGroups()[0])
	if _, err := rp.Pick(0); !errors.Is(err, ErrEjected) {
		t.Errorf("ring of one ejected endpoint: %v, want ErrEjected", err)
	}
}
