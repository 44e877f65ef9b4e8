package cluster

import (
	"sync/atomic"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/watchers"
)

// Subscriber follows clusters besides those the routes name, so that the
// snapshots bring them: a *watchers.ClusterSet, the config tree's.
type Subscriber interface {
	// Add follows name until release is called; each Add is released on
	// its own.
	Add(name string) (release func())
}

// Holds are the clusters a host keeps in its Set besides those the routes
// name: the clusters a route's cluster specifier plugin chooses per
// request (grpcxds: the targets of its RLS policies, gRFC A28). A cluster
// is held from its first Add to the release of its last: while held it
// is followed by the Subscriber (the config tree subscribes to it and its
// endpoints), it is a root of the Set once a snapshot has it, it never
// goes idle (Held is the Host's Pinned), and whether it is failing can be
// read by pickers (Failing). Its last release drops it from the Set
// unless a route names it.
//
// The zero value holds nothing and is ready to use. Holds are guarded by
// the Set's owner's lock, like the Set, which every method is given, but
// Failing, which pickers call holding nothing. The owner updates its Set
// through Holds.Update, whose roots include the held clusters.
type Holds struct {
	closed bool
	// refs count the holds on each cluster (Add, not yet released).
	refs map[string]int
	// roots are the held clusters the Set's snapshot has: roots of the
	// Set besides the routes' (a route may name them too).
	roots map[string]struct{}
	// sub follows the held clusters (nil: nothing does yet); releases
	// release what Holds added to it, one per held cluster.
	sub      Subscriber
	releases map[string]func()
	// failing are the held clusters in TRANSIENT_FAILURE (nil: none), for
	// Failing; replaced, never modified, when that changes (Publish).
	failing atomic.Pointer[map[string]bool]
}

// Hold is one Add of a cluster, for Release.
type Hold struct {
	name     string
	released bool
}

// Subscribe makes sub follow the held clusters (nil: nothing), in place
// of the Subscriber before, which is released of them: a new config tree
// (gRPC: the channel left idle mode) must learn the clusters held.
func (h *Holds) Subscribe(sub Subscriber) {
	if sub == h.sub {
		return
	}
	for name, release := range h.releases {
		release()
		delete(h.releases, name)
	}
	h.sub = sub
	for name := range h.refs {
		h.followLocked(name)
	}
}

// followLocked has the Subscriber follow name. Its lock, and the tree's,
// come after the owner's in the lock order (the tree calls the owner only
// from its callbacks, with no lock held).
func (h *Holds) followLocked(name string) {
	if h.sub == nil {
		return
	}
	if h.releases == nil {
		h.releases = make(map[string]func())
	}
	h.releases[name] = h.sub.Add(name)
}

// Add holds the named cluster in set until Release: the first hold has
// the Subscriber follow it, and, if set's snapshot has it already (a
// route's, or one held before), makes it a root now, as the next Update
// would, or wakes it (a route's cluster, idle until now). After Close it
// holds nothing.
func (h *Holds) Add(set *Set, name string) *Hold {
	if h.closed {
		return &Hold{name: name, released: true}
	}
	if h.refs == nil {
		h.refs = make(map[string]int)
	}
	if h.refs[name]++; h.refs[name] == 1 {
		h.followLocked(name)
	}
	if set.snap != nil && set.snap.Clusters.Get(name) != nil {
		if h.roots == nil {
			h.roots = make(map[string]struct{})
		}
		h.roots[name] = struct{}{}
		set.Add(name)
	}
	return &Hold{name: name}
}

// Release undoes the Add that returned hold, once: the last hold of a
// cluster lets the Subscriber go of it, and drops it from set unless a
// route of set's snapshot names it. It reports whether it changed
// anything: false for a hold released already, or after Close.
func (h *Holds) Release(set *Set, hold *Hold) bool {
	name := hold.name
	if h.closed || hold.released || h.refs[name] == 0 {
		return false
	}
	hold.released = true
	if h.refs[name]--; h.refs[name] == 0 {
		delete(h.refs, name)
		delete(h.roots, name)
		if release := h.releases[name]; release != nil {
			release()
			delete(h.releases, name)
		}
		if set.snap != nil {
			if _, routed := RouteClusters(set.snap.VirtualHost)[name]; !routed {
				set.Remove(name)
			}
		}
	}
	return true
}

// Held reports whether the named cluster is held: the Host's Pinned (a
// held cluster was chosen for a request, so it connects at once, and
// stays awake while held).
func (h *Holds) Held(name string) bool { return h.refs[name] > 0 }

// Update applies snap to set, as Set.Update does, with the held clusters
// snap has as roots besides the routes'. sameRoutes says the routes are
// those of the last Update (the same virtual host): then, if the held
// clusters snap has are those it had, the clusters are the same, and set
// looks only at those whose ClusterConfig changed, as an Update with nil
// roots does. That is the usual update (one cluster's endpoints), and the
// check costs the holds, not the clusters.
func (h *Holds) Update(set *Set, snap *watchers.Snapshot, sameRoutes bool) {
	if sameRoutes && h.rootsSame(snap) {
		set.Update(snap, nil)
		return
	}
	roots := RouteClusters(snap.VirtualHost)
	clear(h.roots)
	for name := range h.refs {
		if snap.Clusters.Get(name) != nil {
			roots[name] = struct{}{}
			if h.roots == nil {
				h.roots = make(map[string]struct{})
			}
			h.roots[name] = struct{}{}
		}
	}
	set.Update(snap, roots)
}

// rootsSame reports whether the held clusters snap has are h.roots. It
// allocates nothing.
func (h *Holds) rootsSame(snap *watchers.Snapshot) bool {
	n := 0
	for name := range h.refs {
		_, root := h.roots[name]
		if (snap.Clusters.Get(name) != nil) != root {
			return false
		}
		if root {
			n++
		}
	}
	return n == len(h.roots)
}

// Publish makes Failing say which held clusters of set are in
// TRANSIENT_FAILURE, when that changed; it allocates only then. The owner
// calls it after each event, once the Set has settled.
func (h *Holds) Publish(set *Set) {
	cur := h.failing.Load()
	n, same := 0, true
	for name := range h.refs {
		f := failingIn(set, name)
		if f {
			n++
		}
		if f != (cur != nil && (*cur)[name]) {
			same = false
		}
	}
	if same && (cur == nil || len(*cur) == n) {
		return
	}
	if n == 0 {
		h.failing.Store(nil)
		return
	}
	failing := make(map[string]bool, n)
	for name := range h.refs {
		if failingIn(set, name) {
			failing[name] = true
		}
	}
	h.failing.Store(&failing)
}

// failingIn reports whether set's cluster name is in TRANSIENT_FAILURE;
// one the snapshot has not brought yet is not.
func failingIn(set *Set, name string) bool {
	s, ok := set.ClusterState(name)
	return ok && s == endpoint.TransientFailure
}

// Failing reports whether the held cluster name was in TRANSIENT_FAILURE
// at the last Publish. It takes no lock: pickers call it (grpcxds: an RLS
// policy's, to pass over a failing target).
func (h *Holds) Failing(name string) bool {
	m := h.failing.Load()
	return m != nil && (*m)[name]
}

// Close lets the Subscriber go of every held cluster and forgets them;
// Add and Release do nothing after. The Set's clusters are the owner's to
// close (Set.Close).
func (h *Holds) Close() {
	h.closed = true
	for _, release := range h.releases {
		release()
	}
	h.refs, h.releases, h.roots = nil, nil, nil
	h.failing.Store(nil)
}
