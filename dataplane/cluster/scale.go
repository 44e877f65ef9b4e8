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
