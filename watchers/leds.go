package watchers

import (
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// gRFC A95: a locality of an assignment may take its endpoints from an
// LbEndpointCollection resource, fetched apart (often from an authority of
// its own, whose fallback follows reachability alone). The tree resolves
// them below its endpoints watch: the edsNode is itself the client's
// watcher of its EDS service name; it watches the collections the
// assignment names and hands its watch the assignment with every
// collection put in its locality (resources.Endpoints.WithCollections)
// once each has been heard of. To the rest of the tree a change of a
// collection is a change of the endpoints: a snapshot never shows an
// assignment whose collections are still on their way, and it keeps the
// previous endpoints meanwhile (make-before-break).
//
// An assignment naming no collection passes straight through, under one
// hold of tree.mu as before; no collection is watched, and nothing is
// spent per edsNode: the state of those naming collections is in
// tree.leds, guarded by tree.mu like the rest of the tree.

// ledsState is what the tree keeps for an edsNode while its assignment
// names collections (tree.leds). Guarded by tree.mu.
type ledsState struct {
	eds   *resources.Endpoints // the assignment as received
	colls map[string]*collWatch
}

// collWatch is the client watch of one collection of an edsNode.
type collWatch struct {
	e      *edsNode // read-only
	name   string   // read-only
	cancel func()   // read-only once set
	// Guarded by tree.mu.
	received bool                          // an update or a resource error arrived
	value    *resources.EndpointCollection // nil if the collection cannot be had
}

// startEndpointsWatch starts the client watch of the EDS service name svc
// for e, e itself the watcher. Called with t.mu held; e is zero memory
// (see startWatch).
func startEndpointsWatch(t *tree, e *edsNode, svc string) {
	e.watch = watch[*resources.Endpoints]{t: t, name: svc, live: true}
	e.watch.cancel = client.Watch(t.c, resources.EndpointsType, svc, e)
}

// Update implements client.Watcher for the client's watch of e's name. It
// shadows the embedded watch's Update, which receives the assignment with
// its collections in place.
func (e *edsNode) Update(eds *resources.Endpoints) {
	t := e.t
	t.mu.Lock()
	if t.stopped || !e.live {
		t.mu.Unlock()
		return
	}
	var o outcome
	if names := eds.Collections(); names != nil {
		o = e.collectionsLocked(eds, names)
	} else {
		e.stopCollectionsLocked()
		o = e.watch.updateLocked(eds)
	}
	t.mu.Unlock()
	t.deliver(o)
}

// ResourceError implements client.Watcher: the assignment cannot be had,
// and its collections are not wanted any more.
func (e *edsNode) ResourceError(err error) {
	t := e.t
	t.mu.Lock()
	if t.stopped || !e.live {
		t.mu.Unlock()
		return
	}
	e.stopCollectionsLocked()
	o := e.watch.resourceErrorLocked(err)
	t.mu.Unlock()
	t.deliver(o)
}

// AmbientError implements client.Watcher.
func (e *edsNode) AmbientError(err error) { e.watch.AmbientError(err) }

// collectionsLocked records eds, which names the collections names: the
// new ones are watched, those no longer named dropped, and the watch told
// of the assignment if every collection has been heard of.
func (e *edsNode) collectionsLocked(eds *resources.Endpoints, names []string) outcome {
	t := e.t
	st := t.leds[e]
	if st == nil {
		st = &ledsState{colls: make(map[string]*collWatch, len(names))}
		if t.leds == nil {
			t.leds = make(map[*edsNode]*ledsState)
		}
		t.leds[e] = st
	}
	st.eds = eds
	for n, cw := range st.colls {
		if !contains(names, n) {
			delete(st.colls, n)
			cw.cancel()
		}
	}
	for _, n := range names {
		if st.colls[n] == nil {
			cw := &collWatch{e: e, name: n}
			st.colls[n] = cw
			// Never calls back at once: a cached value comes through the
			// client's callback queue, after this callback returns.
			cw.cancel = client.Watch(t.c, resources.EndpointCollectionType, n, cw)
		}
	}
	if r := st.resolved(); r != nil {
		return e.watch.updateLocked(r)
	}
	return outcome{}
}

// stopCollectionsLocked cancels e's collection watches, if any. Called when
// the assignment names none, cannot be had, or the tree drops e.
func (e *edsNode) stopCollectionsLocked() {
	st := e.t.leds[e] // t.leds is nil while no assignment named a collection
	if st == nil {
		return
	}
	for _, cw := range st.colls {
		cw.cancel()
	}
	delete(e.t.leds, e)
}

// resolved returns the assignment with its collections in place, or nil
// while one has not been heard of.
func (st *ledsState) resolved() *resources.Endpoints {
	for _, cw := range st.colls {
		if !cw.received {
			return nil
		}
	}
	return st.eds.WithCollections(func(name string) *resources.EndpointCollection {
		return st.colls[name].value
	})
}

// Update implements client.Watcher.
func (cw *collWatch) Update(v *resources.EndpointCollection) { cw.set(v, nil) }

// ResourceError implements client.Watcher: the collection cannot be had
// (it does not exist, it was rejected and there is no earlier version, or
// its server is out of reach before it came). Its locality is then
// without endpoints, unreachable as for an empty collection (gRFC A95),
// while the assignment's other localities are used; the tree is told of
// the error as an ambient one, since the cluster stays usable.
func (cw *collWatch) ResourceError(err error) { cw.set(nil, err) }

// AmbientError implements client.Watcher: the collection's value stays.
func (cw *collWatch) AmbientError(err error) {
	t := cw.e.t
	t.mu.Lock()
	var o outcome
	if cw.currentLocked() {
		o = cw.e.watch.ambientErrorLocked(err)
	}
	t.mu.Unlock()
	t.deliver(o)
}

// currentLocked tells whether cw is still a collection watch of a live
// edsNode: a dropped one may still get the events the client had queued.
func (cw *collWatch) currentLocked() bool {
	e := cw.e
	if e.t.stopped || !e.live {
		return false
	}
	st := e.t.leds[e]
	return st != nil && st.colls[cw.name] == cw
}

// set records an event of the collection and tells the tree what it
// changes: err, if any, as an ambient error, then the assignment.
func (cw *collWatch) set(v *resources.EndpointCollection, err error) {
	e := cw.e
	t := e.t
	t.mu.Lock()
	if !cw.currentLocked() {
		t.mu.Unlock()
		return
	}
	cw.received, cw.value = true, v
	var o outcome
	if err != nil {
		o = e.watch.ambientErrorLocked(err)
	}
	if r := t.leds[e].resolved(); r != nil {
		u := e.watch.updateLocked(r)
		o.ambient = append(o.ambient, u.ambient...)
		o.resErr, o.update = u.resErr, u.update
	}
	t.mu.Unlock()
	t.deliver(o)
}

func contains(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}
