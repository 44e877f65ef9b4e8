package watchers

import "github.com/goxds/xds/resources"

// The tree's work in proportion to what changed. A pass walks the whole
// tree (pass.go); what follows spares it for the changes that cannot alter
// the tree's shape, which at 10,000 clusters are nearly all of them:
//
//   - endpoints, or a cluster keeping its kind and edges, changing in the
//     snapshot in force: that cluster's ClusterConfig is replaced;
//   - a route configuration whose routes name the same clusters: only it
//     is replaced;
//   - clusters and endpoints arriving after the pass that found them
//     missing (the tree's first resolution, a route naming new clusters):
//     each is resolved as it arrives, and the last completes the snapshot
//     the pass began, without walking the tree again.

// buildingLocked reports whether the latest pass left a snapshot to
// complete as the missing parts arrive: it found the listener and virtual
// host, and every cluster it could not resolve was a route's cluster
// waiting for itself or its endpoints. Then build holds what the pass
// resolved, kept current by the callbacks (see resolveLocked), and the
// snapshot is built from it once nothing is unresolved. Clusters missing
// below an aggregate cluster leave its leaves unknown: the pass that
// follows their arrival works those out.
func (t *tree) buildingLocked() bool { return t.build != nil && t.buildGen == t.gen }

// resolveLocked records in build the ClusterConfig of n, a route's cluster
// that is not an aggregate, if it is resolved; e is its edsNode if it is
// an EDS cluster.
func (t *tree) resolveLocked(n *clusterNode, e *edsNode) {
	if !t.buildingLocked() || n == nil || (n.has && n.value.Kind == resources.ClusterKindAggregate) {
		return
	}
	if cc := leafConfig(n, e); cc != nil {
		t.build[n.name] = cc
	}
}

// completeLocked makes the snapshot if the latest tree may be complete: a
// change that does not alter which resources the tree needs cannot
// complete a tree that still waits for some.
func (t *tree) completeLocked() outcome {
	switch {
	case t.unresolved > 0:
		return outcome{}
	case t.buildingLocked():
		return t.finishBuildLocked()
	}
	return t.passLocked()
}

// finishBuildLocked delivers the snapshot the latest pass began, now that
// every part has arrived, as that pass would have had it found them all.
func (t *tree) finishBuildLocked() outcome {
	clusters := t.build
	t.build = nil
	var o outcome
	if s := newSnapshot(t.last, t.listener.value, t.buildRC, t.buildVH, clusters); s != nil {
		t.last, t.lastErr = s, ""
		o.update = s
	}
	t.lastGen = t.gen
	t.settleLocked(keepLatest)
	return o
}

// patchedConfig returns old, the ClusterConfig of cluster w, for w's new
// version, which has the same edges: the endpoints, leaves or error found
// for the old version hold for the new one.
func patchedConfig(old *ClusterConfig, w *watch[*resources.Cluster]) *ClusterConfig {
	if !w.has {
		return &ClusterConfig{Name: w.name, Err: w.err}
	}
	cc := *old
	cc.Cluster = w.value
	if w.value.Kind == resources.ClusterKindLogicalDNS {
		cc.DNSAddress = dnsAddress(w.value)
	}
	return &cc
}

// patchRoutesLocked makes the next snapshot when the route configuration
// of the snapshot in force changed: if the routes of the new virtual host
// name the same clusters as the old one's, the clusters are what they were
// and only the route configuration is replaced, at the cost of reading the
// routes; otherwise the tree has changed shape and a pass walks it.
func (t *tree) patchRoutesLocked(rc *resources.RouteConfig) outcome {
	vh := resources.FindVirtualHost(rc.VirtualHosts, t.authorityFor(t.last.Listener))
	if vh == nil || !t.sameRootsLocked(vh) {
		return t.passLocked()
	}
	l := t.last
	t.last = &Snapshot{Listener: l.Listener, RouteConfig: rc, VirtualHost: vh, Clusters: l.Clusters}
	return outcome{update: t.last}
}

// sameRootsLocked reports whether the routes of vh name exactly the
// clusters the routes of the latest tree name. The pass that made the
// latest tree marked those clusters with rootMark and counted them; this
// moves each cluster vh names to a new mark, so that, with no cluster
// outside the old set, the counts agree only if the sets do.
func (t *tree) sameRootsLocked(vh *resources.VirtualHost) bool {
	old := t.rootMark
	t.mark++
	mark, n := t.mark, 0
	for name := range routeClusters(vh) {
		c := t.clusters[name]
		switch {
		case c == nil:
			return false
		case c.rootMark == mark:
		case c.rootMark == old:
			c.rootMark = mark
			n++
		default:
			return false
		}
	}
	if n != t.roots {
		return false
	}
	t.rootMark = mark
	return true
}

// patchClusterLocked makes the next snapshot when cluster w changed
// without changing the tree's shape (same kind, same endpoints or
// children, or still unusable) and the snapshot in force is the latest
// tree's: only w's own ClusterConfig can differ, since what a cluster
// resolves to depends on its edges, and a pass would find the rest as it
// is. An aggregate cluster the snapshot leaves out (too deep below some
// route's cluster) shows nowhere, so its change makes no snapshot, as a
// pass would find.
func (t *tree) patchClusterLocked(w *watch[*resources.Cluster]) outcome {
	old := t.last.Clusters.Get(w.name)
	if old == nil {
		return outcome{}
	}
	cc := patchedConfig(old, w)
	if cc.sameAs(old) {
		return outcome{}
	}
	l := t.last
	t.last = &Snapshot{Listener: l.Listener, RouteConfig: l.RouteConfig, VirtualHost: l.VirtualHost, Clusters: l.Clusters.with(w.name, cc)}
	return outcome{update: t.last}
}

// patchEndpointsLocked makes the next snapshot when only the endpoints of
// e changed and the snapshot in force is the latest tree's: the
// ClusterConfigs of the clusters fetching those endpoints are replaced and
// every other part is kept, which is what a pass would find, without
// walking thousands of clusters to change one. The new snapshot's
// ClusterMap shares all but the replaced entries' shards with the old one,
// so the cost follows the size of the change, not of the tree.
func (t *tree) patchEndpointsLocked(e *edsNode) outcome {
	if e.usersGen != t.lastGen {
		return outcome{} // no cluster of the snapshot in force uses them
	}
	clusters, changed := t.last.Clusters, false
	for n := range e.usersAll() {
		name := n.name
		old := clusters.Get(name)
		if old == nil || old.Cluster == nil {
			continue // cannot happen: the pass put every user in the snapshot
		}
		cc := &ClusterConfig{Name: name, Cluster: old.Cluster}
		if e.has {
			cc.Endpoints = e.value
		} else {
			cc.Err = e.err
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
