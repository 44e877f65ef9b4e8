package cluster

import (
	"errors"
	"hash/maphash"
	"testing"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/resources"
)

// fakeConn stands for a transport's connection in picker tests.
type fakeConn struct{}

func (fakeConn) Connect()  {}
func (fakeConn) Shutdown() {}

// fakeDialer makes an endpoint's connection a fakeConn.
type fakeDialer struct{}

func (fakeDialer) NewConn(*endpoint.Endpoint) (endpoint.Conn, error) { return fakeConn{}, nil }
func (fakeDialer) Dropped(*endpoint.Endpoint)                        {}

// headerSeed hashes the test requests' headers.
var headerSeed = maphash.MakeSeed()

// testHeaderHash is a Host's HeaderHash for requests that are a map of
// headers.
func testHeaderHash(req any, name string) uint64 {
	h, _ := req.(map[string]string)
	return maphash.String(headerSeed, h[name])
}

// prio builds a priority of one locality per weights entry, each with
// endpoints of the given weights, all in state. The endpoints' keys are
// "a", "b", ... in order.
func prio(state endpoint.State, localities ...[]uint32) *priority {
	p := &priority{leaf: "c", maxRequests: 1024, inflight: new(leafCounter),
		lb: lbpolicy.Leaf{Policy: &resources.LBPolicy{MinRingSize: 1024, MaxRingSize: 8 << 20}}}
	pool := endpoint.NewPool(fakeDialer{}, nil)
	n := 0
	for i, eps := range localities {
		l := lbpolicy.Locality{Weight: uint32(i + 1)}
		for _, w := range eps {
			c, _ := pool.Get([]string{string(rune('a' + n))}, "")
			n++
			pool.Want(c)
			pool.SetState(c, c.Conn(), state, nil)
			l.Endpoints = append(l.Endpoints, lbpolicy.WeightedEndpoint{Endpoint: c, Weight: w})
		}
		p.lb.Localities = append(p.lb.Localities, l)
	}
	return p
}

// picks makes n picks of the priority's picker and counts them by
// endpoint key. The requests are left unfinished, so that outlier
// detection counts none.
func picks(t *testing.T, cp Picker, n int) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		res, err := cp.Pick(nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		got[res.Endpoint.Key()]++
	}
	return got
}

// with sets p's policy and returns p.
func (p *priority) with(policy resources.LBPolicy) *priority {
	policy.MinRingSize, policy.MaxRingSize = 1024, 8<<20
	p.lb.Policy = &policy
	return p
}

func readyPicker(t *testing.T, p *priority) Picker {
	t.Helper()
	pp := p.picker(endpoint.Ready, testHeaderHash).(*priorityPicker)
	if pp.inner == nil {
		t.Fatal("no picker for a ready priority")
	}
	return pp
}

// ring_hash's requestHashHeader hashes the header, by the Host's
// HeaderHash, not the route's hash.
func TestRingRequestHashHeader(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1, 1, 1, 1}).with(resources.LBPolicy{Kind: resources.LBRingHash, RequestHashHeader: "x-user"})
	pp := p.picker(endpoint.Ready, testHeaderHash)
	seen := make(map[string]bool)
	for i := range 40 {
		res, err := pp.Pick(map[string]string{"x-user": "alice"}, uint64(i)*0x9e3779b97f4a7c15)
		if err != nil {
			t.Fatal(err)
		}
		seen[res.Endpoint.Key()] = true
	}
	if len(seen) != 1 {
		t.Errorf("one header value and 40 route hashes went to %v, want one endpoint", seen)
	}
}

// Drops come first; then the circuit breaker caps requests in flight.
func TestPriorityPicker(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1})
	p.maxRequests = 2
	pp := p.picker(endpoint.Ready, testHeaderHash)
	var dones []Done
	for range 2 {
		res, err := pp.Pick(nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, res.Done)
	}
	var over *OverloadError
	if _, err := pp.Pick(nil, 0); !errors.As(err, &over) || over.MaxRequests != 2 || over.Cluster != "c" ||
		err.Error() != `goxds: cluster "c": 2 requests in flight, the circuit breaker's max_requests` {
		t.Errorf("third request in flight with max_requests 2: %v; want the circuit breaker's OverloadError", err)
	}
	dones[0].Finish(nil, nil)
	if _, err := pp.Pick(nil, 0); err != nil {
		t.Errorf("after one request finished: %v", err)
	}

	p.drops = []resources.DropOverload{{Category: "lb", PerMillion: 1_000_000}}
	var drop *DropError
	if _, err := p.picker(endpoint.Connecting, testHeaderHash).Pick(nil, 0); !errors.As(err, &drop) || err.Error() != "dropped by load balancing policy: lb" {
		t.Errorf("drop: %v", err)
	}
	if _, err := p.picker(endpoint.Connecting, testHeaderHash).Pick(nil, 0); errors.Is(err, ErrQueue) {
		t.Errorf("a connecting priority queued a request its drops drop")
	}
	p.drops = nil
	if _, err := p.picker(endpoint.Connecting, testHeaderHash).Pick(nil, 0); err != ErrQueue {
		t.Errorf("pick in a connecting priority: %v, want ErrQueue", err)
	}
}

// A Done of no pick (the zero Done) does nothing.
func TestZeroDone(t *testing.T) {
	Done{}.Finish(errors.New("boom"), nil)
}

// Abandon gives back the place a pick took under the circuit breaker, as
// if the request had not been picked; the zero Done's does nothing.
func TestDoneAbandon(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1})
	p.maxRequests = 1
	pp := p.picker(endpoint.Ready, testHeaderHash)
	res, err := pp.Pick(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	res.Done.Abandon()
	if n := p.inflight.Load(); n != 0 {
		t.Fatalf("after Abandon: %d in flight, want 0", n)
	}
	if _, err := pp.Pick(nil, 0); err != nil {
		t.Errorf("pick after the only one was abandoned, with max_requests 1: %v", err)
	}
	Done{}.Abandon()
}

// Queue keeps the place a pick took under the circuit breaker until its
// Place is released: with max_requests 1, a request queued for a
// connection (gRFC A105) refuses the next one, and its release lets one
// in; what least_request counted is given back at once.
func TestDoneQueueHoldsPlace(t *testing.T) {
	p := prio(endpoint.Ready, []uint32{1})
	p.maxRequests = 1
	pp := p.picker(endpoint.Ready, testHeaderHash)
	res, err := pp.Pick(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	res.Endpoint.CallStarted() // as least_request counts a pick
	res.Done.counted = true
	h := res.Done.Queue()
	if n := res.Endpoint.InFlight(); n != 0 {
		t.Errorf("queued: least_request's count %d, want 0", n)
	}
	var overload *OverloadError
	if _, err := pp.Pick(nil, 0); !errors.As(err, &overload) {
		t.Fatalf("pick with one request queued, max_requests 1: %v, want the circuit breaker's refusal", err)
	}
	h.Release()
	if n := p.inflight.Load(); n != 0 {
		t.Fatalf("after Release: %d in flight, want 0", n)
	}
	if _, err := pp.Pick(nil, 0); err != nil {
		t.Errorf("pick after the queued one was released: %v", err)
	}
	Place{}.Release()
	if h := (Done{}).Queue(); h != (Place{}) {
		t.Errorf("the zero Done's Queue: %+v, want the zero Place", h)
	}
}
