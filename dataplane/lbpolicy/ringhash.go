package lbpolicy

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/goxds/xds/dataplane/endpoint"
)

// RingSizeCap bounds the ring whatever the cluster asks for, as gRPC does
// by default: a ring of the largest allowed size (8M entries) would cost
// over 100 MB per priority.
const RingSizeCap = 4096

// ringEntry is one point of a hash ring: a hash and the index of the
// endpoint that owns it.
type ringEntry struct {
	hash uint64
	ep   int
}

// ringEndpoint is an endpoint of a ring picker, as it was when the picker
// was built.
type ringEndpoint struct {
	p     Picked
	state endpoint.State
	err   error
}

// ringPicker is ring_hash (gRFC A42): the request's hash picks a point of
// the ring, and the first endpoint from there on that can take the
// request does.
type ringPicker struct {
	ring []ringEntry
	eps  []ringEndpoint
}

// ringPicker returns the ring_hash picker of g. The ring depends only on
// the endpoints and their weights, so it is built once per group.
func (l *Leaf) ringPicker(g *group) Picker {
	eps := make([]ringEndpoint, len(g.eps))
	for i, e := range g.eps {
		eps[i] = ringEndpoint{p: Picked{Endpoint: e.ep, Conn: e.ep.Conn()}, state: e.ep.State(), err: e.ep.Err()}
		if l.ejected(e.ep) { // failing, to the ring
			eps[i].state, eps[i].err = endpoint.TransientFailure, ErrEjected
		}
	}
	if g.ring == nil {
		g.ring = buildRing(g.eps, l.Policy.MinRingSize, l.Policy.MaxRingSize)
	}
	return &ringPicker{ring: g.ring, eps: eps}
}

// buildRing places every endpoint on a ring in proportion to its weight,
// with enough points that the lightest endpoint gets a whole number of
// them, within the cluster's ring sizes and RingSizeCap. An endpoint's
// points hash its key and a counter, so they stay put when other
// endpoints come and go.
func buildRing(eps []groupEndpoint, minRing, maxRing uint64) []ringEntry {
	minSize := float64(min(minRing, RingSizeCap))
	maxSize := float64(min(maxRing, RingSizeCap))
	lightest := slices.MinFunc(eps, func(a, b groupEndpoint) int { return cmp.Compare(a.weight, b.weight) }).weight
	scale := math.Min(math.Ceil(lightest*minSize)/lightest, maxSize)
	ring := make([]ringEntry, 0, int(math.Ceil(scale)))
	var placed, due float64
	for i, e := range eps {
		due += scale * e.weight
		for n := 0; placed < due; n++ {
			ring = append(ring, ringEntry{hash: xxhash.Sum64String(e.ep.Key() + "_" + strconv.Itoa(n)), ep: i})
			placed++
		}
	}
	slices.SortFunc(ring, func(a, b ringEntry) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.ep, b.ep))
	})
	return ring
}

// Pick walks the ring from the request's hash. The endpoint owning that
// point takes the request if ready; if it is connecting the request
// waits for it (ErrQueue), so that requests with one hash keep going to
// one endpoint. Only if it is failing does the walk go on, to the first
// ready endpoint.
func (p *ringPicker) Pick(hash uint64) (Picked, error) {
	n := len(p.ring)
	start, _ := slices.BinarySearchFunc(p.ring, hash, func(e ringEntry, h uint64) int { return cmp.Compare(e.hash, h) })
	first := &p.eps[p.ring[start%n].ep]
	switch first.state {
	case endpoint.Ready:
		return first.p, nil
	case endpoint.Idle, endpoint.Connecting:
		return Picked{}, ErrQueue
	}
	waiting := false
	for i := 1; i < n; i++ {
		switch e := &p.eps[p.ring[(start+i)%n].ep]; e.state {
		case endpoint.Ready:
			return e.p, nil
		case endpoint.Idle, endpoint.Connecting:
			waiting = true
		}
	}
	if waiting {
		return Picked{}, ErrQueue
	}
	if first.err != nil {
		return Picked{}, first.err
	}
	return Picked{}, ErrAllFailing
}
