package grpcxds

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/rls"
	"github.com/goxds/xds/internal/rlsgrpc"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// How the goxds balancer routes by an RLS cluster specifier plugin:
// package dataplane/rls runs a Policy per plugin the routes use (the
// lookups, their cache, throttling, backoff, the default target), with an
// rlsgrpc channel to the lookup service, and the balancer is their Host.
// A target a policy uses is a cluster (addTarget), which the balancer
// adds to the resolver's watchers.ClusterSet, so the tree subscribes to
// it and its endpoints, and builds like a route's when a snapshot brings
// it. A route picker hands an RPC whose route names a plugin to that
// plugin's rlsPicker, which asks the policy for a target and picks in
// that cluster.
//
// Lock order: the policies call the balancer (addTarget, Repick) with no
// lock of theirs held; the balancer calls them (updatePlugins, Close)
// with mu released; pickers call them holding nothing, and they read
// which targets are failing from rlsState.failing, an atomic.

// clusterSetKey is the resolver state attribute of the resolver's
// *watchers.ClusterSet.
type clusterSetKey struct{}

// rlsDataHeader carries the header data of a lookup's answer to the
// backend, as gRPC sends it.
const rlsDataHeader = "x-google-rls-data"

// rlsState is the balancer's RLS part. Guarded by xdsBalancer.mu, but
// published and failing, which pickers read.
type rlsState struct {
	// plugins runs the policies; made at the first update.
	plugins *rls.Plugins
	// pickers are the policies' pickers, by plugin name; replaced, never
	// modified, since route pickers share it.
	pickers map[string]balancer.Picker
	// targets count the policies' holds on clusters (addTarget).
	targets map[string]int
	// roots are the clusters of targets that the balancer holds because
	// the snapshot has them (a route may name them too).
	roots map[string]struct{}
	// set is the resolver's ClusterSet, and releases the entries the
	// balancer holds in it, one per cluster with targets.
	set      *watchers.ClusterSet
	releases map[string]func()
	// published is the route picker in force (nil: none), where target
	// picks find the cluster pickers; failing are the target clusters in
	// TRANSIENT_FAILURE (nil: none), replaced when that changes.
	published atomic.Pointer[routePicker]
	failing   atomic.Pointer[map[string]bool]
}

// rlsHost is the rls.Host of the balancer's policies.
type rlsHost struct{ b *xdsBalancer }

// AddTarget implements rls.Host.
func (h rlsHost) AddTarget(cluster string) func() { return h.b.addTarget(cluster) }

// Repick implements rls.Host: the picker in force is handed to gRPC
// again, for the RPCs it queued to be picked again.
func (h rlsHost) Repick() {
	h.b.mu.Lock()
	h.b.republish = true
	h.b.finishAndUnlock()
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

// addTarget holds cluster for an RLS policy, and returns the function
// that releases the hold.
func (b *xdsBalancer) addTarget(cluster string) (release func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return func() {}
	}
	if b.rls.targets == nil {
		b.rls.targets = make(map[string]int)
	}
	if b.rls.targets[cluster]++; b.rls.targets[cluster] == 1 {
		b.holdLocked(cluster)
	}
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
	released := false // guarded by mu
	return func() { b.removeTarget(cluster, &released) }
}

// removeTarget undoes addTarget, once: the last hold of a cluster
// releases it, and the balancer drops it unless a route names it.
func (b *xdsBalancer) removeTarget(cluster string, released *bool) {
	b.mu.Lock()
	if b.closed || *released || b.rls.targets[cluster] == 0 {
		b.mu.Unlock()
		return
	}
	*released = true
	if b.rls.targets[cluster]--; b.rls.targets[cluster] == 0 {
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

// rlsStatesLocked publishes which target clusters are in
// TRANSIENT_FAILURE (rls.failing) when that changed; it allocates only
// then.
func (b *xdsBalancer) rlsStatesLocked() {
	cur := b.rls.failing.Load()
	n, same := 0, true
	for name := range b.rls.targets {
		f := b.targetFailingLocked(name)
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
		b.rls.failing.Store(nil)
		return
	}
	failing := make(map[string]bool, n)
	for name := range b.rls.targets {
		if b.targetFailingLocked(name) {
			failing[name] = true
		}
	}
	b.rls.failing.Store(&failing)
}

// targetFailingLocked reports whether cluster name is in
// TRANSIENT_FAILURE; one the snapshot has not brought yet is not.
func (b *xdsBalancer) targetFailingLocked(name string) bool {
	s, ok := b.set.ClusterState(name)
	return ok && connectivityOf(s) == connectivity.TransientFailure
}

// rlsFailing is the policies' failing predicate.
func (b *xdsBalancer) rlsFailing(cluster string) bool {
	m := b.rls.failing.Load()
	return m != nil && (*m)[cluster]
}

// dialRLS is the policies' rls.Dialer: a channel made as grpc-go's RLS
// policy makes its control channel, from the parent channel's options.
func (b *xdsBalancer) dialRLS(target string, backToReady func()) (rls.Lookuper, error) {
	c, err := rlsgrpc.Dial(target, b.bopts, backToReady)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// updatePlugins starts, updates and stops the RLS policies for the
// plugins that the routes of snap use (none for nil). It runs after mu is
// released: the policies call the balancer while they take the update.
func (b *xdsBalancer) updatePlugins(snap *watchers.Snapshot) {
	var vh *resources.VirtualHost
	var rc *resources.RouteConfig
	if snap != nil {
		vh, rc = snap.VirtualHost, snap.RouteConfig
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	if b.rls.plugins == nil {
		b.rls.plugins = rls.NewPlugins(rls.Options{Host: rlsHost{b}, Dial: b.dialRLS, Clock: b.clock})
	}
	plugins := b.rls.plugins
	b.mu.Unlock()
	policies, changed, err := plugins.Update(vh, rc)
	if !changed && err == nil {
		return
	}
	b.mu.Lock()
	if err != nil {
		b.logLocked(slog.LevelWarn, "RLS lookups fail: no channel to the lookup service", "err", err)
	}
	if changed {
		host := b.bopts.Target.Endpoint()
		pickers := make(map[string]balancer.Picker, len(policies))
		for name, pol := range policies {
			pickers[name] = &rlsPicker{b: b, pol: pol, host: host}
		}
		b.rls.pickers, b.republish = pickers, true
	}
	b.finishAndUnlock()
}

// closeLocked forgets every RLS policy and cluster held, and returns the
// policies to close once mu is released.
func (r *rlsState) closeLocked() *rls.Plugins {
	for _, release := range r.releases {
		release()
	}
	plugins := r.plugins
	r.plugins, r.pickers, r.targets, r.releases, r.roots = nil, nil, nil, nil, nil
	r.published.Store(nil)
	r.failing.Store(nil)
	return plugins
}

// rlsPicker is the picker of one plugin: its policy names the target
// cluster of each RPC, in which it picks.
type rlsPicker struct {
	b    *xdsBalancer
	pol  *rls.Policy
	host string // extra_keys.host: the channel's target endpoint, as gRPC gives it
}

// Pick implements balancer.Picker. An RPC whose lookup failed and backs
// off fails UNAVAILABLE, wait-for-ready or not, as in gRPC; a throttled
// one fails as gRPC fails a pick's plain error.
func (p *rlsPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	md, _ := metadata.FromOutgoingContext(info.Ctx)
	res := p.pol.Pick(&rls.Request{Path: info.FullMethodName, Host: p.host, Headers: rlsHeaders(md)}, p.b.rlsFailing)
	var lerr *rls.LookupError
	switch {
	case res.Queue:
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	case errors.As(res.Err, &lerr):
		return balancer.PickResult{}, status.Error(codes.Unavailable, lerr.Error())
	case res.Err != nil:
		return balancer.PickResult{}, res.Err
	}
	pr, err := p.b.pickTarget(res.Target, info)
	if err == nil && !res.Default {
		// Made for this pick: routePicker may add the authority to it.
		pr.Metadata = metadata.MD{rlsDataHeader: {res.HeaderData}}
	}
	return pr, err
}

// pickTarget picks in cluster, by the balancer's picker in force.
func (b *xdsBalancer) pickTarget(cluster string, info balancer.PickInfo) (balancer.PickResult, error) {
	rp := b.rls.published.Load()
	if rp == nil {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	cp := rp.clusters.Get(cluster)
	if cp == nil {
		// Not in the configuration yet: the tree subscribes to it, and
		// the balancer publishes a new picker when it comes.
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	// The RPC's request hash, for a ring_hash cluster, as its route
	// computed it; a random one for an RPC without the interceptors.
	hash := rand.Uint64()
	if sel := selectionOf(info.Ctx); sel != nil {
		hash = sel.hash
	}
	return pickIn(cp, info, hash)
}

// rlsHeaders shows the key builders gRPC metadata as gRPC's RLS policy
// reads it: every header as sent, values joined with ",".
type rlsHeaders metadata.MD

// Get implements rls.Headers.
func (h rlsHeaders) Get(name string) (string, bool) {
	vs := h[name]
	if len(vs) == 0 {
		return "", false
	}
	return strings.Join(vs, ","), true
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
		// Its RLS policy is being started.
		return balancer.PickResult{}, true, balancer.ErrNoSubConnAvailable
	}
	res, err = pp.Pick(info)
	if sel != nil {
		_, isStatus := status.FromError(err)
		sel.statusPick.Store(err != nil && isStatus)
	}
	return res, true, err
}
