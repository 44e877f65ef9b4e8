package grpcxds

import (
	"math/rand/v2"
	"sync/atomic"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/resources"
)

// errorPicker fails every RPC with err: a status error ends the RPC with
// that status; any other error fails it with UNAVAILABLE, or keeps a
// wait-for-ready RPC waiting.
type errorPicker struct{ err error }

func (p errorPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	// The channel's picker while it has no configuration: tests hear of
	// its picks as of routePicker's.
	observePick(info, p.err)
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

// priorityPicker is the picker of a cluster using one of its priorities:
// it applies the leaf cluster's drops and circuit breaker, then lets the
// cluster's policy (package dataplane/lbpolicy) pick an endpoint, and
// turns the endpoint it picked into the SubConn and Done of a gRPC pick.
// A nil inner queues RPCs: the priority is connecting.
type priorityPicker struct {
	leaf        string
	drops       []resources.DropOverload
	maxRequests uint32
	inflight    *atomic.Int64
	// hashHeader, when set, hashes the RPC instead of the route's hash
	// policies (ring_hash's requestHashHeader, gRFC A76).
	hashHeader string
	// od counts the RPCs of each endpoint for outlier detection; nil
	// without it.
	od    *outlier.Detector
	inner lbpolicy.Picker
	// load, if not nil, records drops; locs then has the LocalityLoad of
	// each endpoint inner may pick.
	load    *client.ClusterLoad
	locs    map[*endpoint.Endpoint]*client.LocalityLoad
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
	picked, err := p.inner.Pick(hash)
	if err != nil {
		p.inflight.Add(-1)
		if err == lbpolicy.ErrQueue {
			err = balancer.ErrNoSubConnAvailable
		}
		return balancer.PickResult{}, err
	}
	ll := p.locs[picked.Endpoint] // nil without load reporting
	if ll != nil {
		ll.CallStarted()
	}
	// The closure keeps the endpoint, whether least_request counted it
	// and the weight a per-RPC load report goes to (weighted_round_robin),
	// not the whole Picked: it is allocated per RPC, and stays in a 48 B
	// class.
	ep, counted, load := picked.Endpoint, picked.Counted, picked.Load
	res := balancer.PickResult{SubConn: sc(picked.Conn)}
	res.Done = func(di balancer.DoneInfo) {
		p.inflight.Add(-1)
		if p.od != nil {
			p.od.Record(ep, di.Err == nil) // any error is a failure, as in gRPC
		}
		if ll != nil {
			ll.CallFinished(di.Err != nil)
			if r, ok := di.ServerLoad.(*v3orcapb.OrcaLoadReport); ok && r != nil && p.metrics != nil {
				p.metrics.record(ll, r)
			}
		}
		if counted {
			ep.CallFinished()
		}
		if load != nil {
			reportLoad(load, di)
		}
	}
	return res, nil
}

// picker returns the picker of p for a cluster using it in state (READY or
// CONNECTING), by the leaf cluster's policy (p.lb).
func (p *priority) picker(state connectivity.State) clusterPicker {
	pp := &priorityPicker{leaf: p.leaf, drops: p.drops, maxRequests: p.maxRequests, inflight: p.inflight,
		hashHeader: p.lb.Policy.RequestHashHeader, load: p.load, metrics: p.metrics}
	if state != connectivity.Ready {
		return pp
	}
	pp.od = p.od()
	pp.locs = p.localityLoads()
	pp.inner = p.lb.Picker()
	return pp
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
