package watchers

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// tree is one WatchConfigTree: the client watches it holds, what each has
// delivered, and the snapshot in force.
//
// Its state changes in two places only: the callbacks of its client
// watches, which the client runs one at a time on its callback goroutine,
// and cancel, which may run on any goroutine. mu orders the two. It is
// never held while the TreeWatcher runs; it is held while starting and
// cancelling client watches, which is safe because the client never calls
// a watcher while holding its own lock (lock order: tree.mu, then the
// client's).
type tree struct {
	// Read-only after WatchConfigTree.
	c         *client.Client
	authority string
	vhAuth    func(*resources.Listener, string) string // TreeOptions.VirtualHostAuthority
	w         TreeWatcher
	extra     *ClusterSet // TreeOptions.Clusters; nil is empty

	// canceled mirrors stopped for delivery, which runs after mu is
	// released: it is checked right before each call of w, so no call
	// starts once cancel has returned (one already past the check may
	// still be running, as with the client's own watchers).
	canceled atomic.Bool

	mu      sync.Mutex
	stopped bool // guarded by mu
	// nudging cancels the listener watch that will run a pass for a
	// change of extra (clusterset.go); nil when none is pending. Guarded
	// by mu.
	nudging func()

	// The watches, by resource name: a cluster's watch lives in its
	// clusterNode, an EDS service name's in its edsNode. Guarded by mu.
	listener  *watch[*resources.Listener]
	routes    map[string]*watch[*resources.RouteConfig]
	clusters  map[string]*clusterNode
	endpoints map[string]*edsNode
	// leds holds the state of the edsNodes whose assignment names
	// LbEndpointCollections (gRFC A95; see leds.go); nil until one does.
	// Guarded by mu.
	leds map[*edsNode]*ledsState

	// gen numbers the passes over the tree (see pass.go); a watch whose
	// neededGen is gen is needed by the latest tree. Guarded by mu.
	gen uint64
	// unresolved counts the needed watches that have delivered nothing
	// yet. A pass counts them; callbacks keep the count exact in between,
	// so that while it is above zero a callback that cannot change the
	// shape of the tree skips the pass: no snapshot could be complete.
	// This keeps the arrival of N clusters and N endpoints linear in N.
	// Guarded by mu.
	unresolved int

	// last is the snapshot in force: the last delivered, nil before the
	// first and after a ResourceError. lastErr is the text of the
	// ResourceError in force, "" if none. Guarded by mu.
	last    *Snapshot
	lastErr string
	// lastGen is the gen of the pass that made last (or found it still
	// current); the edsNodes stamped with it list the clusters of that
	// pass's tree fetching their endpoints. While lastGen == gen the tree
	// cannot have changed shape (every change that could alter it walks it
	// again), so a change of endpoints or of a cluster only replaces the
	// ClusterConfigs it concerns: see patch.go. Guarded by mu.
	lastGen uint64
	// build is the snapshot the latest pass began, to be completed as the
	// parts it lacked arrive, if buildGen == gen; buildRC and buildVH are
	// the route configuration and virtual host that pass found. See
	// buildingLocked. Guarded by mu.
	build    map[string]*ClusterConfig
	buildGen uint64
	buildRC  *resources.RouteConfig
	buildVH  *resources.VirtualHost
	// aggPendingGen is the gen of the latest pass that left an aggregate
	// cluster waiting for something below it. Guarded by mu.
	aggPendingGen uint64
	// mark numbers the scans of routes (a pass's, sameRootsLocked's);
	// the clusters the routes of the latest tree name carry rootMark in
	// clusterNode.rootMark, and there are roots of them. Guarded by mu.
	mark, rootMark uint64
	roots          int
	// walked counts the clusters passes have walked, so that tests can
	// tell an update that walked the tree from one that did not (see
	// export_test.go). Guarded by mu.
	walked int
	// outage holds the watches that reported the current loss of the
	// management server. The client tells each watcher once per outage;
	// the user hears of it once per tree: a second report from the same
	// watch is a new outage, and anything arriving ends the outage.
	// Guarded by mu.
	outage map[any]bool
}

// watch is one client watch of the tree and what it delivered. Guarded by
// tree.mu.
type watch[T resources.Resource] struct {
	// Read-only after startWatch.
	t    *tree
	name string

	cancel func()
	value  T
	err    error
	// neededGen == tree.gen: the latest tree needs this resource.
	neededGen uint64
	// live is false once the tree dropped the watch: callbacks already
	// queued by the client then find it stale.
	live bool
	// received: an update or a resource error arrived; the resource is
	// resolved, usable (has, value) or not (err).
	received bool
	has      bool
	// soft: the latest tree needs this resource only for a cluster of its
	// ClusterSet, which does not hold a snapshot back, so unresolved does
	// not count it (see needLocked). Meaningful while neededGen == gen.
	soft bool
	// kept: the snapshot in force uses this resource, so it is kept until
	// a new snapshot replaces that one (make-before-break).
	kept bool
}

// inUseLocked reports whether the latest tree or the snapshot in force
// uses w: trouble with a resource the tree is about to drop is not the
// user's.
func (w *watch[T]) inUseLocked(t *tree) bool { return w.neededGen == t.gen || w.kept }

// outcome is what a callback has to tell the TreeWatcher, gathered under
// mu and delivered after it is released.
type outcome struct {
	ambient []error
	resErr  error
	update  *Snapshot
}

// startWatch starts a client watch whose events update w and then tell the
// tree (see changedLocked). w is zero memory, usually part of a larger
// record (clusterNode, edsNode), and never a watch used before: the client
// may still hold callbacks for a dropped watch, which must find it stale.
// Called with t.mu held.
//
// The watch is itself the client's Watcher, so that a tree of 10,000
// clusters does not make closures for each of its 20,000 watches.
func startWatch[T resources.Resource](t *tree, w *watch[T], typ *resources.Type[T], name string) *watch[T] {
	*w = watch[T]{t: t, name: name, live: true}
	w.cancel = client.Watch(t.c, typ, name, w)
	return w
}

// changedLocked tells the tree that w changed (first is true for its first
// event; prev and prevHas are what it held before) and returns what to
// tell the TreeWatcher. The kind of resource picks the tree's callback: a
// type switch rather than a function in each of 20,000 watches.
func changedLocked[T resources.Resource](w *watch[T], first bool, prev T, prevHas bool) outcome {
	t := w.t
	switch w := any(w).(type) {
	case *watch[*resources.Listener]:
		return t.listenerChangedLocked(w, first, any(prev).(*resources.Listener), prevHas)
	case *watch[*resources.RouteConfig]:
		return t.routeChangedLocked(w, first, any(prev).(*resources.RouteConfig), prevHas)
	case *watch[*resources.Cluster]:
		return t.clusterChangedLocked(w, first, any(prev).(*resources.Cluster), prevHas)
	case *watch[*resources.Endpoints]:
		return t.endpointsChangedLocked(w, first, any(prev).(*resources.Endpoints), prevHas)
	}
	return outcome{} // the tree watches no other kind
}

// Update implements client.Watcher.
func (w *watch[T]) Update(v T) { handle(w, v, (*watch[T]).updateLocked) }

// ResourceError implements client.Watcher.
func (w *watch[T]) ResourceError(err error) { handle(w, err, (*watch[T]).resourceErrorLocked) }

// AmbientError implements client.Watcher.
func (w *watch[T]) AmbientError(err error) { handle(w, err, (*watch[T]).ambientErrorLocked) }

func (w *watch[T]) updateLocked(v T) outcome {
	t := w.t
	if !w.live {
		return outcome{}
	}
	first, prev, prevHas := !w.received, w.value, w.has
	w.received, w.has, w.value, w.err = true, true, v, nil
	clear(t.outage)
	return changedLocked(w, first, prev, prevHas)
}

func (w *watch[T]) resourceErrorLocked(err error) outcome {
	t := w.t
	if !w.live {
		return outcome{}
	}
	if errors.Is(err, client.ErrServerUnavailable) && t.last != nil {
		// Make-before-break through an outage: a resource not received
		// yet because the stream broke holds up the next snapshot, it
		// does not break the one in force. Once reconnected, the client
		// sends it.
		if !w.inUseLocked(t) {
			return outcome{}
		}
		return t.ambientLocked(w, err)
	}
	first, prev, prevHas := !w.received, w.value, w.has
	var zero T
	w.received, w.has, w.value, w.err = true, false, zero, err
	if !errors.Is(err, client.ErrServerUnavailable) {
		clear(t.outage)
	}
	return changedLocked(w, first, prev, prevHas)
}

func (w *watch[T]) ambientErrorLocked(err error) outcome {
	t := w.t
	if !w.live || !w.inUseLocked(t) {
		return outcome{}
	}
	return t.ambientLocked(w, err)
}

// handle runs f under mu, then tells the TreeWatcher what f found. It is
// called on the client's callback goroutine, so the TreeWatcher's calls
// are serialized with every watcher of the client.
func handle[T resources.Resource, A any](w *watch[T], a A, f func(w *watch[T], a A) outcome) {
	t := w.t
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	o := f(w, a)
	t.mu.Unlock()
	t.deliver(o)
}

// deliver tells the TreeWatcher what a callback found. It runs on the
// client's callback goroutine, with mu released.
func (t *tree) deliver(o outcome) {
	for _, err := range o.ambient {
		if t.canceled.Load() {
			return
		}
		t.w.AmbientError(err)
	}
	switch {
	case t.canceled.Load():
	case o.resErr != nil:
		t.w.ResourceError(o.resErr)
	case o.update != nil:
		t.w.Update(o.update)
	}
}

// ambientLocked passes on err, reported by watch w; a lost connection only
// once per outage.
func (t *tree) ambientLocked(w any, err error) outcome {
	if errors.Is(err, client.ErrServerUnavailable) {
		if t.outage[w] {
			clear(t.outage) // w reports again: a new outage
		}
		reported := len(t.outage) > 0
		t.outage[w] = true
		if reported {
			return outcome{}
		}
	}
	return outcome{ambient: []error{err}}
}

func (t *tree) listenerChangedLocked(*watch[*resources.Listener], bool, *resources.Listener, bool) outcome {
	return t.passLocked()
}

func (t *tree) routeChangedLocked(w *watch[*resources.RouteConfig], _ bool, prev *resources.RouteConfig, prevHas bool) outcome {
	if w.neededGen != t.gen {
		return outcome{} // the route config of a snapshot being replaced
	}
	if w.has && prevHas && t.last != nil && t.lastGen == t.gen && t.last.RouteConfig == prev {
		return t.patchRoutesLocked(w.value)
	}
	return t.passLocked()
}

func (t *tree) clusterChangedLocked(w *watch[*resources.Cluster], first bool, prev *resources.Cluster, prevHas bool) outcome {
	if w.neededGen != t.gen {
		return outcome{}
	}
	if first {
		resolvedLocked(t, w)
		if w.has && w.value.Kind == resources.ClusterKindAggregate {
			return t.passLocked() // its children need the walk
		}
		n := t.clusters[w.name]
		var e *edsNode
		if w.has && w.value.Kind == resources.ClusterKindEDS {
			// The one thing a new EDS cluster adds to the tree is its
			// endpoints: add them here rather than walk the whole tree
			// for each of a thousand clusters arriving together.
			e = t.endpointsWatchLocked(w.value.EDSServiceName(), n)
			t.needEndpointsLocked(e, w.soft)
			e.addUserLocked(t.gen, n)
		}
		if w.soft && t.steadyLocked() {
			return t.addSetClusterLocked(n, e)
		}
		t.resolveLocked(n, e)
		return t.completeLocked()
	}
	if prevHas != w.has || (w.has && !sameEdges(prev, w.value)) {
		return t.passLocked()
	}
	if t.last != nil && t.lastGen == t.gen {
		return t.patchClusterLocked(w)
	}
	if t.buildingLocked() {
		if old := t.build[w.name]; old != nil {
			t.build[w.name] = patchedConfig(old, w)
		}
	}
	return t.completeLocked()
}

func (t *tree) endpointsChangedLocked(w *watch[*resources.Endpoints], first bool, _ *resources.Endpoints, _ bool) outcome {
	if w.neededGen != t.gen {
		return outcome{}
	}
	e := t.endpoints[w.name]
	if first {
		resolvedLocked(t, w)
		if w.soft && t.steadyLocked() {
			return t.addSetClusterLocked(nil, e)
		}
	} else if t.last != nil && t.lastGen == t.gen {
		return t.patchEndpointsLocked(e)
	}
	if t.buildingLocked() && e.usersGen == t.gen {
		for n := range e.usersAll() {
			t.resolveLocked(n, e)
		}
	}
	return t.completeLocked()
}

// sameEdges reports whether two versions of a cluster lead to the same
// resources, so that the change leaves the tree's shape alone.
func sameEdges(a, b *resources.Cluster) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case resources.ClusterKindEDS:
		return a.EDSServiceName() == b.EDSServiceName()
	case resources.ClusterKindAggregate:
		return slices.Equal(a.AggregateChildren, b.AggregateChildren)
	}
	return true
}

// cancel stops the tree: no callback of the TreeWatcher starts once it has
// returned, and every client watch of the tree is dropped.
func (t *tree) cancel() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.stopped = true
	t.canceled.Store(true)
	t.extra.detach(t)
	cancels := make([]func(), 0, 2+len(t.routes)+len(t.clusters)+len(t.endpoints))
	cancels = append(cancels, t.listener.cancel)
	if t.nudging != nil {
		cancels = append(cancels, t.nudging)
	}
	for _, w := range t.routes {
		cancels = append(cancels, w.cancel)
	}
	for _, n := range t.clusters {
		cancels = append(cancels, n.cancel)
	}
	for _, e := range t.endpoints {
		cancels = append(cancels, e.cancel)
	}
	for _, st := range t.leds {
		for _, cw := range st.colls {
			cancels = append(cancels, cw.cancel)
		}
	}
	t.routes, t.clusters, t.endpoints, t.leds, t.last = nil, nil, nil, nil, nil
	t.mu.Unlock()
	// Outside mu: nothing the tree guards is touched any more, and the
	// client takes its own lock for each.
	for _, cancel := range cancels {
		cancel()
	}
}

// authorityFor is the authority the virtual host of l's routes is chosen
// by.
func (t *tree) authorityFor(l *resources.Listener) string {
	if t.vhAuth == nil || l == nil {
		return t.authority
	}
	return t.vhAuth(l, t.authority)
}
