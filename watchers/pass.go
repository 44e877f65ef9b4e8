package watchers

import (
	"fmt"

	"github.com/goxds/xds/resources"
)

// passLocked walks the latest tree from the listener down: it starts the
// watches the tree needs, decides whether the tree is complete, and if so
// what to tell the TreeWatcher. Then it drops the watches that neither the
// latest tree nor the snapshot in force uses.
//
// The walk is the whole tree, so it runs only when the tree may have
// changed shape or may be complete (see tree.unresolved). Watches started
// here from inside a client callback reach the server together: the client
// sends the subscriptions made while handling one response as one request
// per type.
func (t *tree) passLocked() outcome {
	t.gen++
	t.listener.neededGen = t.gen
	// Sized for the tree as it stands; out becomes the snapshot's
	// ClusterMap, and edsUsers what patchEndpointsLocked patches it by.
	p := &pass{
		t:        t,
		memo:     make(map[string]*result, len(t.clusters)),
		out:      make(map[string]*ClusterConfig, len(t.clusters)),
		edsUsers: make(map[string][]string, len(t.endpoints)),
	}

	var (
		roots   map[string]bool
		rc      *resources.RouteConfig
		vh      *resources.VirtualHost
		treeErr error
	)
	l := t.listener
	switch {
	case !l.received:
	case !l.has:
		treeErr = l.err
	case l.value.Server != nil:
		// A server's Listener decodes (the type serves both ends) but
		// has no routes for a client.
		treeErr = fmt.Errorf("%w: Listener %q", ErrServerListener, l.value.Name)
	case l.value.InlineRouteConfig != nil:
		rc = l.value.InlineRouteConfig
	default:
		rw := t.routeWatchLocked(l.value.RouteConfigName)
		rw.neededGen = t.gen
		switch {
		case !rw.received:
		case !rw.has:
			treeErr = rw.err
		default:
			rc = rw.value
		}
	}
	if rc != nil {
		vh = resources.FindVirtualHost(rc.VirtualHosts, t.authority)
		if vh == nil {
			treeErr = fmt.Errorf("%w %q in RouteConfiguration %q", ErrNoVirtualHost, t.authority, rc.Name)
		} else {
			roots = p.routes(vh)
		}
	}
	t.unresolved = t.countUnresolvedLocked()
	if roots != nil {
		p.extras(roots) // after the count: see there
	}

	var o outcome
	switch {
	case treeErr != nil:
		// Nothing of the old snapshot is worth keeping: the tree as a
		// whole is broken until the listener or route config changes.
		t.last = nil
		t.keepLocked(false)
		if msg := treeErr.Error(); msg != t.lastErr {
			t.lastErr = msg
			o.resErr = treeErr
		}
	case t.unresolved > 0:
		// Incomplete: the snapshot in force, if any, stays, and so do
		// the watches it uses.
	default:
		// After a ResourceError last is nil, so even a snapshot equal to
		// the one before the error is delivered again.
		if s := newSnapshot(t.last, l.value, rc, vh, p.out); s != nil {
			t.last, t.lastErr = s, ""
			o.update = s
		}
		t.lastGen, t.edsUsers = t.gen, p.edsUsers
		t.keepLocked(true)
	}
	t.sweepLocked()
	return o
}

// countUnresolvedLocked counts the watches the latest tree needs that have
// delivered nothing yet.
func (t *tree) countUnresolvedLocked() int {
	n := 0
	if !t.listener.received {
		n++
	}
	n += countUnresolved(t.routes, t.gen)
	n += countUnresolved(t.clusters, t.gen)
	n += countUnresolved(t.endpoints, t.gen)
	return n
}

func countUnresolved[T resources.Resource](ws map[string]*watch[T], gen uint64) int {
	n := 0
	for _, w := range ws {
		if w.neededGen == gen && !w.received {
			n++
		}
	}
	return n
}

// keepLocked records which watches the snapshot in force uses: those the
// latest tree needs when that tree has just become the snapshot in force
// (needed true), none when no snapshot is in force.
func (t *tree) keepLocked(needed bool) {
	keep(t.routes, t.gen, needed)
	keep(t.clusters, t.gen, needed)
	keep(t.endpoints, t.gen, needed)
}

func keep[T resources.Resource](ws map[string]*watch[T], gen uint64, needed bool) {
	for _, w := range ws {
		w.kept = needed && w.neededGen == gen
	}
}

// sweepLocked drops the watches that neither the latest tree nor the
// snapshot in force uses. The client unsubscribes from a name once its
// last watcher is gone.
func (t *tree) sweepLocked() {
	sweep(t.routes, t.gen)
	sweep(t.clusters, t.gen)
	sweep(t.endpoints, t.gen)
}

func sweep[T resources.Resource](ws map[string]*watch[T], gen uint64) {
	for name, w := range ws {
		if w.neededGen != gen && !w.kept {
			w.live = false
			w.cancel()
			delete(ws, name)
		}
	}
}
