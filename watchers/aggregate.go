package watchers

import (
	"fmt"
	"iter"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/goxds/xds/resources"
)

// pass is one walk of the clusters of a tree (see tree.passLocked): from
// the clusters the routes name, down through aggregate clusters, to the
// endpoints of EDS clusters. It marks what it reaches as needed, starting
// watches for what is new, and writes a ClusterConfig for every cluster
// it can resolve. What it notes per cluster (the memo, the routes naming
// it, the users of endpoints) lives in the tree's nodes, stamped with the
// pass's gen, so that a pass allocates little beyond the ClusterConfigs.
type pass struct {
	t *tree
	// path is the chain of aggregate clusters being walked, outermost
	// first: a child already on it closes a cycle.
	path []string
	// out becomes Snapshot.Clusters if the tree is complete.
	out map[string]*ClusterConfig
	// aggPending: an aggregate cluster waits for some cluster or
	// endpoints below it (see tree.buildingLocked).
	aggPending bool
	// soft: the walk is of the ClusterSet's clusters, whose needs do not
	// hold the snapshot back (see needLocked).
	soft bool
}

// result is what walking one cluster found. At most one of pending, err
// and cutAt is set; none means the cluster is resolved, usable or not.
// Results are shared and never modified.
type result struct {
	// leaves are an aggregate cluster's leaf clusters; nil for a leaf,
	// whose one leaf is itself (leaf is then true).
	leaves []string
	leaf   bool
	// height counts the clusters on the longest chain from this one down
	// to a leaf, 1 for a leaf.
	height int
	// pending: some cluster or endpoints below have not arrived.
	pending bool
	// err: a cycle goes through or below this cluster. Unlike depth, this
	// does not depend on the path the cluster was reached by, so the
	// cluster's own ClusterConfig carries it.
	err error
	// cutAt > 0: walked from depth cutAt, the chain below went past
	// MaxAggregateDepth. The same holds from any greater depth, not from a
	// smaller one.
	cutAt int
}

// The results of most walks, shared rather than allocated per cluster.
var (
	leafResult    = &result{leaf: true, height: 1}
	pendingResult = &result{pending: true}
)

// routes walks the clusters the routes of vh can send to, and marks them
// as the routes' clusters (see tree.rootMark).
func (p *pass) routes(vh *resources.VirtualHost) {
	t := p.t
	if n := len(vh.Routes); n > 64 && len(t.clusters) == 0 {
		// The first pass of a large tree (10,000 routes, a cluster
		// each): the maps its clusters go in are sized for them once,
		// rather than grown by doubling as the pass and the clusters'
		// arrivals fill them. Only the first: a later pass finds them
		// sized, and routes that share few clusters waste room once.
		t.clusters = withRoom(t.clusters, n)
		t.endpoints = withRoom(t.endpoints, n)
		p.out = withRoom(p.out, n)
	}
	t.mark++
	mark, roots := t.mark, 0
	for name := range routeClusters(vh) {
		n := t.clusterLocked(name)
		if n.rootMark == mark {
			continue
		}
		n.rootMark = mark
		roots++
		p.root(n)
	}
	t.rootMark, t.roots = mark, roots
}

// root walks n, a cluster a route or the tree's ClusterSet sends requests
// to.
func (p *pass) root(n *clusterNode) {
	if res := p.visitNode(n, 1); res.cutAt > 0 {
		// Too deep from the route, wherever else the chain may be
		// reachable from: the route's cluster carries the error, since
		// it is the one the consumer looks up.
		p.out[n.name] = &ClusterConfig{
			Name:    n.name,
			Cluster: n.value,
			Err: fmt.Errorf("%w: the clusters below %q go more than %d deep",
				ErrAggregateTooDeep, n.name, MaxAggregateDepth),
		}
	}
}

// routeClusters yields the clusters the routes of vh can send to, a
// cluster once per route naming it. Routes whose action does not forward
// (redirects, direct responses, ...) name none. Not Route.ClusterNames: it
// dedupes a route's weighted clusters by scanning, which is quadratic in
// their number; the callers dedupe by marking the clusters' nodes.
func routeClusters(vh *resources.VirtualHost) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, r := range vh.Routes {
			if r.Action != resources.RouteActionRoute {
				continue
			}
			if r.Cluster != "" && !yield(r.Cluster) {
				return
			}
			for _, wc := range r.WeightedClusters {
				if !yield(wc.Name) {
					return
				}
			}
		}
	}
}

// visit returns the result of the cluster name reached at depth (1 for a
// route's cluster), walking it unless the memo already knows the answer.
func (p *pass) visit(name string, depth int) *result {
	if depth > MaxAggregateDepth {
		// Not even watched: a chain of aggregate clusters, however
		// long, costs the client at most MaxAggregateDepth watches.
		return &result{cutAt: depth}
	}
	return p.visitNode(p.t.clusterLocked(name), depth)
}

func (p *pass) visitNode(n *clusterNode, depth int) *result {
	name := n.name
	if i := slices.Index(p.path, name); i >= 0 {
		cycle := append(slices.Clone(p.path[i:]), name)
		return &result{err: fmt.Errorf("%w: %s", ErrAggregateCycle, strings.Join(cycle, " → "))}
	}
	if n.memoGen == p.t.gen {
		m := n.memo
		switch {
		case m.cutAt == 0 && (m.pending || m.err != nil || depth+m.height-1 <= MaxAggregateDepth):
			return m
		case m.cutAt == 0:
			// Fine from where it was first reached, too deep from here.
			return &result{cutAt: depth}
		case depth >= m.cutAt:
			return m
		}
		// Cut off when reached deeper before; from here the chain may
		// fit, so walk it again.
	}
	r := p.walk(n, depth)
	n.memoGen, n.memo = p.t.gen, r
	return r
}

// walk resolves one cluster, marking its resources needed.
func (p *pass) walk(n *clusterNode, depth int) *result {
	t := p.t
	t.walked++
	needLocked(t, &n.watch, p.soft)
	var e *edsNode
	switch {
	case !n.received:
		return pendingResult
	case n.has && n.value.Kind == resources.ClusterKindAggregate:
		return p.aggregate(n.name, n.value, depth)
	case n.has && n.value.Kind == resources.ClusterKindEDS:
		e = t.endpointsWatchLocked(n.value.EDSServiceName(), n)
		t.needEndpointsLocked(e, p.soft)
		e.addUserLocked(t.gen, n)
	}
	cc := leafConfig(n, e)
	if cc == nil {
		return pendingResult
	}
	p.out[n.name] = cc
	return leafResult
}

// leafConfig returns the ClusterConfig of n, a cluster received that is
// not an aggregate, or nil if it waits for its endpoints, e for an EDS
// cluster. A cluster missing, deleted or invalid is a leaf in error, since
// what kind of cluster it would be is unknown. Called with tree.mu held.
func leafConfig(n *clusterNode, e *edsNode) *ClusterConfig {
	name := n.name
	if !n.has {
		return &ClusterConfig{Name: name, Err: n.err}
	}
	c := n.value
	switch c.Kind {
	case resources.ClusterKindEDS:
		if e == nil || !e.received {
			return nil
		}
		cc := &ClusterConfig{Name: name, Cluster: c}
		if e.has {
			cc.Endpoints = e.value
		} else {
			cc.Err = e.err
		}
		return cc
	case resources.ClusterKindLogicalDNS:
		return &ClusterConfig{Name: name, Cluster: c, DNSAddress: dnsAddress(c)}
	}
	return &ClusterConfig{Name: name, Cluster: c, Err: fmt.Errorf("cluster %q: kind %v is not supported", name, c.Kind)}
}

// dnsAddress is the host:port of a LOGICAL_DNS cluster.
func dnsAddress(c *resources.Cluster) string {
	return net.JoinHostPort(c.DNSHost, strconv.FormatUint(uint64(c.DNSPort), 10))
}

// aggregate resolves an aggregate cluster from its children, in priority
// order. Every child is walked even once the outcome is known, so that
// everything the cluster leads to is subscribed in one go and the snapshot
// waits for all of it: a snapshot is delivered only when every part is
// resolved or known to be in error.
func (p *pass) aggregate(name string, c *resources.Cluster, depth int) *result {
	p.path = append(p.path, name)
	var (
		leaves  []string
		seen    = make(map[string]bool)
		height  int
		pending bool
		cut     bool
		err     error
	)
	for _, child := range c.AggregateChildren {
		r := p.visit(child, depth+1)
		switch {
		case r.pending:
			pending = true
		case r.err != nil:
			if err == nil {
				err = r.err
			}
		case r.cutAt > 0:
			cut = true
		default:
			height = max(height, r.height)
			// A leaf reached twice (a diamond) keeps its first, highest
			// priority place.
			if r.leaf {
				if !seen[child] {
					seen[child] = true
					leaves = append(leaves, child)
				}
				continue
			}
			for _, l := range r.leaves {
				if !seen[l] {
					seen[l] = true
					leaves = append(leaves, l)
				}
			}
		}
	}
	p.path = p.path[:len(p.path)-1]
	switch {
	case pending:
		p.aggPending = true
		return pendingResult
	case err != nil:
		p.out[name] = &ClusterConfig{Name: name, Cluster: c, Err: err}
		return &result{err: err}
	case cut:
		// Depends on the path: the route's cluster says so (see routes),
		// this one stays out of the snapshot unless reached another way.
		return &result{cutAt: depth}
	}
	p.out[name] = &ClusterConfig{Name: name, Cluster: c, Leaves: leaves}
	return &result{leaves: leaves, height: height + 1}
}

// withRoom returns m, or a copy of it with room for n more keys.
func withRoom[V any](m map[string]V, n int) map[string]V {
	out := make(map[string]V, len(m)+n)
	maps.Copy(out, m)
	return out
}
