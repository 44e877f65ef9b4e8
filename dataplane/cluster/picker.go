package cluster

import (
	"fmt"
	"math/rand/v2"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/resources"
)

// Picker picks an endpoint of one cluster for a request. Pickers are
// immutable (but for counters), safe for concurrent use, and never take
// the owner's lock.
type Picker interface {
	// Pick picks for a request whose hash (for ring_hash) is hash. req is
	// the transport's request, handed as it is to Host.HeaderHash when the
	// cluster's ring_hash hashes a header of its own (gRFC A76): grpcxds
	// passes the RPC's context, which is an interface already, so that the
	// call allocates nothing. Its errors are ErrQueue (hold the request
	// for the next picker), a *DropError or an *OverloadError (fail it, as
	// the transport says: gRPC's UNAVAILABLE), or any other reason the
	// cluster cannot take it (which gRPC fails UNAVAILABLE, but holds a
	// wait-for-ready RPC).
	Pick(req any, hash uint64) (Result, error)
}

// Result is a pick: the endpoint and its connection as the picker saw it,
// and the Done the transport calls when the request ends.
type Result struct {
	Endpoint *endpoint.Endpoint
	Conn     endpoint.Conn
	Done     Done
	// Limits are the leaf's connection limits, nil without
	// Config.ConnectionLimits. Pending says the request waits for a
	// connection (Conn's PendingConn.Dispatch said so): the transport
	// calls Limits.EndPending once it has one, or gives up.
	Limits  *Limits
	Pending bool
}

// Done ends a picked request: it gives back its place under the circuit
// breaker and records its outcome, for outlier detection and load reports.
// A value, not a func, so that a transport's own callback can hold it and
// allocate no more than it would for its own closure (grpcxds: one
// balancer.PickResult.Done per RPC, 48 B).
type Done struct {
	p  *priorityPicker
	ll *client.LocalityLoad
	ep *endpoint.Endpoint
	// load is the weight of ep that a per-request ORCA report goes to
	// (weighted_round_robin, gRFC A58); nil for the other policies.
	load    *lbpolicy.EndpointWeight
	counted bool // least_request counted the request on ep
}

// Finish records the end of the request: err is its error (nil: success;
// an outlier.OutcomeError says which failure, for an HTTP cluster's
// consecutive detectors, which may eject the endpoint from this call, so
// it runs with no lock of the owner held; outlier.Cancelled, a request
// its caller gave up on, is recorded by neither outlier detection nor the
// load report's success and error counts),
// serverLoad the backend's ORCA report at its end, if any (a
// *v3orcapb.OrcaLoadReport; anything else is ignored). It, or Unsent for
// a request that never left, must be called once per picked request.
func (d Done) Finish(err error, serverLoad any) {
	if d.p == nil {
		return
	}
	d.p.inflight.Add(-1)
	o := outlier.OutcomeOf(err)
	if d.p.od != nil {
		// Any error is a failure, as in gRPC; an HTTP transport's say
		// which (outlier.OutcomeError), for the consecutive detectors.
		d.p.od.RecordOutcome(d.ep, o)
	}
	r, _ := serverLoad.(*v3orcapb.OrcaLoadReport)
	if d.ll != nil {
		if o == outlier.Cancelled {
			d.ll.CallCancelled()
		} else {
			d.ll.CallFinished(err != nil)
		}
		if r != nil && d.p.metrics != nil {
			d.p.metrics.record(d.ll, r)
		}
	}
	if d.counted {
		d.ep.CallFinished()
	}
	if d.load != nil && r != nil {
		d.load.Report(ORCALoad(r))
	}
}

// Abandon undoes the pick instead of Finish: the request was not sent, and
// the transport holds it to be picked again (grpcxds: the endpoint's
// connections were all at the server's MAX_CONCURRENT_STREAMS while
// another was being made, gRFC A105). It gives back what Pick counted,
// and records no outcome: unlike Unsent, the load report does not count
// it issued, since its next pick will.
func (d Done) Abandon() { d.Queue().Release() }

// Started records, with Config.StartOnSend, that the picked request left
// for its endpoint (HTTP: it has a connection): LRS counts it issued and
// in progress from now. Each pick so started ends with Finish; without
// Config.StartOnSend, the pick was the start and Started does nothing.
func (d Done) Started() {
	if d.ll != nil && d.p.inflight.startOnSend {
		d.ll.CallStarted()
	}
}

// Unsent ends a picked request that never left for its endpoint (with
// Config.StartOnSend: Started was not called), in place of Finish: it
// gives back the request's place under the circuit breaker and
// least_request's count, and the load report records nothing of it.
// outcome is what outlier detection records (nil: nothing, for a request
// the transport refused or its caller cancelled; a connection that could
// not be made for it is the endpoint's failure). Without
// Config.StartOnSend the pick counted the request issued, and Unsent ends
// it as Finish does with outlier.Cancelled: issued, neither succeeded nor
// errored.
func (d Done) Unsent(outcome error) {
	if d.p == nil {
		return
	}
	d.p.inflight.Add(-1)
	if d.p.od != nil && outcome != nil {
		d.p.od.RecordOutcome(d.ep, outlier.OutcomeOf(outcome))
	}
	if d.ll != nil && !d.p.inflight.startOnSend {
		d.ll.CallCancelled()
	}
	if d.counted {
		d.ep.CallFinished()
	}
}

// ORCALoad is the part of an ORCA load report that weighted_round_robin's
// weights are made of, for a report a response carried (Done.Finish) or
// one the transport's out-of-band stream delivered.
func ORCALoad(r *v3orcapb.OrcaLoadReport) lbpolicy.LoadReport {
	return lbpolicy.LoadReport{QPS: r.GetRpsFractional(), EPS: r.GetEps(),
		ApplicationUtilization: r.GetApplicationUtilization(), CPUUtilization: r.GetCpuUtilization()}
}

// ErrQueue says no endpoint can take the request yet: hold it for the next
// picker (gRPC: balancer.ErrNoSubConnAvailable). The leaf policies' own.
var ErrQueue = lbpolicy.ErrQueue

// DropError fails a request an EDS drop_overload category dropped.
type DropError struct{ Category string }

// Error says the request was dropped and by which category, in gRPC's
// words.
// Error says the request was dropped and by which category, in gRPC's
// words.
func (e *DropError) Error() string { return "dropped by load balancing policy: " + e.Category }

// OverloadError fails a request the leaf cluster's circuit breaker
// refused: max_requests are in flight or, if Pending, max_pending_requests
// (MaxPendingRequests) wait for a connection already.
type OverloadError struct {
	Cluster     string
	MaxRequests uint32
	// Pending: the refusal is max_pending_requests'.
	Pending            bool
	MaxPendingRequests uint32
}

// Error names the cluster and the limit it reached.
func (e *OverloadError) Error() string {
	if e.Pending {
		return fmt.Sprintf("goxds: cluster %q: %d requests waiting for a connection, the circuit breaker's max_pending_requests",
			e.Cluster, e.MaxPendingRequests)
	}
	return fmt.Sprintf("goxds: cluster %q: %d requests in flight, the circuit breaker's max_requests", e.Cluster, e.MaxRequests)
}

// errPicker fails every request with err.
type errPicker struct{ err error }

func (p errPicker) Pick(any, uint64) (Result, error) { return Result{}, p.err }

// queuePicker holds requests until the next picker.
type queuePicker struct{}

func (queuePicker) Pick(any, uint64) (Result, error) { return Result{}, ErrQueue }

// priorityPicker is the picker of a cluster using one of its priorities:
// it applies the leaf cluster's drops and circuit breaker, then lets the
// cluster's policy (package dataplane/lbpolicy) pick an endpoint, and
// hands the transport the endpoint with the Done that records the
// request's end. A nil inner queues requests: the priority is connecting.
type priorityPicker struct {
	leaf        string
	drops       []resources.DropOverload
	maxRequests uint32
	inflight    *leafCounter
	// hashHeader, when set, hashes the request instead of the route's
	// hash policies (ring_hash's requestHashHeader, gRFC A76), by
	// headerHash (Host.HeaderHash).
	hashHeader string
	headerHash func(req any, name string) uint64
	// od counts the requests of each endpoint for outlier detection; nil
	// without it.
	od    *outlier.Detector
	inner lbpolicy.Picker
	// load, if not nil, records drops; locs then has the LocalityLoad of
	// each endpoint inner may pick.
	load    *client.ClusterLoad
	locs    map[*endpoint.Endpoint]*client.LocalityLoad
	metrics *lrsMetrics
}

func (p *priorityPicker) Pick(req any, hash uint64) (Result, error) {
	for _, d := range p.drops {
		if d.PerMillion > 0 && rand.Uint32N(1_000_000) < d.PerMillion {
			if p.load != nil {
				p.load.CallDropped(d.Category)
			}
			return Result{}, &DropError{Category: d.Category}
		}
	}
	if p.inner == nil {
		return Result{}, ErrQueue
	}
	if p.inflight.Add(1) > int64(p.maxRequests) {
		p.inflight.Add(-1)
		if p.load != nil {
			p.load.CallDropped("") // counted in the total only, as gRPC does
		}
		return Result{}, &OverloadError{Cluster: p.leaf, MaxRequests: p.maxRequests}
	}
	if p.hashHeader != "" && p.headerHash != nil {
		hash = p.headerHash(req, p.hashHeader)
	}
	picked, err := p.inner.Pick(hash)
	if err != nil {
		p.inflight.Add(-1)
		return Result{}, err
	}
	lim, pending := p.inflight.limits, false
	if lim != nil {
		if pc, ok := picked.Conn.(PendingConn); ok && !pc.Dispatch() {
			if !lim.startPending() {
				// max_pending_requests: refused as max_requests
				// refuses, before the request counts anywhere.
				p.inflight.Add(-1)
				if picked.Counted {
					picked.Endpoint.CallFinished()
				}
				if p.load != nil {
					p.load.CallDropped("")
				}
				return Result{}, &OverloadError{Cluster: p.leaf, Pending: true, MaxPendingRequests: lim.maxPending.Load()}
			}
			pending = true
		}
	}
	d := Done{p: p, ll: p.locs[picked.Endpoint], ep: picked.Endpoint, load: picked.Load, counted: picked.Counted} // ll nil without load reporting
	if d.ll != nil && !p.inflight.startOnSend {
		d.ll.CallStarted()
	}
	return Result{Endpoint: picked.Endpoint, Conn: picked.Conn, Done: d, Limits: lim, Pending: pending}, nil
}

// picker returns the picker of p for a cluster using it in state (Ready,
// Idle or Connecting), by the leaf cluster's policy (p.lb).
func (p *priority) picker(state endpoint.State, headerHash func(any, string) uint64) Picker {
	pp := &priorityPicker{leaf: p.leaf, drops: p.drops, maxRequests: p.maxRequests, inflight: p.inflight,
		hashHeader: p.lb.Policy.RequestHashHeader, headerHash: headerHash, load: p.load, metrics: p.metrics}
	if state == endpoint.Connecting {
		return pp
	}
	pp.od = p.od()
	pp.locs = p.localityLoads()
	pp.inner = p.lb.Picker()
	return pp
}
