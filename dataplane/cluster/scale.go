package cluster

import "github.com/goxds/xds/dataplane/endpoint"

// Connection scaling (gRFC A105). The gRFC has xds_cluster_impl, the
// policy of a leaf cluster, set max_connections_per_subchannel on the
// subchannels of that cluster's endpoints; here a Cluster (a route's
// cluster, maybe an aggregate) records, in cl.scaled, the setting of
// each endpoint its leaves list with a per-host max_connections above 1
// (the largest, when two leaves list one endpoint), and hands it to the
// pool as its own, which takes the largest of its users' (shared
// endpoints, as the gRFC's C-core section does for shared subchannels).
// A change reaches the endpoint's existing connection: nothing is made
// again.

// scale records that a leaf of cl allows ep n connections (0 or 1: one,
// the usual case, which costs nothing).
func (cl *Cluster) scale(ep *endpoint.Endpoint, n uint32) {
	if n <= 1 {
		return
	}
	if cl.scaled == nil {
		cl.scaled = make(map[*endpoint.Endpoint]uint32)
	}
	cl.scaled[ep] = max(cl.scaled[ep], n)
}

// applyScaleLocked gives the pool cl's settings after a rebuild, old
// being those before: an endpoint cl no longer scales (but still lists)
// gets cl's setting back. An endpoint cl dropped already lost it
// (Pool.RemoveUser).
func (s *Set) applyScaleLocked(cl *Cluster, old map[*endpoint.Endpoint]uint32) {
	for c, n := range cl.scaled {
		s.pool.SetMaxConns(c, cl, n)
	}
	for c := range old {
		if _, ok := cl.scaled[c]; !ok {
			s.pool.SetMaxConns(c, cl, 0)
		}
	}
}

// Queue undoes the pick as Abandon does, but for its place under the leaf
// cluster's circuit breaker: the request was not sent, and the transport
// queues it for a connection of the endpoint picked that is being made
// (gRFC A105, endpoint.Group). The gRFC counts such a request against
// max_requests while it waits: "implementations will need to increment
// the counter in the picker. It will then be necessary to decrement the
// counter when the RPC finishes, regardless of whether it was actually
// sent out or whether the subchannel failed it." The Place keeps it
// until its Release, which the transport calls once: when it picks the
// request again (that pick counts it anew) or the request ends queued.
// The load report and least_request's count are given back at once, as
// Abandon gives them back: the next pick counts them.
func (d Done) Queue() Place {
	if d.p == nil {
		return Place{}
	}
	if d.ll != nil && !d.p.inflight.startOnSend {
		d.ll.CallUnstarted()
	}
	if d.counted {
		d.ep.CallFinished()
	}
	return Place{c: d.p.inflight}
}

// Place is a queued request's place under its leaf cluster's circuit
// breaker (Done.Queue). The zero Place is none.
type Place struct{ c *leafCounter }

// Release gives the place back. Once per Place.
func (h Place) Release() {
	if h.c != nil {
		h.c.Add(-1)
	}
}
