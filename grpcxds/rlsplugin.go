package grpcxds

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/cluster"
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
// holds (cluster.Holds: the resolver's watchers.ClusterSet follows it, so
// the tree subscribes to it and its endpoints, and the Set builds it like
// a route's when a snapshot brings it). A route picker hands an RPC whose
// route names a plugin to that plugin's rlsPicker, which asks the policy
// for a target and picks in that cluster.
//
// Lock order: the policies call the balancer (addTarget, Repick) with no
// lock of theirs held; the balancer calls them (updatePlugins, Close)
// with mu released; pickers call them holding nothing, and they read
// which targets are failing from Holds.Failing, which takes no lock.

// clusterSetKey is the resolver state attribute of the resolver's
// *watchers.ClusterSet.
type clusterSetKey struct{}

// rlsDataHeader carries the header data of a lookup's answer to the
// backend, as gRPC sends it.
const rlsDataHeader = "x-google-rls-data"

// rlsState is the balancer's RLS part. Guarded by xdsBalancer.mu, but
// published and holds.Failing, which pickers read.
type rlsState struct {
	// plugins runs the policies; made at the first update.
	plugins *rls.Plugins
	// pickers are the policies' pickers, by plugin name; replaced, never
	// modified, since route pickers share it.
	pickers map[string]balancer.Picker
	// holds are the clusters of the policies' targets (addTarget), which
	// the balancer keeps in its Set and the resolver's ClusterSet.
	holds cluster.Holds
	// published is the route picker in force (nil: none), where target
	// picks find the cluster pickers.
	published atomic.Pointer[routePicker]
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

// rlsAdoptSetLocked has the resolver's ClusterSet follow the clusters
// held: a new resolver (the channel left idle mode) brings a new one.
func (b *xdsBalancer) rlsAdoptSetLocked(rs resolver.State) {
	var sub cluster.Subscriber
	if set, _ := rs.Attributes.Value(clusterSetKey{}).(*watchers.ClusterSet); set != nil {
		sub = set
	}
	b.rls.holds.Subscribe(sub)
}

// addTarget holds the cluster name for an RLS policy, and returns the function
// that releases the hold, once: the last hold of a cluster releases it,
// and the balancer drops it unless a route names it.
func (b *xdsBalancer) addTarget(name string) (release func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return func() {}
	}
	hold := b.rls.holds.Add(b.set, name)
	b.finishAndUnlock()
	return func() {
		b.mu.Lock()
		if b.closed || !b.rls.holds.Release(b.set, hold) {
			b.mu.Unlock()
			return
		}
		b.finishAndUnlock()
	}
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
	r.holds.Close()
	plugins := r.plugins
	r.plugins, r.pickers = nil, nil
	r.published.Store(nil)
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
	res := p.pol.Pick(&rls.Request{Path: info.FullMethodName, Host: p.host, Headers: rlsHeaders(md)}, p.b.rls.holds.Failing)
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
