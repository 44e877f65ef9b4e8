package lbpolicy

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/goxds/xds/dataplane/endpoint"
)

// Picker picks an endpoint for a request. Pickers are immutable but for
// their own turn counters, safe for concurrent use, and never read the
// pool: a picker keeps the endpoints' connections as they were when it
// was built, and a new one is built when a state changes.
type Picker interface {
	// Pick chooses the endpoint of a request whose hash (ring_hash's) is
	// hash. Its errors are ErrQueue, or a reason to fail the request (an
	// endpoint's connection error, ErrEjected, ErrAllFailing).
	Pick(hash uint64) (Picked, error)
}

// Picked is an endpoint a picker chose.
type Picked struct {
	Endpoint *endpoint.Endpoint
	// Conn is the endpoint's connection when the picker was built; the
	// endpoint may have another since, or none. A transport handed one
	// it has shut down picks again from the next picker.
	Conn endpoint.Conn
	// Counted: the pick counted a request in flight on the endpoint
	// (least_request), and the caller must call Endpoint.CallFinished
	// when the request ends.
	Counted bool
	// Load, if not nil, takes the endpoint's load report from the end of
	// the request (weighted_round_robin's per-request reports, gRFC A58):
	// the transport hands it the report the response carried.
	Load *EndpointWeight
}

var (
	// ErrQueue: no endpoint can take the request yet, but one is
	// expected to (connecting): the transport holds the request for the
	// next picker (gRPC: balancer.ErrNoSubConnAvailable).
	ErrQueue = errors.New("no endpoint ready yet")
	// ErrIdle: the policy connects nothing until a request asks
	// (pick_first after its endpoint lost its connection, gRFC A62): the
	// owner calls Leaf.ExitIdle, under its lock, and the transport holds
	// the request for the next picker, as for ErrQueue.
	ErrIdle = errors.New("idle: connecting on this request")
	// ErrAllFailing: every endpoint of a ring is failing, none with an
	// error of its own to give.
	ErrAllFailing = errors.New("every endpoint is failing")
	// ErrEjected is why an endpoint outlier detection ejected takes no
	// requests.
	ErrEjected = errors.New("ejected by outlier detection")
)

type rrPicker struct {
	eps  []Picked
	next atomic.Uint32
}

func (p *rrPicker) Pick(uint64) (Picked, error) {
	return p.eps[int(p.next.Add(1)%uint32(len(p.eps)))], nil
}

// leastRequestPicker draws choices endpoints at random and picks the one
// with the fewest requests in flight (gRFC A48); weights do not count.
type leastRequestPicker struct {
	eps     []Picked
	choices int
}

func (p *leastRequestPicker) Pick(uint64) (Picked, error) {
	best := p.eps[rand.IntN(len(p.eps))]
	for i := 1; i < p.choices; i++ {
		if e := p.eps[rand.IntN(len(p.eps))]; e.Endpoint.InFlight() < best.Endpoint.InFlight() {
			best = e
		}
	}
	best.Endpoint.CallStarted()
	best.Counted = true
	return best, nil
}

// weightedPicker is a locality's picker and weight.
type weightedPicker struct {
	picker Picker
	weight float64
}

// newLocalityPicker returns the picker that draws a locality by weight and
// lets its picker pick: plain turns when the weights are equal, else
// earliest deadline first, which keeps each locality's share exact over
// any run of requests (gRPC draws at random, with the same shares).
func newLocalityPicker(children []weightedPicker) Picker {
	if len(children) == 1 {
		return children[0].picker
	}
	var sum float64
	for _, c := range children {
		sum += c.weight
	}
	h := make(edfHeap, len(children))
	for i, c := range children {
		period := sum / c.weight
		h[i] = edfItem{child: c.picker, period: period, deadline: period * rand.Float64(), order: i}
	}
	heap.Init(&h)
	return &edfPicker{h: h}
}

// edfPicker serves each child in turn at intervals of 1/weight: the one
// whose next deadline is earliest goes next.
type edfPicker struct {
	mu sync.Mutex
	h  edfHeap
}

func (p *edfPicker) Pick(hash uint64) (Picked, error) {
	p.mu.Lock()
	it := &p.h[0]
	child := it.child
	it.deadline += it.period
	heap.Fix(&p.h, 0)
	p.mu.Unlock()
	return child.Pick(hash)
}

type edfItem struct {
	child            Picker
	deadline, period float64
	order            int // breaks ties, in the order of the children
}

type edfHeap []edfItem

func (h edfHeap) Len() int { return len(h) }
func (h edfHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].order < h[j].order
}
func (h edfHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *edfHeap) Push(x any)   { *h = append(*h, x.(edfItem)) }
func (h *edfHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
