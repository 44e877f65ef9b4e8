package watchers

import (
	"iter"

	"github.com/goxds/xds/resources"
)

// clusterNode is one cluster of the tree: its CDS watch, room for the
// endpoints watch it is the first to need, and what the latest pass found
// for it. A tree of 10,000 EDS clusters holds 10,000 of these, one
// allocation each, instead of 20,000 separate watches, and a pass keeps
// its notes here rather than in maps it builds and drops each time.
// Guarded by tree.mu.
type clusterNode struct {
	watch[*resources.Cluster]
	// eds is storage for the edsNode of the first EDS service name this
	// cluster needs, usually its own name; a name another cluster needed
	// first, or a second one, gets its own allocation. It stays with the
	// tree's endpoints map as long as that holds it, even once this
	// cluster is dropped.
	eds edsNode
	// memoGen is the gen of the pass that walked this cluster, memo what
	// it found: a cluster many aggregate clusters share (a diamond) is
	// walked once per pass.
	memoGen uint64
	memo    *result
	// rootMark is the mark of the last scan of routes that found one
	// naming this cluster (see tree.mark): a cluster many routes name is
	// walked from the first.
	rootMark uint64
}

// edsNode is the endpoints watch of one EDS service name and the clusters
// fetching under it.
type edsNode struct {
	watch[*resources.Endpoints]
	// The edsNode itself is the client's watcher of the name: it
	// resolves the assignment's LbEndpointCollections (gRFC A95) before
	// telling watch (see leds.go), keeping their state in tree.leds.
	// usersGen is the gen of the pass that listed the users: the clusters
	// of that pass's tree fetching under this name, user first, then
	// more. Almost always one, so one needs no slice. The nodes of the
	// clusters rather than their names spare a lookup each: the nodes of
	// the latest tree's clusters are the tree's until a pass drops them.
	usersGen uint64
	user     *clusterNode
	more     *[]*clusterNode
}

// addUserLocked lists cluster as fetching under e in the pass gen.
func (e *edsNode) addUserLocked(gen uint64, cluster *clusterNode) {
	switch {
	case e.usersGen != gen:
		e.usersGen, e.user = gen, cluster
		if e.more != nil {
			*e.more = (*e.more)[:0]
		}
	case e.more == nil:
		e.more = &[]*clusterNode{cluster}
	default:
		*e.more = append(*e.more, cluster)
	}
}

// usersAll yields the users listed by the pass that stamped e.
func (e *edsNode) usersAll() iter.Seq[*clusterNode] {
	return func(yield func(*clusterNode) bool) {
		if e.usersGen == 0 || !yield(e.user) {
			return
		}
		if e.more == nil {
			return
		}
		for _, u := range *e.more {
			if !yield(u) {
				return
			}
		}
	}
}

func (t *tree) routeWatchLocked(name string) *watch[*resources.RouteConfig] {
	w := t.routes[name]
	if w == nil {
		w = startWatch(t, new(watch[*resources.RouteConfig]), resources.RouteConfigType, name)
		t.routes[name] = w
	}
	return w
}

// clusterLocked returns the node of the named cluster, watching it if the
// tree does not yet.
func (t *tree) clusterLocked(name string) *clusterNode {
	n := t.clusters[name]
	if n == nil {
		n = new(clusterNode)
		startWatch(t, &n.watch, resources.ClusterType, name)
		t.clusters[name] = n
	}
	return n
}

// endpointsWatchLocked returns the edsNode of the EDS service name svc,
// watching it if the tree does not yet; user, the cluster that needs it,
// lends its room if it has not used it.
func (t *tree) endpointsWatchLocked(svc string, user *clusterNode) *edsNode {
	e := t.endpoints[svc]
	if e == nil {
		if user != nil && user.eds.t == nil {
			e = &user.eds
		} else {
			e = new(edsNode)
		}
		startEndpointsWatch(t, e, svc)
		t.endpoints[svc] = e
	}
	return e
}

// needLocked marks w as needed by the latest tree, keeping unresolved
// exact: a pass counts what it needs as it walks, and a callback that
// adds a need between passes counts it the same way. soft is a need of
// the tree's ClusterSet alone, which unresolved leaves out; a need that is
// not soft wins over one that is, in whichever order they come (a pass
// walks the routes' clusters first, but a route's cluster arriving later
// may need endpoints a set cluster needed already).
func needLocked[T resources.Resource](t *tree, w *watch[T], soft bool) {
	switch {
	case w.neededGen != t.gen:
		w.neededGen, w.soft = t.gen, soft
	case w.soft && !soft:
		w.soft = false
	default:
		return
	}
	if !w.soft && !w.received {
		t.unresolved++
	}
}

// resolvedLocked counts the first event of w, which the latest tree needs,
// off unresolved, if it was counted there.
func resolvedLocked[T resources.Resource](t *tree, w *watch[T]) {
	if !w.soft {
		t.unresolved--
	}
}

func (t *tree) needEndpointsLocked(e *edsNode, soft bool) { needLocked(t, &e.watch, soft) }

// keepMode says what a pass found for the snapshot in force, and so which
// watches it keeps (see settleLocked).
type keepMode int

const (
	keepNone   keepMode = iota // no snapshot is in force
	keepAsIs                   // the snapshot in force stays
	keepLatest                 // the latest tree has just become the snapshot in force
)

// settleLocked records which watches the snapshot in force uses and drops
// those that neither it nor the latest tree uses: one loop over each kind
// of watch. The client unsubscribes from a name once its last watcher is
// gone.
func (t *tree) settleLocked(mode keepMode) {
	for name, w := range t.routes {
		if settle(w, t.gen, mode) {
			delete(t.routes, name)
		}
	}
	for name, n := range t.clusters {
		if settle(&n.watch, t.gen, mode) {
			delete(t.clusters, name)
		}
	}
	for name, e := range t.endpoints {
		if settle(&e.watch, t.gen, mode) {
			e.stopCollectionsLocked()
			delete(t.endpoints, name)
		}
	}
}

// settle updates w.kept for mode and drops w, reporting true, if nothing
// uses it.
func settle[T resources.Resource](w *watch[T], gen uint64, mode keepMode) bool {
	switch mode {
	case keepNone:
		w.kept = false
	case keepLatest:
		w.kept = w.neededGen == gen
	}
	if w.neededGen == gen || w.kept {
		return false
	}
	w.live = false
	w.cancel()
	return true
}
