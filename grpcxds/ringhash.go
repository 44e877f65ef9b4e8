package grpcxds

import (
	"cmp"
	"context"
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/resources"
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

// headerHash hashes an RPC by one header of its metadata (ring_hash's
// requestHashHeader, gRFC A76): its values joined with ",", or a random
// hash when the RPC does not carry it.
func headerHash(ctx context.Context, name string) uint64 {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v, ok := header(md, name); ok {
		return xxhash.Sum64String(v)
	}
	return rand.Uint64()
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

// requestHash computes the hash of an RPC from the route's hash policies,
// in order: each policy that yields a hash is mixed in (the running hash
// rotated left by one bit, then XORed, so that equal policies do not
// cancel out), and a terminal policy that yields one ends the list. With
// no hash from any policy the RPC gets a random one, as in gRPC, so it
// lands anywhere on the ring.
func requestHash(policies []resources.HashPolicy, md metadata.MD, channelID uint64) uint64 {
	var h uint64
	hashed := false
	for _, hp := range policies {
		var ph uint64
		switch hp.Kind {
		case resources.HashPolicyHeader:
			v, ok := header(md, hp.HeaderName)
			if !ok {
				continue
			}
			if hp.RegexRewrite != nil {
				v = hp.RegexRewrite.ReplaceAllString(v, goTemplate(hp.RegexSubstitution))
			}
			ph = xxhash.Sum64String(v)
		case resources.HashPolicyChannelID:
			ph = channelID
		default: // source_ip: a client has no source IP to hash
			continue
		}
		h = bits.RotateLeft64(h, 1) ^ ph
		hashed = true
		if hp.Terminal {
			break
		}
	}
	if !hashed {
		return rand.Uint64()
	}
	return h
}

// goTemplate turns an RE2 substitution as Envoy takes it ("\1" for a
// capture group, "\\" for a backslash) into a Go regexp template ("${1}",
// with "$" escaped as "$$").
func goTemplate(sub string) string {
	if !strings.ContainsAny(sub, `\$`) {
		return sub
	}
	var b strings.Builder
	for i := 0; i < len(sub); i++ {
		c := sub[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(sub) && '0' <= sub[i+1] && sub[i+1] <= '9':
			j := i + 1
			for j < len(sub) && '0' <= sub[j] && sub[j] <= '9' {
				j++
			}
			b.WriteString("${" + sub[i+1:j] + "}")
			i = j - 1
		case c == '\\' && i+1 < len(sub):
			i++
			b.WriteByte(sub[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
