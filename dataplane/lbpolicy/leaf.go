package lbpolicy

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// Locality is a locality of a priority: its weight, and its endpoints
// with theirs.
type Locality struct {
	// ID is the owner's (for load reports); the policies do not read it.
	ID        resources.LocalityID
	Weight    uint32
	Endpoints []WeightedEndpoint
}

// WeightedEndpoint is an endpoint of a locality and its weight in it.
type WeightedEndpoint struct {
	Endpoint *endpoint.Endpoint
	Weight   uint32
}

// Ejector says which endpoints outlier detection has ejected: a policy
// passes them over, as failing ones.
type Ejector interface {
	Ejected(ep *endpoint.Endpoint) bool
}

// Leaf balances one priority of a cluster by the cluster's policy. The
// owner fills in its exported fields and then asks it for pickers, each
// time an endpoint's state changes; a Leaf lives as long as its priority
// (one configuration of the cluster), and keeps what its policy builds
// once (the ring, pick_first's order and choice) across those pickers.
// Guarded by the owner's lock, like the endpoints it balances.
type Leaf struct {
	// Policy is the cluster's policy; Localities the priority's, with
	// only the endpoints that may take requests (healthy ones).
	Policy     *resources.LBPolicy
	Localities []Locality
	// Before is what the cluster's leaves had before this configuration,
	// for this one to keep (nil: nothing): pick_first's choice, if still
	// listed and ready (gRFC A62 keeps the connection it has), and
	// weighted_round_robin's weights (no new blackout period), as gRPC
	// keeps them. One pointer for both: a priority holds a Leaf, and a
	// field more takes it past a Go size class.
	Before *Carried
	// Ejected, if not nil, is the priority's outlier detection.
	Ejected Ejector
	// Repick has the owner, under its lock, run f and build the leaf's
	// picker again: pick_first's Happy Eyeballs turn calls it when the
	// next endpoint may be chosen. Nil: no timer is set (tests).
	Repick func(f func())
	// Clock runs that timer; nil: the real one.
	Clock Clock

	// groups are what the policy balances, built on first use.
	groups []*group
}

// group is what one instance of the cluster's policy balances, as in
// gRPC's tree of policies: a locality under wrr_locality, else the whole
// priority.
type group struct {
	weight uint32 // the locality's weight; 1 for a whole priority
	// eps are the endpoints in EDS order, or in pick_first's shuffled one.
	eps []groupEndpoint
	// ring is ring_hash's ring, built on first use.
	ring []ringEntry
	// chosen is pick_first's endpoint: it keeps the requests while it is
	// ready, even when an endpoint before it in the list becomes ready.
	chosen *endpoint.Endpoint
	// pick_first's pass over eps (pickfirst.go): began once it looked at
	// Before; idle once the chosen endpoint lost its connection, until a
	// request asks for a new pass (Leaf.ExitIdle); tried is how many
	// endpoints, from the first, it has started; lastStart when the last
	// one's Happy Eyeballs turn began; timer ends that turn, set for the
	// turn that began at timerFor.
	began     bool
	idle      bool
	tried     int
	lastStart time.Time
	timer     Timer
	timerFor  time.Time
	// wrr is weighted_round_robin's last picker, whose weight updates stop
	// when the next is built; weights its weights, of the endpoints it has
	// seen ready (wrr.go).
	wrr     *wrrPicker
	weights map[*endpoint.Endpoint]*wrrEndpoint
}

// groupEndpoint is an endpoint of a group with its share of the group's
// traffic where a policy weighs endpoints: within a locality, its share of
// the endpoint weights; in a whole priority, its locality's share of the
// locality weights times that.
type groupEndpoint struct {
	ep     *endpoint.Endpoint
	weight float64
}

// Picker returns the picker of the leaf's endpoints as they are now, nil
// when the policy has no endpoint to send requests to (none ready, or
// pick_first waiting for one). Under wrr_locality (and the legacy
// ROUND_ROBIN, which gRPC reads as wrr_locality over round_robin) a
// locality with a ready endpoint is drawn by its weight, then the policy
// picks within it; otherwise the policy picks among all the endpoints of
// the priority, and locality weights count only where the policy itself
// weighs endpoints (ring_hash, pick_first's shuffle), as in gRPC.
func (l *Leaf) Picker() Picker {
	groups := l.endpointGroups()
	if !l.Policy.WRRLocality {
		return l.groupPicker(groups[0])
	}
	var children, idle []weightedPicker
	for _, g := range groups {
		child := l.groupPicker(g)
		switch {
		case child == nil:
		case g.idle:
			idle = append(idle, weightedPicker{child, float64(g.weight)})
		default:
			children = append(children, weightedPicker{child, float64(g.weight)})
		}
	}
	if len(children) == 0 {
		// No locality ready: those gone idle (pick_first's) take the
		// requests, each asking its group to connect. (gRPC's
		// weighted_target picks among ready children only, and an IDLE
		// one would wait for the channel's Connect.)
		children = idle
	}
	if len(children) == 0 {
		return nil
	}
	return newLocalityPicker(children)
}

// Carried is what a cluster's leaves hand the leaves of its next
// configuration (Leaf.Before).
type Carried struct {
	// Picked are the endpoints pick_first had chosen.
	Picked map[*endpoint.Endpoint]bool
	// Weights are weighted_round_robin's weights, by endpoint.
	Weights map[*endpoint.Endpoint]*EndpointWeight
	// Idle: a leaf was idle (pick_first that lost its endpoint): the next
	// configuration's pick_first starts idle too, unless it keeps a
	// choice, as gRPC's pick_first stays IDLE through an address update.
	Idle bool
}

// Carry adds to c what the leaf hands the next configuration's leaves,
// and returns it; c nil, it is made if the leaf has anything to hand.
func (l *Leaf) Carry(c *Carried) *Carried {
	if l.Idle() {
		if c == nil {
			c = &Carried{}
		}
		c.Idle = true
	}
	for _, g := range l.groups {
		if g.chosen != nil {
			if c == nil {
				c = &Carried{}
			}
			if c.Picked == nil {
				c.Picked = make(map[*endpoint.Endpoint]bool)
			}
			c.Picked[g.chosen] = true
		}
		for ep, e := range g.weights {
			if c == nil {
				c = &Carried{}
			}
			if c.Weights == nil {
				c.Weights = make(map[*endpoint.Endpoint]*EndpointWeight)
			}
			c.Weights[ep] = e.w
		}
	}
	return c
}

// endpointGroups returns the groups of l, built on first use: one per
// locality under wrr_locality, else exactly one.
func (l *Leaf) endpointGroups() []*group {
	if l.groups != nil {
		return l.groups
	}
	var locSum float64
	for _, loc := range l.Localities {
		locSum += float64(loc.Weight)
	}
	whole := &group{weight: 1}
	for _, loc := range l.Localities {
		var epSum float64
		for _, e := range loc.Endpoints {
			epSum += float64(e.Weight)
		}
		g := whole
		share := float64(loc.Weight) / locSum
		if l.Policy.WRRLocality {
			g = &group{weight: loc.Weight}
			l.groups = append(l.groups, g)
			share = 1
		}
		for _, e := range loc.Endpoints {
			g.eps = append(g.eps, groupEndpoint{e.Endpoint, share * float64(e.Weight) / epSum})
		}
	}
	if !l.Policy.WRRLocality || len(l.groups) == 0 {
		l.groups = []*group{whole}
	}
	if l.Policy.Kind == resources.LBPickFirst && l.Policy.ShuffleAddressList {
		for _, g := range l.groups {
			weightedShuffle(g.eps)
		}
	}
	return l.groups
}

// weightedShuffle orders eps at random, an endpoint's chance to come
// before the others in proportion to its weight (gRFC A113): each gets the
// key u^(1/weight) for a uniform u, and the keys are sorted largest first.
func weightedShuffle(eps []groupEndpoint) {
	keys := make(map[*endpoint.Endpoint]float64, len(eps))
	for _, e := range eps {
		keys[e.ep] = math.Pow(rand.Float64(), 1/e.weight)
	}
	slices.SortStableFunc(eps, func(a, b groupEndpoint) int { return cmp.Compare(keys[b.ep], keys[a.ep]) })
}

// groupPicker returns the picker of the policy over g, nil when the
// policy has no ready endpoint in g.
func (l *Leaf) groupPicker(g *group) Picker {
	switch l.Policy.Kind {
	case resources.LBRingHash:
		if !l.anyReady(g) {
			return nil
		}
		return l.ringPicker(g)
	case resources.LBPickFirst:
		return l.pickFirst(g)
	}
	var ready []Picked
	for _, e := range g.eps {
		if l.ready(e.ep) {
			ready = append(ready, Picked{Endpoint: e.ep, Conn: e.ep.Conn()})
		}
	}
	if len(ready) == 0 {
		return nil
	}
	if l.Policy.Kind == resources.LBLeastRequest {
		return &leastRequestPicker{eps: ready, choices: int(l.Policy.ChoiceCount)}
	}
	if l.Policy.Kind == resources.LBWeightedRoundRobin {
		return l.wrrPicker(g, ready)
	}
	rr := &rrPicker{eps: ready}
	rr.next.Store(rand.Uint32()) // pickers are rebuilt often: start anywhere
	return rr
}

// ready reports whether the policy may send requests to ep: it is
// connected, and outlier detection has not ejected it.
func (l *Leaf) ready(ep *endpoint.Endpoint) bool {
	return ep.Ready() && !l.ejected(ep)
}

func (l *Leaf) ejected(ep *endpoint.Endpoint) bool {
	return l.Ejected != nil && l.Ejected.Ejected(ep)
}

func (l *Leaf) anyReady(g *group) bool {
	for _, e := range g.eps {
		if l.ready(e.ep) {
			return true
		}
	}
	return false
}
