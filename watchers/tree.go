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

	// The watches, by resource name. Guarded by mu.
	listener  *watch[*resources.Listener]
	routes    map[string]*watch[*resources.RouteConfig]
	clusters  map[string]*watch[*resources.Cluster]
	endpoints map[string]*watch[*resources.Endpoints]

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
	// current), and edsUsers maps each EDS service name of that pass's tree
	// to the clusters fetching their endpoints under it. While lastGen ==
	// gen the tree cannot have changed shape (with nothing unresolved,
	// every change of a needed resource passes), so a change of endpoints
	// only replaces the ClusterConfigs of their users: see
	// patchEndpointsLocked. Guarded by mu.
	lastGen  uint64
	edsUsers map[string][]string
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
	t       *tree
	name    string
	changed func(t *tree, w *watch[T], first bool, prev T, prevHas bool) outcome

	cancel func()
	// live is false once the tree dropped the watch: callbacks already
	// queued by the client then find it stale.
	live bool
	// received: an update or a resource error arrived; the resource is
	// resolved, usable (has) or not (err).
	received bool
	has      bool
	value    T
	err      error
	// neededGen == tree.gen: the latest tree needs this resource.
	neededGen uint64
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

// startWatch starts a client watch whose events update the returned watch
// and then call changed, which says what to tell the TreeWatcher. first is
// true for the first event. Called with t.mu held.
//
// The watch is itself the client's Watcher and changed is a method
// expression of tree, so that a tree of 10,000 clusters does not make
// closures for each of its 20,000 watches.
func startWatch[T resources.Resource](t *tree, typ *resources.Type[T], name string, changed func(t *tree, w *watch[T], first bool, prev T, prevHas bool) outcome) *watch[T] {
	w := &watch[T]{t: t, name: name, changed: changed, live: true}
	w.cancel = client.Watch(t.c, typ, name, w)
	return w
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
	return w.changed(t, w, first, prev, prevHas)
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
	return w.changed(t, w, first, prev, prevHas)
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

func (t *tree) routeChangedLocked(w *watch[*resources.RouteConfig], _ bool, _ *resources.RouteConfig, _ bool) outcome {
	if w.neededGen != t.gen {
		return outcome{} // the route config of a snapshot being replaced
	}
	return t.passLocked()
}

func (t *tree) clusterChangedLocked(w *watch[*resources.Cluster], first bool, prev *resources.Cluster, prevHas bool) outcome {
	if w.neededGen != t.gen {
		return outcome{}
	}
	if first {
		t.unresolved--
		if !w.has {
			return t.passIfResolvedLocked()
		}
		switch w.value.Kind {
		case resources.ClusterKindEDS:
			// The one thing a new EDS cluster adds to the tree is its
			// endpoints: add them here rather than walk the whole tree
			// for each of a thousand clusters arriving together.
			t.needLocked(t.endpointsWatchLocked(w.value.EDSServiceName()))
			return t.passIfResolvedLocked()
		case resources.ClusterKindLogicalDNS:
			return t.passIfResolvedLocked()
		}
		return t.passLocked() // an aggregate: its children need the walk
	}
	if prevHas != w.has || (w.has && !sameEdges(prev, w.value)) {
		return t.passLocked()
	}
	return t.passIfResolvedLocked()
}

func (t *tree) endpointsChangedLocked(w *watch[*resources.Endpoints], first bool, _ *resources.Endpoints, _ bool) outcome {
	if w.neededGen != t.gen {
		return outcome{}
	}
	if first {
		t.unresolved--
	} else if t.last != nil && t.lastGen == t.gen {
		return t.patchEndpointsLocked(w)
	}
	return t.passIfResolvedLocked()
}

// patchEndpointsLocked makes the next snapshot when only the endpoints of
// w changed and the snapshot in force is the latest tree's: the
// ClusterConfigs of the clusters fetching those endpoints are replaced and
// every other part is kept, which is what a pass would find, without
// walking thousands of clusters to change one. The new snapshot's
// ClusterMap shares all but the replaced entries' shards with the old one,
// so the cost follows the size of the change, not of the tree.
func (t *tree) patchEndpointsLocked(w *watch[*resources.Endpoints]) outcome {
	clusters, changed := t.last.Clusters, false
	for _, name := range t.edsUsers[w.name] {
		old := clusters.Get(name)
		if old == nil || old.Cluster == nil {
			continue // cannot happen: the pass put every user in the snapshot
		}
		cc := &ClusterConfig{Name: name, Cluster: old.Cluster}
		if w.has {
			cc.Endpoints = w.value
		} else {
			cc.Err = w.err
		}
		if cc.sameAs(old) {
			continue
		}
		clusters, changed = clusters.with(name, cc), true
	}
	if !changed {
		return outcome{}
	}
	l := t.last
	t.last = &Snapshot{Listener: l.Listener, RouteConfig: l.RouteConfig, VirtualHost: l.VirtualHost, Clusters: clusters}
	return outcome{update: t.last}
}

// passIfResolvedLocked walks the tree only if it may be complete: a change
// that does not alter which resources the tree needs cannot complete a
// tree that still waits for some.
func (t *tree) passIfResolvedLocked() outcome {
	if t.unresolved > 0 {
		return outcome{}
	}
	return t.passLocked()
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

func (t *tree) routeWatchLocked(name string) *watch[*resources.RouteConfig] {
	w := t.routes[name]
	if w == nil {
		w = startWatch(t, resources.RouteConfigType, name, (*tree).routeChangedLocked)
		t.routes[name] = w
	}
	return w
}

func (t *tree) clusterWatchLocked(name string) *watch[*resources.Cluster] {
	w := t.clusters[name]
	if w == nil {
		w = startWatch(t, resources.ClusterType, name, (*tree).clusterChangedLocked)
		t.clusters[name] = w
	}
	return w
}

func (t *tree) endpointsWatchLocked(name string) *watch[*resources.Endpoints] {
	w := t.endpoints[name]
	if w == nil {
		w = startWatch(t, resources.EndpointsType, name, (*tree).endpointsChangedLocked)
		t.endpoints[name] = w
	}
	return w
}

// needLocked marks w as needed by the latest tree between two passes,
// keeping unresolved exact.
func (t *tree) needLocked(w *watch[*resources.Endpoints]) {
	if w.neededGen == t.gen {
		return
	}
	w.neededGen = t.gen
	if !w.received {
		t.unresolved++
	}
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
	cancels := []func(){t.listener.cancel}
	if t.nudging != nil {
		cancels = append(cancels, t.nudging)
	}
	for _, w := range t.routes {
		cancels = append(cancels, w.cancel)
	}
	for _, w := range t.clusters {
		cancels = append(cancels, w.cancel)
	}
	for _, w := range t.endpoints {
		cancels = append(cancels, w.cancel)
	}
	t.routes, t.clusters, t.endpoints, t.last = nil, nil, nil, nil
	t.mu.Unlock()
	// Outside mu: nothing the tree guards is touched any more, and the
	// client takes its own lock for each.
	for _, cancel := range cancels {
		cancel()
	}
}
