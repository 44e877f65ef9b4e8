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
// changed shape, or may be complete and no earlier pass began its snapshot
// (see tree.unresolved and patch.go). Watches started
// here from inside a client callback reach the server together: the client
// sends the subscriptions made while handling one response as one request
// per type.
func (t *tree) passLocked() outcome {
	t.gen++
	t.unresolved = 0
	t.build = nil
	needLocked(t, t.listener, false)
	// Sized for the tree as it stands: out becomes the snapshot's
	// ClusterMap.
	p := &pass{t: t, out: make(map[string]*ClusterConfig, len(t.clusters))}

	var (
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
		needLocked(t, rw, false)
		switch {
		case !rw.received:
		case !rw.has:
			treeErr = rw.err
		default:
			rc = rw.value
		}
	}
	if rc != nil {
		authority := t.authorityFor(l.value)
		vh = resources.FindVirtualHost(rc.VirtualHosts, authority)
		if vh == nil {
			treeErr = fmt.Errorf("%w %q in RouteConfiguration %q", ErrNoVirtualHost, authority, rc.Name)
		} else {
			p.routes(vh)
			p.setClusters()
		}
	}

	if p.aggPending {
		t.aggPendingGen = t.gen
	}

	var o outcome
	switch {
	case treeErr != nil:
		// Nothing of the old snapshot is worth keeping: the tree as a
		// whole is broken until the listener or route config changes.
		t.last = nil
		t.settleLocked(keepNone)
		if msg := treeErr.Error(); msg != t.lastErr {
			t.lastErr = msg
			o.resErr = treeErr
		}
	case t.unresolved > 0:
		// Incomplete: the snapshot in force, if any, stays, and so do
		// the watches it uses. If only routes' clusters are missing,
		// the callbacks complete this pass's snapshot as they arrive.
		t.settleLocked(keepAsIs)
		if vh != nil && !p.aggPending {
			t.build, t.buildGen, t.buildRC, t.buildVH = p.out, t.gen, rc, vh
		}
	default:
		// After a ResourceError last is nil, so even a snapshot equal to
		// the one before the error is delivered again.
		if s := newSnapshot(t.last, l.value, rc, vh, p.out); s != nil {
			t.last, t.lastErr = s, ""
			o.update = s
		}
		t.lastGen = t.gen
		t.settleLocked(keepLatest)
	}
	return o
}
