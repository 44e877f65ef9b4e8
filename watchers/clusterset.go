package watchers

import (
	"errors"
	"sort"
	"sync"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// ClusterSet names clusters a config tree follows besides those its routes
// name. A gRPC channel needs it for a route whose cluster specifier plugin
// (gRFC A28's route lookup service) names the cluster of each RPC: those
// clusters are in no route, and are wanted for as long as the plugin uses
// them. The tree watches each cluster of the set, and its endpoints, as if
// a route named it, and its snapshots include it once it has arrived (or
// is known missing); unlike a route's cluster, one still arriving does not
// hold the snapshot back, as in gRPC (gRFC A74's dynamic subscriptions).
//
// The zero value is an empty set, ready to use. A set serves at most one
// tree (TreeOptions.Clusters). Its methods may be called from any
// goroutine, a TreeWatcher's callbacks included.
type ClusterSet struct {
	mu   sync.Mutex
	refs map[string]int // how many Adds of each name are not released
	tree *tree          // the tree it serves, nil before and after
}

// Add puts name in the set until release is called; adding a name twice
// takes it twice. The tree's next snapshot that includes the cluster
// follows on the client's callback goroutine. release is idempotent.
func (s *ClusterSet) Add(name string) (release func()) {
	s.mu.Lock()
	if s.refs == nil {
		s.refs = make(map[string]int)
	}
	s.refs[name]++
	first, t := s.refs[name] == 1, s.tree
	s.mu.Unlock()
	if first && t != nil {
		t.nudge()
	}
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.refs[name]--
		last, t := s.refs[name] == 0, s.tree
		if last {
			delete(s.refs, name)
		}
		s.mu.Unlock()
		if last && t != nil {
			t.nudge()
		}
	})
}

// names returns the set's names, sorted; none for a nil set.
func (s *ClusterSet) names() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refs) == 0 {
		return nil // the usual case, at every pass of the tree
	}
	out := make([]string, 0, len(s.refs))
	for name := range s.refs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// attach makes s tell t of its changes; t's first pass, started by its
// listener watch, reads the names added before. Called with t.mu held
// (lock order: tree.mu, then ClusterSet.mu).
func (s *ClusterSet) attach(t *tree) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.tree = t
	s.mu.Unlock()
}

// detach stops s telling t of its changes. Called with t.mu held (lock
// order: tree.mu, then ClusterSet.mu).
func (s *ClusterSet) detach(t *tree) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.tree == t {
		s.tree = nil
	}
	s.mu.Unlock()
}

// setClusters walks the clusters of the tree's ClusterSet, after the
// routes' (a cluster both name is the routes', walked once). Like gRPC's
// dynamic cluster subscriptions they do not hold the snapshot back: their
// needs are soft (see needLocked), so one still arriving is just left out
// of the snapshot, and its arrival, which unresolved does not wait for,
// runs the pass that brings it in (see completeLocked). They are not
// marked as the routes' clusters: a route configuration naming the same
// clusters still replaces only itself, the set's being unchanged.
func (p *pass) setClusters() {
	names := p.t.extra.names()
	if len(names) == 0 {
		return
	}
	p.soft = true
	for _, name := range names {
		p.root(p.t.clusterLocked(name))
	}
	p.soft = false
}

// nudge has the tree walked again, with the set's names as they are then.
// A pass may only run on the client's callback goroutine, where the
// TreeWatcher is called, so the tree watches its listener once more: the
// client replays the cached Listener to a new watcher on that goroutine
// (or delivers it when it arrives), and that delivery runs the pass. One
// nudge pending covers every change made before it runs.
func (t *tree) nudge() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.nudging != nil {
		return
	}
	// The client calls watchers on its callback goroutine, never from
	// inside Watch, and fire takes mu: nudging is set before it runs.
	t.nudging = client.Watch(t.c, resources.ListenerType, t.listener.name, &nudgeWatcher{t: t})
}

// nudgeWatcher is the client watcher of a nudge.
type nudgeWatcher struct {
	t     *tree
	fired bool // guarded by t.mu
}

func (n *nudgeWatcher) Update(*resources.Listener) { n.fire() }
func (n *nudgeWatcher) AmbientError(error)         {}

func (n *nudgeWatcher) ResourceError(err error) {
	// A closed client tells its watchers on a goroutine of its own, where
	// the TreeWatcher must not be called; the tree is of no use then.
	if !errors.Is(err, client.ErrClosed) {
		n.fire()
	}
}

// fire runs the pass the nudge was for, once, on the client's callback
// goroutine.
func (n *nudgeWatcher) fire() {
	t := n.t
	t.mu.Lock()
	if n.fired || t.stopped {
		t.mu.Unlock()
		return
	}
	n.fired = true
	cancel := t.nudging
	t.nudging = nil
	o := t.passLocked()
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	t.deliver(o)
}

// steadyLocked reports whether the snapshot in force is the latest tree's
// and complete but for clusters of the ClusterSet still arriving, each of
// which the set names itself: no aggregate cluster waits for one. Then a
// set cluster arriving (or its endpoints) only adds its own ClusterConfig
// to the snapshot, which is what a pass would find.
func (t *tree) steadyLocked() bool {
	return t.last != nil && t.lastGen == t.gen && t.unresolved == 0 && t.aggPendingGen != t.gen
}

// addSetClusterLocked makes the next snapshot, in a steady tree, when a
// cluster of the ClusterSet that is not an aggregate arrived (n, with e
// its edsNode if it is an EDS cluster) or the endpoints e of some arrived
// (n nil): each such cluster now resolved joins the snapshot, without a
// walk of the tree. One still waiting for its endpoints stays out.
func (t *tree) addSetClusterLocked(n *clusterNode, e *edsNode) outcome {
	l := t.last
	clusters, changed := l.Clusters, false
	add := func(n *clusterNode) {
		cc := leafConfig(n, e)
		if cc == nil {
			return
		}
		// As settleLocked(keepLatest) would: the snapshot in force
		// uses them now.
		n.kept = true
		if e != nil {
			e.kept = true
		}
		clusters, changed = clusters.with(n.name, cc), true
	}
	switch {
	case n != nil:
		add(n)
	case e.usersGen == t.gen:
		for u := range e.usersAll() {
			add(u)
		}
	}
	if !changed {
		return outcome{}
	}
	t.last = &Snapshot{Listener: l.Listener, RouteConfig: l.RouteConfig, VirtualHost: l.VirtualHost, Clusters: clusters}
	return outcome{update: t.last}
}
