package grpcxds

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// errorPicker fails every RPC with err: a status error ends the RPC with
// that status; any other error fails it with UNAVAILABLE, or keeps a
// wait-for-ready RPC waiting.
type errorPicker struct{ err error }

func (p errorPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, p.err
}

func (p errorPicker) pick(balancer.PickInfo, uint64) (balancer.PickResult, error) {
	return balancer.PickResult{}, p.err
}

// queuePicker holds RPCs until the next picker.
type queuePicker struct{}

func (queuePicker) pick(balancer.PickInfo, uint64) (balancer.PickResult, error) {
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}

// endpointPicker picks among the endpoints of one priority.
type endpointPicker interface {
	pick(hash uint64) (balancer.PickResult, error)
}

// priorityPicker is the picker of a cluster using one of its priorities:
// it applies the leaf cluster's drops and circuit breaker, then lets the
// cluster's policy pick an endpoint. A nil inner queues RPCs: the
// priority is connecting.
type priorityPicker struct {
	leaf        string
	drops       []resources.DropOverload
	maxRequests uint32
	inflight    *atomic.Int64
	inner       endpointPicker
	// load, if not nil, records drops; locs then has the LocalityLoad of
	// each endpoint inner may pick.
	load    *client.ClusterLoad
	locs    map[balancer.SubConn]*client.LocalityLoad
	metrics *lrsMetrics
}

func (p *priorityPicker) pick(_ balancer.PickInfo, hash uint64) (balancer.PickResult, error) {
	for _, d := range p.drops {
		if d.PerMillion > 0 && rand.Uint32N(1_000_000) < d.PerMillion {
			if p.load != nil {
				p.load.CallDropped(d.Category)
			}
			return balancer.PickResult{}, status.Errorf(codes.Unavailable, "dropped by load balancing policy: %s", d.Category)
		}
	}
	if p.inner == nil {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	if p.inflight.Add(1) > int64(p.maxRequests) {
		p.inflight.Add(-1)
		if p.load != nil {
			p.load.CallDropped("") // counted in the total only, as gRPC does
		}
		return balancer.PickResult{}, status.Errorf(codes.Unavailable,
			"goxds: cluster %q: %d requests in flight, the circuit breaker's max_requests", p.leaf, p.maxRequests)
	}
	res, err := p.inner.pick(hash)
	if err != nil {
		p.inflight.Add(-1)
		return res, err
	}
	done := res.Done
	ll := p.locs[res.SubConn] // nil without load reporting
	if ll != nil {
		ll.CallStarted()
	}
	res.Done = func(di balancer.DoneInfo) {
		p.inflight.Add(-1)
		if ll != nil {
			ll.CallFinished(di.Err != nil)
			if r, ok := di.ServerLoad.(*v3orcapb.OrcaLoadReport); ok && r != nil && p.metrics != nil {
				p.metrics.record(ll, r)
			}
		}
		if done != nil {
			done(di)
		}
	}
	return res, nil
}

// picker returns the picker of p for a cluster using it in state (READY or
// CONNECTING), by the leaf cluster's policy.
func (p *priority) picker(state connectivity.State) clusterPicker {
	pp := &priorityPicker{leaf: p.leaf, drops: p.drops, maxRequests: p.maxRequests, inflight: p.inflight, load: p.load, metrics: p.metrics}
	if state != connectivity.Ready {
		return pp
	}
	pp.locs = p.localityLoads()
	switch p.policy.Kind {
	case resources.LBRingHash:
		pp.inner = p.ringPicker()
	case resources.LBLeastRequest:
		pp.inner = &leastRequestPicker{eps: p.readyEndpoints(), choices: int(p.policy.ChoiceCount)}
	default:
		pp.inner = newWRRPicker(p.readyEndpoints())
	}
	return pp
}

// readyEndpoint is an endpoint a picker may hand out, with its share of
// the priority's traffic.
type readyEndpoint struct {
	sc     balancer.SubConn
	conn   *endpointConn
	weight float64
}

// readyEndpoints returns the ready endpoints of p. Each one's weight is its
// locality's share among localities with a ready endpoint, times its own
// share among the ready endpoints of its locality: locality weights times
// endpoint weights, as the traffic can only go to ready endpoints.
func (p *priority) readyEndpoints() []readyEndpoint {
	var out []readyEndpoint
	var locSum float64
	type span struct {
		from, to int
		weight   float64
		epSum    float64
	}
	var spans []span
	for _, l := range p.localities {
		s := span{from: len(out), weight: float64(l.weight)}
		for _, e := range l.endpoints {
			if e.conn.state == connectivity.Ready && e.conn.sc != nil {
				out = append(out, readyEndpoint{sc: e.conn.sc, conn: e.conn, weight: float64(e.weight)})
				s.epSum += float64(e.weight)
			}
		}
		s.to = len(out)
		if s.to > s.from {
			spans = append(spans, s)
			locSum += s.weight
		}
	}
	for _, s := range spans {
		for i := s.from; i < s.to; i++ {
			out[i].weight = s.weight / locSum * out[i].weight / s.epSum
		}
	}
	return out
}

// newWRRPicker returns a weighted round robin over eps (not empty): plain
// round robin when the weights are equal, else earliest deadline first.
func newWRRPicker(eps []readyEndpoint) endpointPicker {
	equal := true
	for _, e := range eps[1:] {
		if e.weight != eps[0].weight {
			equal = false
			break
		}
	}
	if equal {
		rr := &rrPicker{eps: eps}
		rr.next.Store(rand.Uint32()) // pickers are rebuilt often: start anywhere
		return rr
	}
	h := make(edfHeap, len(eps))
	for i, e := range eps {
		period := 1 / e.weight
		h[i] = edfItem{ep: e, period: period, deadline: period * rand.Float64(), order: i}
	}
	heap.Init(&h)
	return &edfPicker{h: h}
}

type rrPicker struct {
	eps  []readyEndpoint
	next atomic.Uint32
}

func (p *rrPicker) pick(uint64) (balancer.PickResult, error) {
	e := p.eps[int(p.next.Add(1)%uint32(len(p.eps)))]
	return balancer.PickResult{SubConn: e.sc}, nil
}

// edfPicker serves each endpoint in turn at intervals of 1/weight: the one
// whose next deadline is earliest goes next.
type edfPicker struct {
	mu sync.Mutex
	h  edfHeap
}

func (p *edfPicker) pick(uint64) (balancer.PickResult, error) {
	p.mu.Lock()
	it := &p.h[0]
	sc := it.ep.sc
	it.deadline += it.period
	heap.Fix(&p.h, 0)
	p.mu.Unlock()
	return balancer.PickResult{SubConn: sc}, nil
}

type edfItem struct {
	ep               readyEndpoint
	deadline, period float64
	order            int // breaks ties, in the order of the endpoints
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

// leastRequestPicker draws choices endpoints at random and picks the one
// with the fewest RPCs in flight (gRFC A48); weights do not count.
type leastRequestPicker struct {
	eps     []readyEndpoint
	choices int
}

func (p *leastRequestPicker) pick(uint64) (balancer.PickResult, error) {
	best := p.eps[rand.IntN(len(p.eps))]
	for i := 1; i < p.choices; i++ {
		if e := p.eps[rand.IntN(len(p.eps))]; e.conn.inflight.Load() < best.conn.inflight.Load() {
			best = e
		}
	}
	best.conn.inflight.Add(1)
	return balancer.PickResult{
		SubConn: best.sc,
		Done:    func(balancer.DoneInfo) { best.conn.inflight.Add(-1) },
	}, nil
}
