package grpcxds

import (
	"cmp"
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

func (p errorPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	// The channel's picker while it has no configuration: tests hear of
	// its picks as of routePicker's (pickObserverKey).
	if observe, ok := info.Ctx.Value(pickObserverKey{}).(func(error)); ok {
		observe(p.err)
	}
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
	// hashHeader, when set, hashes the RPC instead of the route's hash
	// policies (ring_hash's requestHashHeader, gRFC A76).
	hashHeader string
	// outcomes counts the RPCs of each endpoint for outlier detection;
	// nil without it.
	outcomes map[balancer.SubConn]*odEndpoint
	inner    endpointPicker
	// load, if not nil, records drops; locs then has the LocalityLoad of
	// each endpoint inner may pick.
	load    *client.ClusterLoad
	locs    map[balancer.SubConn]*client.LocalityLoad
	metrics *lrsMetrics
}

func (p *priorityPicker) pick(info balancer.PickInfo, hash uint64) (balancer.PickResult, error) {
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
	if p.hashHeader != "" {
		hash = headerHash(info.Ctx, p.hashHeader)
	}
	res, err := p.inner.pick(hash)
	if err != nil {
		p.inflight.Add(-1)
		return res, err
	}
	done := res.Done
	od := p.outcomes[res.SubConn]
	ll := p.locs[res.SubConn] // nil without load reporting
	if ll != nil {
		ll.CallStarted()
	}
	res.Done = func(di balancer.DoneInfo) {
		p.inflight.Add(-1)
		if od != nil {
			od.record(di)
		}
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
// CONNECTING), by the leaf cluster's policy. Under wrr_locality (and the
// legacy ROUND_ROBIN, which gRPC reads as wrr_locality over round_robin) a
// locality with a ready endpoint is drawn by its weight, then the policy
// picks within it; otherwise the policy picks among all the endpoints of
// the priority, and locality weights count only where the policy itself
// weighs endpoints (ring_hash, pick_first's shuffle), as in gRPC.
func (p *priority) picker(state connectivity.State) clusterPicker {
	pp := &priorityPicker{leaf: p.leaf, drops: p.drops, maxRequests: p.maxRequests, inflight: p.inflight,
		hashHeader: p.policy.RequestHashHeader, load: p.load, metrics: p.metrics}
	if state != connectivity.Ready {
		return pp
	}
	pp.outcomes = p.od.counters()
	pp.locs = p.localityLoads()
	groups := p.endpointGroups()
	if !p.policy.WRRLocality {
		pp.inner = p.groupPicker(groups[0])
		return pp
	}
	var children []weightedPicker
	for _, g := range groups {
		if child := p.groupPicker(g); child != nil {
			children = append(children, weightedPicker{child, float64(g.weight)})
		}
	}
	if len(children) > 0 {
		pp.inner = newLocalityPicker(children)
	}
	return pp
}

// group is what one instance of the cluster's policy balances, as in
// gRPC's tree of policies: a locality under wrr_locality, else the whole
// priority. It lives as long as its priority (one EDS update), and is only
// touched under xdsBalancer.mu.
type group struct {
	weight uint32 // the locality's weight; 1 for a whole priority
	// eps are the endpoints in EDS order, or in pick_first's shuffled one.
	eps []groupEndpoint
	// ring is ring_hash's ring, built on first use.
	ring []ringEntry
	// chosen is pick_first's endpoint: it keeps the RPCs while it is
	// ready, even when an endpoint before it in the list becomes ready.
	chosen *endpointConn
	// waitStart is when pick_first began to wait for an endpoint still
	// connecting (zero when not waiting); waitTimer lets the next one in
	// when its turn comes.
	waitStart time.Time
	waitTimer stopper
}

// groupEndpoint is an endpoint of a group with its share of the group's
// traffic where a policy weighs endpoints: within a locality, its share of
// the endpoint weights; in a whole priority, its locality's share of the
// locality weights times that.
type groupEndpoint struct {
	conn   *endpointConn
	weight float64
}

// endpointGroups returns the groups of p, built on first use: one per
// locality under wrr_locality, else exactly one.
func (p *priority) endpointGroups() []*group {
	if p.groups != nil {
		return p.groups
	}
	var locSum float64
	for _, l := range p.localities {
		locSum += float64(l.weight)
	}
	whole := &group{weight: 1}
	for _, l := range p.localities {
		var epSum float64
		for _, e := range l.endpoints {
			epSum += float64(e.weight)
		}
		g := whole
		share := float64(l.weight) / locSum
		if p.policy.WRRLocality {
			g = &group{weight: l.weight}
			p.groups = append(p.groups, g)
			share = 1
		}
		for _, e := range l.endpoints {
			g.eps = append(g.eps, groupEndpoint{e.conn, share * float64(e.weight) / epSum})
		}
	}
	if !p.policy.WRRLocality || len(p.groups) == 0 {
		p.groups = []*group{whole}
	}
	if p.policy.Kind == resources.LBPickFirst && p.policy.ShuffleAddressList {
		for _, g := range p.groups {
			weightedShuffle(g.eps)
		}
	}
	return p.groups
}

// weightedShuffle orders eps at random, an endpoint's chance to come
// before the others in proportion to its weight (gRFC A113): each gets the
// key u^(1/weight) for a uniform u, and the keys are sorted largest first.
func weightedShuffle(eps []groupEndpoint) {
	keys := make(map[*endpointConn]float64, len(eps))
	for _, e := range eps {
		keys[e.conn] = math.Pow(rand.Float64(), 1/e.weight)
	}
	slices.SortStableFunc(eps, func(a, b groupEndpoint) int { return cmp.Compare(keys[b.conn], keys[a.conn]) })
}

// groupPicker returns the picker of the cluster's policy over g, nil when
// the policy has no ready endpoint in g.
func (p *priority) groupPicker(g *group) endpointPicker {
	switch p.policy.Kind {
	case resources.LBRingHash:
		if !g.anyReady(p) {
			return nil
		}
		return g.ringPicker(p)
	case resources.LBPickFirst:
		return g.pickFirst(p)
	}
	var ready []readyEndpoint
	for _, e := range g.eps {
		if p.ready(e.conn) {
			ready = append(ready, readyEndpoint{sc: e.conn.sc, conn: e.conn})
		}
	}
	if len(ready) == 0 {
		return nil
	}
	if p.policy.Kind == resources.LBLeastRequest {
		return &leastRequestPicker{eps: ready, choices: int(p.policy.ChoiceCount)}
	}
	// round_robin, and weighted_round_robin: gRPC's weights come from ORCA
	// load reports only, never from EDS, and until enough endpoints have
	// reported it spreads RPCs evenly. goxds reads no ORCA reports, so that
	// is what it does all along.
	rr := &rrPicker{eps: ready}
	rr.next.Store(rand.Uint32()) // pickers are rebuilt often: start anywhere
	return rr
}

// ready reports whether the policy may send RPCs to c: it is connected,
// and outlier detection has not ejected it.
func (p *priority) ready(c *endpointConn) bool {
	return c.state == connectivity.Ready && c.sc != nil && !c.removed && !p.od.ejected(c)
}

func (g *group) anyReady(p *priority) bool {
	for _, e := range g.eps {
		if p.ready(e.conn) {
			return true
		}
	}
	return false
}

// happyEyeballsDelay is how long pick_first waits for an endpoint still
// connecting before it lets the next one in the list be chosen as well
// (gRFC A61's Happy Eyeballs, as gRPC's pick_first does).
const happyEyeballsDelay = 250 * time.Millisecond

// pickFirst returns the picker sending every RPC to g's chosen endpoint,
// nil while it waits for one. The chosen one stays while it is ready (so
// does one chosen before this update, in p.pickedBefore): gRFC A62's
// pick_first keeps the connection it has. Else the endpoints are tried in
// order, as gRPC tries them: a failing one is passed over, the first
// ready one is chosen, and one still connecting is waited for, but each
// 250ms of waiting lets one more endpoint of the list in (Happy Eyeballs).
// (goxds connects them all at once; choosing whichever is ready first
// would not follow the order.)
func (g *group) pickFirst(p *priority) endpointPicker {
	if g.chosen != nil && !p.ready(g.chosen) {
		g.chosen = nil
	}
	for _, e := range g.eps {
		if g.chosen == nil && p.pickedBefore[e.conn] && p.ready(e.conn) {
			g.chosen = e.conn
		}
	}
	now := p.clk().Now()
	turns := 1
	if !g.waitStart.IsZero() {
		turns += int(now.Sub(g.waitStart) / happyEyeballsDelay)
	}
	waiting, more := false, false
	for _, e := range g.eps {
		if g.chosen != nil || e.conn.state == connectivity.TransientFailure || p.od.ejected(e.conn) {
			continue
		}
		if turns == 0 {
			more = true
			break
		}
		if p.ready(e.conn) {
			g.chosen = e.conn
			break
		}
		waiting = true
		turns--
	}
	if g.chosen != nil {
		g.waitStart = time.Time{}
		return onePicker{g.chosen.sc}
	}
	if waiting && g.waitStart.IsZero() {
		g.waitStart = now
	}
	if more && g.waitTimer == nil && p.repick != nil {
		next := happyEyeballsDelay - now.Sub(g.waitStart)%happyEyeballsDelay
		g.waitTimer = p.clk().AfterFunc(next, func() { p.repick(func() { g.waitTimer = nil }) })
	}
	return nil
}

// clk returns the clock of p's timers.
func (p *priority) clk() clock {
	if p.clock != nil {
		return p.clock
	}
	return realClock{}
}

// repickLocked returns the function that a timer of cl's priorities calls
// to have cl's picker built again: it runs f, then rebuilds, under mu.
func (b *xdsBalancer) repickLocked(cl *clusterLB) func(f func()) {
	return func(f func()) {
		b.mu.Lock()
		if b.closed || b.clusters[cl.name] != cl {
			b.mu.Unlock()
			return
		}
		f()
		b.dirty[cl] = struct{}{}
		b.finishAndUnlock()
	}
}

// pickedFirst returns the endpoints pick_first has chosen in cl.
func (cl *clusterLB) pickedFirst() map[*endpointConn]bool {
	var out map[*endpointConn]bool
	for _, p := range cl.prios {
		for _, g := range p.groups {
			if g.chosen != nil {
				if out == nil {
					out = make(map[*endpointConn]bool)
				}
				out[g.chosen] = true
			}
		}
	}
	return out
}

// onePicker sends every RPC to one SubConn.
type onePicker struct{ sc balancer.SubConn }

func (p onePicker) pick(uint64) (balancer.PickResult, error) {
	return balancer.PickResult{SubConn: p.sc}, nil
}

// readyEndpoint is a ready endpoint a picker may hand out.
type readyEndpoint struct {
	sc   balancer.SubConn
	conn *endpointConn
}

type rrPicker struct {
	eps  []readyEndpoint
	next atomic.Uint32
}

func (p *rrPicker) pick(uint64) (balancer.PickResult, error) {
	e := p.eps[int(p.next.Add(1)%uint32(len(p.eps)))]
	return balancer.PickResult{SubConn: e.sc}, nil
}

// weightedPicker is a locality's picker and weight.
type weightedPicker struct {
	picker endpointPicker
	weight float64
}

// newLocalityPicker returns the picker that draws a locality by weight and
// lets its picker pick: plain turns when the weights are equal, else
// earliest deadline first, which keeps each locality's share exact over
// any run of RPCs (gRPC draws at random, with the same shares).
func newLocalityPicker(children []weightedPicker) endpointPicker {
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

func (p *edfPicker) pick(hash uint64) (balancer.PickResult, error) {
	p.mu.Lock()
	it := &p.h[0]
	child := it.child
	it.deadline += it.period
	heap.Fix(&p.h, 0)
	p.mu.Unlock()
	return child.pick(hash)
}

type edfItem struct {
	child            endpointPicker
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
