package watchers

import (
	"sync"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// gRFC A95: a locality of an assignment may take its endpoints from an
// LbEndpointCollection resource, fetched apart (often from an authority of
// its own, whose fallback follows reachability alone). The tree resolves
// them below its endpoints watch: ledsWatcher stands between the client
// and the watch of an EDS service name, watches the collections the
// assignment names, and hands the watch the assignment with every
// collection put in its locality (resources.Endpoints.WithCollections)
// once each has been heard of. To the rest of the tree a change of a
// collection is a change of the endpoints: a snapshot never shows an
// assignment whose collections are still on their way, and it keeps the
// previous endpoints meanwhile (make-before-break).
//
// An assignment naming no collection passes straight through; no
// collection is watched, and nothing but this struct's room in edsNode
// is spent.

// ledsWatcher is the client's watcher of one EDS service name; it tells w,
// the tree's watch of it, of assignments with their collections resolved.
// Its state has its own lock: the client calls it on its callback
// goroutine, the tree stops it under tree.mu or after it. It never calls
// w with mu held (w takes tree.mu; lock order: tree.mu, ledsWatcher.mu,
// the client's).
type ledsWatcher struct {
	w *watch[*resources.Endpoints] // read-only once set

	mu      sync.Mutex
	stopped bool       // guarded by mu
	st      *ledsState // nil while the assignment names no collection; guarded by mu
}

// ledsState is what a ledsWatcher keeps while its assignment names
// collections. Guarded by ledsWatcher.mu.
type ledsState struct {
	eds   *resources.Endpoints // the assignment as received
	colls map[string]*collWatch
}

// collWatch is the client watch of one collection.
type collWatch struct {
	lw     *ledsWatcher
	name   string
	cancel func()
	// Guarded by lw.mu.
	received bool                          // an update or a resource error arrived
	value    *resources.EndpointCollection // nil if the collection cannot be had
}

// startEndpointsWatch starts the client watch of the EDS service name svc
// for e, through e.leds. Called with t.mu held; e is zero memory (see
// startWatch).
func startEndpointsWatch(t *tree, e *edsNode, svc string) {
	e.watch = watch[*resources.Endpoints]{t: t, name: svc, live: true}
	e.leds = ledsWatcher{w: &e.watch}
	e.watch.cancel = client.Watch(t.c, resources.EndpointsType, svc, &e.leds)
}

// Update implements client.Watcher.
func (lw *ledsWatcher) Update(eds *resources.Endpoints) {
	names := eds.Collections()
	lw.mu.Lock()
	if lw.stopped {
		lw.mu.Unlock()
		return
	}
	if names == nil && lw.st == nil {
		lw.mu.Unlock()
		lw.w.Update(eds)
		return
	}
	var cancels []func()
	if names == nil {
		cancels = lw.dropLocked(nil)
		lw.st = nil
		lw.mu.Unlock()
		runAll(cancels)
		lw.w.Update(eds)
		return
	}
	if lw.st == nil {
		lw.st = &ledsState{colls: make(map[string]*collWatch, len(names))}
	}
	lw.st.eds = eds
	cancels = lw.dropLocked(names)
	for _, n := range names {
		if lw.st.colls[n] == nil {
			cw := &collWatch{lw: lw, name: n}
			lw.st.colls[n] = cw
			// Never calls back at once: a cached value comes through
			// the client's callback queue, after this call returns.
			cw.cancel = client.Watch(lw.w.t.c, resources.EndpointCollectionType, n, cw)
		}
	}
	resolved := lw.resolvedLocked()
	lw.mu.Unlock()
	runAll(cancels)
	if resolved != nil {
		lw.w.Update(resolved)
	}
}

// ResourceError implements client.Watcher: the assignment cannot be had,
// and neither can its collections, whose watches stop.
func (lw *ledsWatcher) ResourceError(err error) {
	lw.mu.Lock()
	if lw.stopped {
		lw.mu.Unlock()
		return
	}
	cancels := lw.dropLocked(nil)
	lw.st = nil
	lw.mu.Unlock()
	runAll(cancels)
	lw.w.ResourceError(err)
}

// AmbientError implements client.Watcher.
func (lw *ledsWatcher) AmbientError(err error) { lw.w.AmbientError(err) }

// stop cancels the collection watches, and makes the events still queued
// for lw find it stopped. The tree cancels the EDS watch itself.
func (lw *ledsWatcher) stop() {
	lw.mu.Lock()
	lw.stopped = true
	cancels := lw.dropLocked(nil)
	lw.st = nil
	lw.mu.Unlock()
	runAll(cancels)
}

// dropLocked forgets the collection watches whose names are not in keep
// and returns their cancel functions, to run once mu is released.
func (lw *ledsWatcher) dropLocked(keep []string) []func() {
	if lw.st == nil {
		return nil
	}
	var cancels []func()
	for n, cw := range lw.st.colls {
		if !contains(keep, n) {
			delete(lw.st.colls, n)
			cancels = append(cancels, cw.cancel)
		}
	}
	return cancels
}

// resolvedLocked returns the assignment with its collections in place, or
// nil while one has not been heard of.
func (lw *ledsWatcher) resolvedLocked() *resources.Endpoints {
	for _, cw := range lw.st.colls {
		if !cw.received {
			return nil
		}
	}
	return lw.st.eds.WithCollections(func(name string) *resources.EndpointCollection {
		return lw.st.colls[name].value
	})
}

// Update implements client.Watcher.
func (cw *collWatch) Update(v *resources.EndpointCollection) { cw.set(v, nil) }

// ResourceError implements client.Watcher: the collection cannot be had
// (it does not exist, it was rejected and there is no earlier version, or
// its server is out of reach before it came). Its locality is then
// without endpoints, unreachable as for an empty collection (gRFC A95),
// while the assignment's other localities are used; the tree is told of
// the error as an ambient one, since its cluster stays usable.
func (cw *collWatch) ResourceError(err error) { cw.set(nil, err) }

// AmbientError implements client.Watcher: the collection's value stays.
func (cw *collWatch) AmbientError(err error) {
	lw := cw.lw
	lw.mu.Lock()
	current := !lw.stopped && lw.st != nil && lw.st.colls[cw.name] == cw
	lw.mu.Unlock()
	if current {
		lw.w.AmbientError(err)
	}
}

// set records an event of the collection and tells the tree's watch of
// the assignment it changes.
func (cw *collWatch) set(v *resources.EndpointCollection, err error) {
	lw := cw.lw
	lw.mu.Lock()
	if lw.stopped || lw.st == nil || lw.st.colls[cw.name] != cw {
		lw.mu.Unlock()
		return
	}
	cw.received, cw.value = true, v
	resolved := lw.resolvedLocked()
	lw.mu.Unlock()
	if err != nil {
		lw.w.AmbientError(err)
	}
	if resolved != nil {
		lw.w.Update(resolved)
	}
}

func contains(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}
