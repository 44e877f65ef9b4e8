package httpxds

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/goxds/xds/dataplane/cluster"

	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/treeerr"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// The configuration of each host a Transport sends to is a config tree
// watch (package watchers) of the Listener the host names, with the
// virtual host chosen for the request's Host: one watch per (URL host,
// Host header) pair, shared by every request to it, started by the first
// and dropped once no request has used it for HostIdleTimeout, or at
// Close. The clusters of every host's routes go to the Transport's one
// cluster.Set, so that hosts routing to the same clusters share their
// endpoints and connections.

// hostKey names a watch: the URL's host, which names the Listener, and
// the authority (Host header) that chooses the virtual host.
type hostKey struct{ host, authority string }

// hostWatch is the configuration watch of one hostKey.
type hostWatch struct {
	// Read-only after acquireHost.
	t        *Transport
	key      hostKey
	listener string
	cancel   func()
	// first is closed at the first state, good or not.
	first     chan struct{}
	firstOnce sync.Once
	// state is the configuration in force, or why there is none; nil
	// before the first.
	state atomic.Pointer[hostState]

	// Guarded by t.mu.
	inflight int
	lastUsed int64 // the clock's UnixNano
	snap     *watchers.Snapshot
	gone     bool // dropped: its snapshot no longer counts
}

// hostState is a host's configuration (cfg) or the reason it has none.
type hostState struct {
	cfg *hostConfig
	err error
}

// HostError is what a request fails with while its host has no usable
// configuration: the Listener the host names does not exist, was
// rejected, or has no virtual host for the request's Host; or the
// management server could not be reached before it came. Err wraps the
// cause (client.ErrResourceNotFound, client.ErrResourceInvalid,
// client.ErrServerUnavailable, watchers.ErrNoVirtualHost, ...).
type HostError struct {
	// Host is the request URL's host, Listener the Listener it names.
	Host, Listener string
	// NodeID is the bootstrap's node ID, what the management server
	// knows the client by.
	NodeID string
	Err    error
}

// Error names the host, the listener and the node ID.
func (e *HostError) Error() string {
	return fmt.Sprintf("httpxds: no usable xDS configuration for host %q (xDS node ID %q): %s", e.Host, e.NodeID, treeerr.Text(e.Listener, e.Err))
}

// Unwrap returns the cause.
func (e *HostError) Unwrap() error { return e.Err }

// acquireHost returns the watch of key, started if new, counted in use
// until releaseHost.
func (t *Transport) acquireHost(host, authority string) (*hostWatch, error) {
	key := hostKey{host, authority}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrTransportClosed
	}
	h := t.hosts[key]
	if h != nil {
		h.inflight++
		t.mu.Unlock()
		return h, nil
	}
	h = &hostWatch{t: t, key: key, listener: t.b.ListenerResourceName(host), first: make(chan struct{}), inflight: 1}
	t.hosts[key] = h
	if t.sweep == nil {
		t.sweep = t.clock.AfterFunc(t.idleHost, t.sweepHosts)
	}
	t.mu.Unlock()
	// Outside mu: a cached tree is delivered on the client's goroutine,
	// which takes mu; cancel is set before any request can drop h.
	var once sync.Once
	var cancel func()
	stop := watchers.WatchConfigTree(t.xc, h.listener, watchers.TreeOptions{Authority: authority, VirtualHostAuthority: h.vhAuthority}, h)
	cancel = func() { once.Do(stop) }
	t.mu.Lock()
	h.cancel = cancel
	closed := t.closed
	t.mu.Unlock()
	if closed {
		cancel()
		return nil, ErrTransportClosed
	}
	return h, nil
}

// vhAuthority is the authority h's virtual host is chosen by: the
// request's, rewritten as the Listener's connection manager says
// (strip_trailing_host_dot, strip_*_host_port), as Envoy's connection
// manager rewrites the Host before routing. The port
// strip_matching_host_port drops is the one the URL names, the port the
// Listener is named for, as an Envoy sidecar's outbound listener is the
// service port's.
func (h *hostWatch) vhAuthority(l *resources.Listener, authority string) string {
	if l.StripHostPort == resources.HostPortKeep && !l.StripTrailingHostDot {
		return authority
	}
	return rewriteHost(authority, l.StripHostPort, l.StripTrailingHostDot, urlPort(h.key.host))
}

// urlPort is the port of a URL's host, 0 for none.
func urlPort(host string) int {
	if _, p, ok := splitPort(host); ok {
		n, _ := strconv.Atoi(p)
		return n
	}
	return 0
}

// releaseHost ends a request's use of h.
func (t *Transport) releaseHost(h *hostWatch) {
	now := t.clock.Now().UnixNano()
	t.mu.Lock()
	h.inflight--
	h.lastUsed = now
	t.mu.Unlock()
}

// wait returns h's configuration, waiting for the first (bounded by ctx).
func (h *hostWatch) wait(ctx context.Context) (*hostConfig, error) {
	if st := h.state.Load(); st != nil {
		return st.cfg, st.err
	}
	select {
	case <-h.first:
	case <-ctx.Done():
		return nil, fmt.Errorf("httpxds: waiting for the xDS configuration of host %q (listener %q): %w", h.key.host, h.listener, ctx.Err())
	}
	st := h.state.Load()
	if st == nil { // Close woke it
		return nil, ErrTransportClosed
	}
	return st.cfg, st.err
}

// setState publishes st and wakes the requests waiting for a first one.
func (h *hostWatch) setState(st *hostState) {
	h.state.Store(st)
	h.firstOnce.Do(func() { close(h.first) })
}

// Update implements watchers.TreeWatcher: a new configuration for the
// host. Its clusters join the Set before requests can route by it.
func (h *hostWatch) Update(s *watchers.Snapshot) {
	t := h.t
	t.mu.Lock()
	if t.closed || h.gone {
		t.mu.Unlock()
		return
	}
	var prev *hostConfig
	if st := h.state.Load(); st != nil {
		prev = st.cfg
	}
	cfg := newHostConfig(h, s, prev)
	prevSnap := h.snap
	h.snap = s
	t.updateSetLocked(h, prevSnap)
	t.logLocked(slog.LevelDebug, "xDS configuration applied", "host", h.key.host, "listener", h.listener,
		"route_config", s.RouteConfig.Name, "virtual_host", s.VirtualHost.Name, "clusters", s.Clusters.Len())
	applied := t.applied
	t.finishAndUnlock()
	// The side channels this host's configuration before named and this
	// one does not close once their calls end (gRFC A92).
	t.nameSide(h, extauthzgrpc.ClientServices(s.Listener, s.VirtualHost))
	h.setState(&hostState{cfg: cfg})
	if applied != nil {
		applied(h.key.host, h.key.authority, s, nil)
	}
}

// ResourceError implements watchers.TreeWatcher: the host has no usable
// configuration until the next Update; its requests fail with a
// *HostError.
func (h *hostWatch) ResourceError(err error) {
	t := h.t
	herr := &HostError{Host: h.key.host, Listener: h.listener, NodeID: t.b.Node.ID, Err: err}
	t.mu.Lock()
	if t.closed || h.gone {
		t.mu.Unlock()
		return
	}
	if h.snap != nil {
		h.snap = nil
		t.updateSetLocked(h, nil)
	}
	t.logLocked(slog.LevelWarn, "no usable xDS configuration: requests to the host fail until there is one", "host", h.key.host, "err", err)
	applied := t.applied
	t.finishAndUnlock()
	h.setState(&hostState{err: herr})
	if applied != nil {
		applied(h.key.host, h.key.authority, nil, herr)
	}
}

// AmbientError implements watchers.TreeWatcher: the configuration in
// force stays; the log hears of it.
func (h *hostWatch) AmbientError(err error) {
	h.t.logger.Warn("keeping the xDS configuration in force", "host", h.key.host, "listener", h.listener, "err", err)
}

// mergedState is what the Set was last given: the snapshot of one host
// (single, with its virtual host), or a union of several (single nil):
// its snapshot, and the virtual host of each host it was made from.
type mergedState struct {
	single *hostWatch
	vh     *resources.VirtualHost
	snap   *watchers.Snapshot
	vhs    map[*hostWatch]*resources.VirtualHost
}

// updateSetLocked gives the Set the clusters of every host with a
// configuration, after h's changed from prev (h nil: hosts were
// dropped). With one host, the usual case, the Set takes its snapshot as
// it is. With several, it takes their union; an update of one host that
// keeps its routes (an update of endpoints) changes the union's clusters
// that changed in that host only. Either way, an update that keeps the
// routes costs the clusters that changed.
func (t *Transport) updateSetLocked(h *hostWatch, prev *watchers.Snapshot) {
	var live []*hostWatch
	for _, w := range t.hosts {
		if w.snap != nil && !w.gone {
			live = append(live, w)
		}
	}
	switch len(live) {
	case 0:
		t.set.Clear()
		t.merged = nil
		return
	case 1:
		w := live[0]
		if m := t.merged; m != nil && m.single == w && m.vh == w.snap.VirtualHost {
			t.set.Update(w.snap, nil)
			return
		}
		t.set.Update(w.snap, cluster.RouteClusters(w.snap.VirtualHost))
		t.merged = &mergedState{single: w, vh: w.snap.VirtualHost}
		return
	}
	if m := t.merged; m != nil && m.single == nil && h != nil && prev != nil && h.snap != nil &&
		len(m.vhs) == len(live) && m.vhs[h] == h.snap.VirtualHost && m.vhs[h] == prev.VirtualHost {
		clusters, ok := m.snap.Clusters, true
		for name := range h.snap.Clusters.Changes(prev.Clusters) {
			cc := h.snap.Clusters.Get(name)
			for _, w := range live {
				if cc != nil {
					break
				}
				cc = w.snap.Clusters.Get(name)
			}
			if cc == nil {
				ok = false // gone from every host: the union is made anew
				break
			}
			clusters = clusters.With(name, cc)
		}
		if ok {
			m.snap = &watchers.Snapshot{Clusters: clusters}
			t.set.Update(m.snap, nil)
			return
		}
	}
	// Several hosts, made anew: the first host (by key) naming a cluster
	// gives its ClusterConfig; every tree follows the same resources, so
	// they agree but for the moment one has an update the other has yet
	// to get. This costs the clusters of every host.
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i].key, live[j].key
		return a.host < b.host || a.host == b.host && a.authority < b.authority
	})
	union := make(map[string]*watchers.ClusterConfig)
	roots := make(map[string]struct{})
	m := &mergedState{vhs: make(map[*hostWatch]*resources.VirtualHost, len(live))}
	for _, w := range live {
		for name, cc := range w.snap.Clusters.All() {
			if _, ok := union[name]; !ok {
				union[name] = cc
			}
		}
		for name := range cluster.RouteClusters(w.snap.VirtualHost) {
			roots[name] = struct{}{}
		}
		m.vhs[w] = w.snap.VirtualHost
	}
	m.snap = &watchers.Snapshot{Clusters: watchers.NewClusterMap(union)}
	t.set.Update(m.snap, roots)
	t.merged = m
}

// sweepHosts drops the watches no request has used for HostIdleTimeout,
// and arms itself again while watches remain.
func (t *Transport) sweepHosts() {
	now := t.clock.Now().UnixNano()
	var cancels []func()
	var gone []*hostWatch
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	changed := false
	for key, h := range t.hosts {
		if h.inflight > 0 || now-h.lastUsed < int64(t.idleHost) || h.cancel == nil {
			continue
		}
		delete(t.hosts, key)
		h.gone = true
		gone = append(gone, h)
		cancels = append(cancels, h.cancel)
		if h.snap != nil {
			h.snap = nil
			changed = true
		}
		t.logLocked(slog.LevelDebug, "host unused: its xDS configuration is no longer watched", "host", key.host, "listener", h.listener)
	}
	if changed {
		t.updateSetLocked(nil, nil)
	}
	t.sweep = nil
	if len(t.hosts) > 0 {
		t.sweep = t.clock.AfterFunc(t.idleHost, t.sweepHosts)
	}
	t.finishAndUnlock()
	for _, c := range cancels {
		c()
	}
	for _, h := range gone {
		t.nameSide(h, nil)
	}
}

// nameSide tells t's side channels the services h's configuration names
// (none once h is gone): those no host names close once their calls end.
// An Update that named them as the sweep dropped h takes them back.
func (t *Transport) nameSide(h *hostWatch, named []*resources.GrpcService) {
	t.authz.Name(h, named)
	if named == nil {
		return
	}
	t.mu.Lock()
	gone := h.gone
	t.mu.Unlock()
	if gone {
		t.authz.Name(h, nil)
	}
}
