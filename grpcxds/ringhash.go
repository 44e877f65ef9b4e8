package grpcxds

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// ringSizeCap bounds the ring whatever the cluster asks for, as gRPC does
// by default: a ring of the largest allowed size (8M entries) would cost
// over 100 MB per priority.
const ringSizeCap = 4096

// ringEntry is one point of a hash ring: a hash and the index of the
// endpoint that owns it.
type ringEntry struct {
	hash uint64
	ep   int
}

// ringEndpoint is an endpoint of a ring picker, as it was when the picker
// was built.
type ringEndpoint struct {
	sc    balancer.SubConn
	state connectivity.State
	err   error
}

// ringPicker is ring_hash (gRFC A42): the RPC's hash picks a point of the
// ring, and the first endpoint from there on that can take the RPC does.
type ringPicker struct {
	ring []ringEntry
	eps  []ringEndpoint
}

// ringPicker returns the ring_hash picker of g. The ring depends only on
// the endpoints and their weights, so it is built once per group.
func (g *group) ringPicker(p *priority) endpointPicker {
	eps := make([]ringEndpoint, len(g.eps))
	for i, e := range g.eps {
		eps[i] = ringEndpoint{sc: e.conn.sc, state: e.conn.state, err: e.conn.err}
		if p.od.ejected(e.conn) { // failing, to the ring
			eps[i].state, eps[i].err = connectivity.TransientFailure, errEjected
		}
	}
	if g.ring == nil {
		g.ring = buildRing(g.eps, p.policy.MinRingSize, p.policy.MaxRingSize)
	}
	return &ringPicker{ring: g.ring, eps: eps}
}

// buildRing places every endpoint on a ring in proportion to its weight,
// with enough points that the lightest endpoint gets a whole number of
// them, within the cluster's ring sizes and ringSizeCap. An endpoint's
// points hash its addresses and a counter, so they stay put when other
// endpoints come and go.
func buildRing(eps []groupEndpoint, minRing, maxRing uint64) []ringEntry {
	minSize := float64(min(minRing, ringSizeCap))
	maxSize := float64(min(maxRing, ringSizeCap))
	lightest := slices.MinFunc(eps, func(a, b groupEndpoint) int { return cmp.Compare(a.weight, b.weight) }).weight
	scale := math.Min(math.Ceil(lightest*minSize)/lightest, maxSize)
	ring := make([]ringEntry, 0, int(math.Ceil(scale)))
	var placed, due float64
	for i, e := range eps {
		due += scale * e.weight
		for n := 0; placed < due; n++ {
			ring = append(ring, ringEntry{hash: xxhash.Sum64String(e.conn.key + "_" + strconv.Itoa(n)), ep: i})
			placed++
		}
	}
	slices.SortFunc(ring, func(a, b ringEntry) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.ep, b.ep))
	})
	return ring
}

// pick walks the ring from the RPC's hash. The endpoint owning that point
// takes the RPC if ready; if it is connecting the RPC waits for it, so that
// requests with one hash keep going to one endpoint. Only if it is failing
// does the walk go on, to the first ready endpoint.
func (p *ringPicker) pick(hash uint64) (balancer.PickResult, error) {
	n := len(p.ring)
	start, _ := slices.BinarySearchFunc(p.ring, hash, func(e ringEntry, h uint64) int { return cmp.Compare(e.hash, h) })
	first := p.eps[p.ring[start%n].ep]
	switch first.state {
	case connectivity.Ready:
		return balancer.PickResult{SubConn: first.sc}, nil
	case connectivity.Idle, connectivity.Connecting:
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	waiting := false
	for i := 1; i < n; i++ {
		switch e := p.eps[p.ring[(start+i)%n].ep]; e.state {
		case connectivity.Ready:
			return balancer.PickResult{SubConn: e.sc}, nil
		case connectivity.Idle, connectivity.Connecting:
			waiting = true
		}
	}
	if waiting {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	err := first.err
	if err == nil {
		err = errors.New("every endpoint is failing")
	}
	return balancer.PickResult{}, err
}
