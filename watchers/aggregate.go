package watchers

import (
	"fmt"
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
// it can resolve.
type pass struct {
	t *tree
	// memo holds the result of each cluster walked in this pass, so that a
	// cluster many aggregate clusters share (a diamond) is walked once.
	memo map[string]*result
	// path is the chain of aggregate clusters being walked, outermost
	// first: a child already on it closes a cycle.
	path []string
	// out becomes Snapshot.Clusters if the tree is complete.
	out map[string]*ClusterConfig
	// edsUsers maps each EDS service name to the clusters in out that
	// fetch their endpoints under it (see tree.edsUsers).
	edsUsers map[string][]string
}

// result is what walking one cluster found. At most one of pending, err
// and cutAt is set; none means the cluster is resolved, usable or not.
type result struct {
	// leaves are the cluster's leaf clusters: itself for a leaf.
	leaves []string
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

// routes walks the clusters the routes of vh can send to, and returns
// them. Routes whose action does not forward (redirects, direct
// responses, ...) name none.
func (p *pass) routes(vh *resources.VirtualHost) (roots map[string]bool) {
	roots = make(map[string]bool)
	// Not Route.ClusterNames: it dedupes a route's weighted clusters by
	// scanning, which is quadratic in their number; roots dedupes here.
	for _, r := range vh.Routes {
		if r.Action != resources.RouteActionRoute {
			continue
		}
		if r.Cluster != "" {
			p.root(r.Cluster, roots)
		}
		for _, wc := range r.WeightedClusters {
			p.root(wc.Name, roots)
		}
	}
	return roots
}

// root walks a cluster that a route, or the tree's ClusterSet, sends
// requests to, once per pass (roots holds those walked).
func (p *pass) root(name string, roots map[string]bool) {
	if roots[name] {
		return
	}
	roots[name] = true
	if res := p.visit(name, 1); res.cutAt > 0 {
		// Too deep from the route, wherever else the chain may be
		// reachable from: the route's cluster carries the error,
		// since it is the one the consumer looks up.
		p.out[name] = &ClusterConfig{
			Name:    name,
			Cluster: p.t.clusters[name].value,
			Err: fmt.Errorf("%w: the clusters below %q go more than %d deep",
				ErrAggregateTooDeep, name, MaxAggregateDepth),
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
	if i := slices.Index(p.path, name); i >= 0 {
		cycle := append(slices.Clone(p.path[i:]), name)
		return &result{err: fmt.Errorf("%w: %s", ErrAggregateCycle, strings.Join(cycle, " → "))}
	}
	if m := p.memo[name]; m != nil {
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
	r := p.walk(name, depth)
	p.memo[name] = r
	return r
}

// walk resolves one cluster, marking its resources needed.
func (p *pass) walk(name string, depth int) *result {
	t := p.t
	cw := t.clusterWatchLocked(name)
	cw.neededGen = t.gen
	switch {
	case !cw.received:
		return &result{pending: true}
	case !cw.has:
		// Missing, deleted or invalid: a leaf in error, since what kind
		// of cluster it would be is unknown.
		p.out[name] = &ClusterConfig{Name: name, Err: cw.err}
		return &result{leaves: []string{name}, height: 1}
	}
	c := cw.value
	switch c.Kind {
	case resources.ClusterKindEDS:
		ew := t.endpointsWatchLocked(c.EDSServiceName())
		ew.neededGen = t.gen
		if !ew.received {
			return &result{pending: true}
		}
		cc := &ClusterConfig{Name: name, Cluster: c}
		if ew.has {
			cc.Endpoints = ew.value
		} else {
			cc.Err = ew.err
		}
		p.out[name] = cc
		svc := c.EDSServiceName()
		p.edsUsers[svc] = append(p.edsUsers[svc], name)
	case resources.ClusterKindLogicalDNS:
		p.out[name] = &ClusterConfig{
			Name:       name,
			Cluster:    c,
			DNSAddress: net.JoinHostPort(c.DNSHost, strconv.FormatUint(uint64(c.DNSPort), 10)),
		}
	case resources.ClusterKindAggregate:
		return p.aggregate(name, c, depth)
	default:
		p.out[name] = &ClusterConfig{Name: name, Cluster: c, Err: fmt.Errorf("cluster %q: kind %v is not supported", name, c.Kind)}
	}
	return &result{leaves: []string{name}, height: 1}
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
		return &result{pending: true}
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
