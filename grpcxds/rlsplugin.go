package grpcxds

import (
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/rls"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// How the goxds balancer routes by an RLS cluster specifier plugin
// (rlsconfig.go has the configuration). For each plugin the routes of the
// virtual host use, it runs grpc-go's RLS policy as a child, which owns
// the lookups, their cache, throttling, backoff and the default target.
// The RLS policy runs a child (rlsTarget) for each target the lookup
// service names; each asks the balancer for its cluster (addTarget). The
// balancer adds the cluster to the resolver's watchers.ClusterSet, so the
// tree subscribes to it and its endpoints, and builds the cluster like a
// route's when a snapshot brings it. A route picker hands an RPC whose
// route names a plugin to that plugin's RLS picker, which picks a target
// and delegates to the target's picker, which picks in the cluster.
//
// Lock order: the RLS policy calls the balancer (addTarget, the picker
// updates of pluginCC) under locks of its own, so the balancer never
// calls the RLS policy with mu held; its targets' states are reported
// after mu is released (rlsTellLocked).

// rlsHostKey is the resolver state attribute under which the balancer
// hands its RLS policies, and through them their children, itself.
type rlsHostKey struct{}

// clusterSetKey is the resolver state attribute of the resolver's
// *watchers.ClusterSet.
type clusterSetKey struct{}

// rlsState is the balancer's RLS part. Guarded by xdsBalancer.mu, but
// published, which pickers read.
type rlsState struct {
	// plugins are the RLS policies, by plugin name.
	plugins map[string]*pluginLB
	// pickers are the RLS policies' pickers, by plugin name; replaced,
	// never modified, since route pickers share it.
	pickers map[string]balancer.Picker
	// targets are the RLS children, by the cluster they route to.
	targets map[string]map[*rlsTarget]struct{}
	// roots are the clusters of targets that the balancer holds because
	// the snapshot has them (a route may name them too).
	roots map[string]struct{}
	// vh and rc are the virtual host and route configuration plugins
	// were last started for (updatePlugins); nil for none.
	vh *resources.VirtualHost
	rc *resources.RouteConfig
	// set is the resolver's ClusterSet, and releases the entries the
	// balancer holds in it, one per cluster with targets.
	set      *watchers.ClusterSet
	releases map[string]func()
	// published is the route picker in force (nil: none), where target
	// pickers find the cluster pickers.
	published atomic.Pointer[routePicker]
}

// pluginLB is one RLS policy.
type pluginLB struct {
	name string
	cfg  *rlsPluginConfig // last handed to bal
	// bal is built and updated only from UpdateClientConnState, which gRPC
	// never runs concurrently with Close.
	bal balancer.Balancer
}

// pluginCC is the ClientConn of an RLS policy: the channel's, but for its
// state, which becomes the plugin's picker in the route picker.
type pluginCC struct {
	balancer.ClientConn
	b  *xdsBalancer
	pl *pluginLB
}

// UpdateState implements balancer.ClientConn. The RLS policy's state does
// not count towards the channel's: the clusters its targets route to do.
func (cc *pluginCC) UpdateState(s balancer.State) {
	b := cc.b
	b.mu.Lock()
	if b.closed || b.rls.plugins[cc.pl.name] != cc.pl {
		b.mu.Unlock()
		return
	}
	pickers := make(map[string]balancer.Picker, len(b.rls.pickers)+1)
	for name, p := range b.rls.pickers {
		pickers[name] = p
	}
	pickers[cc.pl.name] = s.Picker
	b.rls.pickers, b.republish = pickers, true
	b.finishAndUnlock()
}

// rlsAdoptSetLocked adopts the resolver's ClusterSet.
func (b *xdsBalancer) rlsAdoptSetLocked(rs resolver.State) {
	set, _ := rs.Attributes.Value(clusterSetKey{}).(*watchers.ClusterSet)
	if set == b.rls.set {
		return
	}
	// A new resolver (the channel left idle mode): its tree must learn
	// the clusters in use.
	for name, release := range b.rls.releases {
		release()
		delete(b.rls.releases, name)
	}
	b.rls.set = set
	for name := range b.rls.targets {
		b.holdLocked(name)
	}
}

// rlsRootsLocked adds to roots the clusters of RLS targets that the
// snapshot has, and records them as the balancer's (rls.roots).
func (b *xdsBalancer) rlsRootsLocked(roots map[string]struct{}) {
	clear(b.rls.roots)
	for name := range b.rls.targets {
		if b.snap.Clusters.Get(name) != nil {
			roots[name] = struct{}{}
			if b.rls.roots == nil {
				b.rls.roots = make(map[string]struct{})
			}
			b.rls.roots[name] = struct{}{}
		}
	}
}

// rlsRootsSameLocked reports whether the clusters of RLS targets that the
// snapshot has are the balancer's (rls.roots), so that an update keeping
// the virtual host keeps the balancer's clusters. It allocates nothing and
// costs the targets, not the clusters.
func (b *xdsBalancer) rlsRootsSameLocked() bool {
	n := 0
	for name := range b.rls.targets {
		_, held := b.rls.roots[name]
		if (b.snap.Clusters.Get(name) != nil) != held {
			return false
		}
		if held {
			n++
		}
	}
	return n == len(b.rls.roots)
}

// holdLocked puts name in the resolver's ClusterSet. The set's lock and
// the tree's come after mu in the lock order (the tree calls the balancer
// only from its callbacks, with no lock held).
func (b *xdsBalancer) holdLocked(name string) {
	if b.rls.set == nil {
		return
	}
	if b.rls.releases == nil {
		b.rls.releases = make(map[string]func())
	}
	b.rls.releases[name] = b.rls.set.Add(name)
}

// addTarget registers an RLS child that routes to cluster, and returns
// the function that unregisters it.
func (b *xdsBalancer) addTarget(t *rlsTarget, cluster string) (release func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return func() {}
	}
	if b.rls.targets == nil {
		b.rls.targets = make(map[string]map[*rlsTarget]struct{})
	}
	ts := b.rls.targets[cluster]
	if ts == nil {
		ts = make(map[*rlsTarget]struct{})
		b.rls.targets[cluster] = ts
		b.holdLocked(cluster)
	}
	ts[t] = struct{}{}
	t.told, t.picker = connectivity.Shutdown, rlsTargetPicker{b: b, cluster: cluster}
	if b.snap != nil && b.snap.Clusters.Get(cluster) != nil {
		// The snapshot has it already (a route's, or one held before):
		// a root now, as the next update would find.
		if b.rls.roots == nil {
			b.rls.roots = make(map[string]struct{})
		}
		b.rls.roots[cluster] = struct{}{}
		b.set.Add(cluster) // or wakes it: a route's cluster, idle until now
	}
	b.finishAndUnlock()
	return func() { b.removeTarget(t, cluster) }
}

// removeTarget undoes addTarget: the last child of a cluster releases it,
// and the balancer drops it unless a route names it.
func (b *xdsBalancer) removeTarget(t *rlsTarget, cluster string) {
	b.mu.Lock()
	ts := b.rls.targets[cluster]
	if b.closed || ts == nil {
		b.mu.Unlock()
		return
	}
	delete(ts, t)
	if len(ts) == 0 {
		delete(b.rls.targets, cluster)
		delete(b.rls.roots, cluster)
		if release := b.rls.releases[cluster]; release != nil {
			release()
			delete(b.rls.releases, cluster)
		}
		if b.snap != nil && !b.routesToLocked(cluster) {
			b.set.Remove(cluster)
		}
	}
	b.finishAndUnlock()
}

// rlsTellLocked records the state each RLS child is to report, and
// returns the children whose state changed, to tell once mu is released.
func (b *xdsBalancer) rlsTellLocked() []*rlsTarget {
	var out []*rlsTarget
	for name, ts := range b.rls.targets {
		state := connectivity.Connecting // until the snapshot brings it
		if s, ok := b.set.ClusterState(name); ok {
			state = connectivityOf(s)
		}
		for t := range ts {
			if t.told != state {
				t.told = state
				out = append(out, t)
			}
		}
	}
	return out
}

// tell reports the child's state to the RLS policy (which only queues
// it): the latest, whichever call of tell comes last.
func (t *rlsTarget) tell() {
	t.mu.Lock()
	b := t.b
	t.mu.Unlock()
	if b == nil {
		return
	}
	b.mu.Lock()
	s := balancer.State{ConnectivityState: t.told, Picker: t.picker}
	b.mu.Unlock()
	if s.Picker != nil {
		t.cc.UpdateState(s)
	}
}

// updatePlugins starts, updates and stops the RLS policies for the
// plugins that the routes of snap use (none for nil). It runs after mu is
// released: the RLS policy calls the balancer while it takes the update.
// A snapshot keeping the virtual host and route configuration, the usual
// update, keeps the plugins and costs a look at two pointers.
func (b *xdsBalancer) updatePlugins(snap *watchers.Snapshot) {
	var vh *resources.VirtualHost
	var rc *resources.RouteConfig
	if snap != nil {
		vh, rc = snap.VirtualHost, snap.RouteConfig
	}
	b.mu.Lock()
	if b.closed || (vh == b.rls.vh && rc == b.rls.rc) {
		b.mu.Unlock()
		return
	}
	b.rls.vh, b.rls.rc = vh, rc
	b.mu.Unlock()
	var want map[string]*rlsPluginConfig
	if snap != nil && snap.VirtualHost != nil && snap.RouteConfig != nil && len(snap.RouteConfig.ClusterSpecifierPlugins) > 0 {
		// Routes are looked at only where some route has a plugin: a
		// configuration without costs nothing.
		want = make(map[string]*rlsPluginConfig)
		for _, r := range snap.VirtualHost.Routes {
			if cfg, ok := snap.RouteConfig.ClusterSpecifierPlugins[r.ClusterSpecifierPlugin].(*rlsPluginConfig); ok {
				want[r.ClusterSpecifierPlugin] = cfg
			}
		}
	}
	b.mu.Lock()
	if b.closed || (len(want) == 0 && len(b.rls.plugins) == 0) {
		b.mu.Unlock()
		return
	}
	var stop []balancer.Balancer
	var update []*pluginLB
	pickers := make(map[string]balancer.Picker, len(want))
	for name, pl := range b.rls.plugins {
		if want[name] == nil {
			delete(b.rls.plugins, name)
			if pl.bal != nil {
				stop = append(stop, pl.bal)
			}
			continue
		}
		if p := b.rls.pickers[name]; p != nil {
			pickers[name] = p
		}
	}
	if b.rls.plugins == nil {
		b.rls.plugins = make(map[string]*pluginLB)
	}
	for name, cfg := range want {
		pl := b.rls.plugins[name]
		if pl == nil {
			pl = &pluginLB{name: name}
			b.rls.plugins[name] = pl
		}
		if pl.cfg != cfg {
			pl.cfg = cfg
			update = append(update, pl)
		}
	}
	b.rls.pickers, b.republish = pickers, true
	b.finishAndUnlock()
	for _, bal := range stop {
		bal.Close()
	}
	host := resolver.State{Attributes: attributes.New(rlsHostKey{}, b)}
	for _, pl := range update {
		if pl.bal == nil {
			pl.bal = balancer.Get(rls.Name).Build(&pluginCC{ClientConn: b.cc, b: b, pl: pl}, b.bopts)
		}
		if err := pl.bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: host, BalancerConfig: pl.cfg.lb}); err != nil {
			b.mu.Lock()
			b.logLocked(slog.LevelWarn, "the RLS policy refused its configuration", "plugin", pl.name, "err", err)
			b.finishAndUnlock()
		}
	}
}

// closeLocked forgets every RLS policy and cluster held, and returns the
// policies to close once mu is released.
func (r *rlsState) closeLocked() []balancer.Balancer {
	var out []balancer.Balancer
	for _, pl := range r.plugins {
		if pl.bal != nil {
			out = append(out, pl.bal)
		}
	}
	for _, release := range r.releases {
		release()
	}
	r.plugins, r.pickers, r.targets, r.releases, r.roots = nil, nil, nil, nil, nil
	r.vh, r.rc = nil, nil
	r.published.Store(nil)
	return out
}

// pluginPick picks for an RPC routed by r, whose cluster the RLS policy
// of r's plugin chooses. ok is false when the RPC chose r under an older
// configuration whose plugin is gone: it is then routed again, as an RPC
// whose cluster left the configuration is.
func (p *routePicker) pluginPick(r *resources.Route, sel *selection, info balancer.PickInfo) (res balancer.PickResult, ok bool, err error) {
	pp := p.plugins[r.ClusterSpecifierPlugin]
	switch {
	case pp == nil && sel != nil && sel.gen < p.gen:
		return balancer.PickResult{}, false, nil
	case pp == nil:
		// Its RLS policy is being started: it publishes a picker
		// before it takes its first configuration.
		return balancer.PickResult{}, true, balancer.ErrNoSubConnAvailable
	}
	res, err = pp.Pick(info)
	if sel != nil {
		_, isStatus := status.FromError(err)
		sel.statusPick.Store(err != nil && isStatus)
	}
	return res, true, err
}
