package watchers

import (
	"errors"
	"fmt"
	"sync"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// Errors a tree reports on its own account, beside the client's errors
// (client.ErrResourceNotFound and the rest) that it passes on. Match them
// with errors.Is.
var (
	// ErrNoVirtualHost: the route configuration has no virtual host whose
	// domains match TreeOptions.Authority. It comes to
	// TreeWatcher.ResourceError, since no route can be chosen.
	ErrNoVirtualHost = errors.New("no virtual host matches the authority")
	// ErrServerListener: the Listener is a server's (it has no
	// api_listener, gRFC A36), which has no routes for a client. It comes
	// to TreeWatcher.ResourceError.
	ErrServerListener = errors.New("server-side Listener (no api_listener)")
	// ErrAggregateCycle: an aggregate cluster reaches itself through its
	// children. It is the ClusterConfig.Err of every aggregate cluster on
	// the cycle and of those that lead to it.
	ErrAggregateCycle = errors.New("aggregate clusters form a cycle")
	// ErrAggregateTooDeep: aggregate clusters below a route's cluster are
	// nested more than MaxAggregateDepth deep. It is the ClusterConfig.Err
	// of the route's cluster.
	ErrAggregateTooDeep = errors.New("aggregate clusters nested too deep")
)

// MaxAggregateDepth is how many clusters deep the tree below a route's
// cluster may be: the route's cluster counts as 1, so a route may reach 15
// levels of aggregate clusters above a leaf. gRPC's xDS resolver has the
// same limit. It keeps a bad configuration from making the client watch an
// unbounded chain of clusters, one response at a time.
const MaxAggregateDepth = 16

// TreeOptions tune WatchConfigTree. The zero value is ready to use.
type TreeOptions struct {
	// Authority picks the virtual host of the route configuration (see
	// resources.FindVirtualHost), as a request's :authority would. "" means
	// the listener name, which is what a gRPC channel uses for a target
	// like "xds:///my-service".
	Authority string
	// VirtualHostAuthority, if set, is what the virtual host is chosen by,
	// given the Listener and Authority: for a consumer that rewrites the
	// host as its connection manager says first (package httpxds: Envoy's
	// strip_trailing_host_dot and strip_*_host_port, which gRPC ignores).
	// Nil: Authority as it is. It runs under the tree's lock: it must not
	// call the client.
	VirtualHostAuthority func(l *resources.Listener, authority string) string
	// Clusters, if set, names clusters the tree follows besides those the
	// routes name (see ClusterSet); a set serves one tree.
	Clusters *ClusterSet
}

// TreeWatcher receives the events of WatchConfigTree.
//
// Its methods are called one at a time, in order, on the client's callback
// goroutine, serialized with every other watcher of the same client and
// never with a lock held: they may watch, cancel (this tree included), read
// the client and close it. client.Client.Close called from a callback
// returns without waiting for that callback, and no callback of any
// watcher follows. They should return promptly: the client reads the next
// response only once they have.
type TreeWatcher interface {
	// Update delivers a new snapshot: complete, consistent, and different
	// from the previous one. It stays current until the next Update or
	// ResourceError. The snapshot and everything it points to are shared
	// and must not be modified.
	Update(s *Snapshot)
	// ResourceError reports that the tree as a whole cannot be used: the
	// listener or its route configuration does not exist, was rejected
	// with nothing good held, or the server could not be reached before it
	// arrived (the error wraps the client's error, e.g.
	// client.ErrResourceNotFound); or no virtual host matches the
	// authority (ErrNoVirtualHost). The last snapshot is no longer current.
	// A missing or broken cluster is not reported here but in its
	// ClusterConfig.Err.
	ResourceError(err error)
	// AmbientError reports trouble that leaves the last snapshot current:
	// a rejected update of a resource in the tree, or a lost connection to
	// the management server (reported once per outage).
	AmbientError(err error)
}

// TreeWatcherFuncs adapts functions to a TreeWatcher. Nil functions ignore
// their events.
type TreeWatcherFuncs struct {
	OnUpdate        func(*Snapshot) // TreeWatcher.Update
	OnResourceError func(error)     // TreeWatcher.ResourceError
	OnAmbientError  func(error)     // TreeWatcher.AmbientError
}

// Update implements TreeWatcher.
func (f TreeWatcherFuncs) Update(s *Snapshot) {
	if f.OnUpdate != nil {
		f.OnUpdate(s)
	}
}

// ResourceError implements TreeWatcher.
func (f TreeWatcherFuncs) ResourceError(err error) {
	if f.OnResourceError != nil {
		f.OnResourceError(err)
	}
}

// AmbientError implements TreeWatcher.
func (f TreeWatcherFuncs) AmbientError(err error) {
	if f.OnAmbientError != nil {
		f.OnAmbientError(err)
	}
}

// WatchConfigTree watches the Listener named listenerName and everything
// it leads to: its RouteConfiguration (over RDS, or inline), the virtual
// host for opts.Authority, every cluster a route of that virtual host can
// send to (aggregate clusters followed to their leaves) and the endpoints
// of each EDS cluster. w gets a Snapshot each time the whole tree is
// resolved and something in it changed; see the package documentation for
// the rules.
//
// It never blocks on the network. The returned cancel is idempotent and
// may be called from any goroutine, w's callbacks included; it drops every
// watch the tree holds, and once it returns no callback of w starts.
//
// A nil c is reported, not followed: w.ResourceError gets an error saying
// so, on a goroutine of its own, as a watch of a closed client is told.
func WatchConfigTree(c *client.Client, listenerName string, opts TreeOptions, w TreeWatcher) (cancel func()) {
	if c == nil {
		return reportNilClient(listenerName, w)
	}
	return sync.OnceFunc(watchConfigTree(c, listenerName, opts, w).cancel)
}

// reportNilClient tells w that a tree of listenerName has no client, unless
// the returned cancel comes first. There is no client goroutine to call w
// on, and w must not be called from WatchConfigTree, whose caller may hold
// a lock w takes: the call gets a goroutine of its own, which ends with it.
func reportNilClient(listenerName string, w TreeWatcher) (cancel func()) {
	if w == nil {
		return func() {} // no one to tell
	}
	err := fmt.Errorf("watchers: WatchConfigTree(%q): nil *client.Client (make one with client.New)", listenerName)
	var (
		mu       sync.Mutex
		canceled bool
	)
	go func() {
		mu.Lock()
		stop := canceled
		mu.Unlock()
		// The call counts as started once canceled was read false: a
		// cancel that returns after that read cannot stop it.
		if !stop {
			w.ResourceError(err)
		}
	}()
	return func() {
		mu.Lock()
		canceled = true
		mu.Unlock()
	}
}

// watchConfigTree starts the tree of WatchConfigTree; tests reach its
// counters through export_test.go.
func watchConfigTree(c *client.Client, listenerName string, opts TreeOptions, w TreeWatcher) *tree {
	t := &tree{
		c:         c,
		authority: opts.Authority,
		vhAuth:    opts.VirtualHostAuthority,
		w:         w,
		extra:     opts.Clusters,
		routes:    make(map[string]*watch[*resources.RouteConfig]),
		clusters:  make(map[string]*clusterNode),
		endpoints: make(map[string]*edsNode),
		outage:    make(map[any]bool),
	}
	if t.authority == "" {
		t.authority = listenerName
	}
	// Held while the first watch starts, so that its first callback, which
	// may run at once on the client's goroutine, finds the tree complete.
	t.mu.Lock()
	// Attached first, under mu: a cluster added to the set from now on
	// nudges the tree, whose nudge waits for mu, and so for the listener
	// watch it replays; one added before is read by the first pass.
	t.extra.attach(t)
	t.listener = startWatch(t, new(watch[*resources.Listener]), resources.ListenerType, listenerName)
	t.mu.Unlock()
	return t
}
