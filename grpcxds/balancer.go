package grpcxds

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// BalancerName is the name the goxds balancer is registered under with
// gRPC (balancer.Register, when this package is imported), and the one the
// resolver's service config selects. The prefix keeps it apart from every
// policy gRPC itself registers.
const BalancerName = "goxds_experimental"

// DefaultFailoverTimeout is how long a priority may stay connecting before
// the balancer tries the next one, as in gRPC's priority policy.
const DefaultFailoverTimeout = 10 * time.Second

// xdsBalancer is the goxds balancer of one channel. It holds a clusterLB
// for every cluster the routes of the snapshot send to, and one SubConn per
// endpoint address list, shared by all of them.
//
// gRPC calls the Balancer methods and the SubConn state listeners one at a
// time, but DNS resolutions and failover timers arrive on goroutines of
// their own, so all state is guarded by mu. Every entry point ends with
// finishAndUnlock, which rebuilds what changed, publishes the picker,
// and starts or stops DNS resolvers once mu is released (a resolver may
// report from inside Build, and Close waits for one that is reporting).
// Pickers never take mu: each holds an immutable view.
type xdsBalancer struct {
	// Read-only after Build.
	cc       balancer.ClientConn
	xdsCreds bool // the channel's credentials are xdscreds': clusters' TLS is honoured
	// bopts are the channel's, for the RLS policies the balancer builds.
	bopts balancer.BuildOptions

	// warnedNoInterceptors: an RPC came without the goxds interceptors,
	// and the log was told so; pickers set it.
	warnedNoInterceptors atomic.Bool
	// authorities holds the authority (gRFC A81) of each SubConn of an
	// endpoint that has one (balancer.SubConn → string), for pickers:
	// written as SubConns are made and shut down, read by pickers
	// (authority.go).
	authorities sync.Map

	mu              sync.Mutex
	closed          bool
	connectDialer   bool   // the channel has the goxds dial options, whose dialer tunnels (connect.go)
	channelID       uint64 // what the channel_id hash policy hashes: the channelState's
	noInterceptors  string // the channelState's: the warning for an RPC without the interceptors
	failoverTimeout time.Duration
	// connectOnFirstRPC: a route's cluster starts idle; with
	// clusterIdleTimeout, one unused that long goes idle again, which
	// idleSweep checks (idle.go).
	connectOnFirstRPC  bool
	clusterIdleTimeout time.Duration
	idleSweep          stopper
	// clock runs the failover timers: the real one, but in tests.
	clock clock
	// failover holds the failover deadlines of the clusters (failover.go).
	failover failoverQueue
	// logger is the Builder's, as the resolver state carries it; logs are
	// the lines to write once mu is released (finishAndUnlock): a logger's
	// handler is the user's code, and runs under no lock of ours.
	logger *slog.Logger
	logs   []logLine
	// warnings keeps a burst of like warnings from flooding the log
	// (warnlimit.go).
	warnings warnLimiter
	// snap is the snapshot in force; nil before the first one and while
	// the configuration is unusable, failErr then saying why (a status
	// error, or any other error for RPCs to wait on if wait-for-ready).
	snap    *watchers.Snapshot
	failErr error
	// clusters are the clusters routes send to, by name.
	clusters map[string]*clusterLB
	// pool holds the endpoints of those clusters, by address list and
	// security: one SubConn each, however many clusters and priorities
	// share it (conns.go).
	pool *endpoint.Pool
	// dns are the LOGICAL_DNS resolutions, by host:port.
	dns map[string]*dnsWatch
	// inflight counts the requests in flight per leaf cluster, for its
	// circuit breaker; the counters outlive pickers. inflightRefs counts
	// the clusters whose priorities hold each (clusterLB.held), and
	// staleCounters are the leaves whose count fell to zero, forgotten at
	// the end of the update unless some cluster took them again.
	inflight      map[string]*atomic.Int64
	inflightRefs  map[string]int
	staleCounters map[string]struct{}
	// aggUsers are the aggregate clusters routes send to, by the name of
	// each of their leaves: a leaf that changes has them rebuilt.
	aggUsers map[string]map[*clusterLB]struct{}
	// gen is the generation of the channel configuration in force.
	gen uint64
	// dirty are the clusters whose priority and picker must be chosen
	// again; republish is set when the route picker must be rebuilt even
	// if no cluster is dirty.
	dirty     map[*clusterLB]struct{}
	republish bool
	// pickers are the cluster pickers of the route picker last published,
	// and changes what changed since (nil: a cluster gone); nReady and
	// nConnecting count the clusters in those states. The next route
	// picker costs the changes, not the clusters (pickermap.go).
	pickers pickerMap
	// needsMD is routePicker.needsMD for the routes of virtual host
	// mdFor, which an update of endpoints keeps.
	mdFor               *resources.VirtualHost
	needsMD             bool
	changes             map[string]clusterPicker
	nReady, nConnecting int
	nIdle               int
	// pruneConns: some endpoint may have lost its last cluster, so
	// finishAndUnlock has the pool shut down the SubConns of orphans, the
	// endpoints that lost their last cluster since, that no cluster took
	// again (and forgets load stores no cluster holds).
	pruneConns bool
	// bootstrap defines the certificate providers of clusters' TLS (nil:
	// none); security holds the HandshakeInfos in use, by
	// xdscreds.Key; warnedPlain the clusters whose TLS a channel without
	// xdscreds was warned of (security.go).
	bootstrap *bootstrap.Config
	// client is the resolver's goxds client, and loads the load stores
	// held from it, by server key (load.go).
	client      *client.Client
	loads       map[string]*heldStore
	security    map[string]*secEntry
	warnedPlain map[string]bool
	// rls is the state of the routes whose cluster an RLS policy names
	// (rlsplugin.go).
	rls rlsState

	// wakes are the idle clusters pickers asked to wake, for one
	// goroutine to wake together (idle.go); guarded by wakeMu, which
	// pickers take, never with mu. wakeDone is that goroutine's, which
	// Close waits for.
	wakeMu     sync.Mutex
	wakes      []*clusterLB
	waking     bool
	wakeClosed bool
	wakeDone   sync.WaitGroup
}

// UpdateClientConnState implements balancer.Balancer: a new snapshot.
func (b *xdsBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	snap, ok := SnapshotFromState(s.ResolverState)
	cs, cfg := channelFromState(s.ResolverState)
	var gen uint64
	if cs != nil && cfg != nil {
		// The interceptors take the configuration before the picker made
		// from it is published: an RPC that chooses a cluster this update
		// adds waits for that picker (its selection's generation is newer
		// than the picker's), and none chooses from a configuration older
		// than the picker's. Handing it over here, rather than having the
		// resolver do it once UpdateState returns, holds however gRPC
		// schedules the balancer.
		cs.setFrom(cfg.epoch, cfg)
		gen = cfg.gen
	}
	b.mu.Lock()
	b.gen = gen
	if cs != nil {
		b.channelID, b.noInterceptors = cs.channelID, cs.noInterceptors
	}
	b.connectDialer = cs != nil && cs.connectDialer // connect.go
	if l := loggerFromState(s.ResolverState); l != nil {
		b.logger = l
	}
	b.setBootstrapLocked(bootstrapFromState(s.ResolverState))
	if c := clientFromState(s.ResolverState); c != nil {
		b.client = c
	}
	if cfg, isOurs := s.BalancerConfig.(*lbConfig); isOurs {
		b.failoverTimeout = cfg.failoverTimeout
		if b.connectOnFirstRPC && !cfg.connectOnFirstRPC {
			for _, cl := range b.clusters {
				b.wakeLocked(cl)
			}
		}
		b.connectOnFirstRPC = cfg.connectOnFirstRPC
		b.clusterIdleTimeout = cfg.clusterIdleTimeout
	}
	if !ok {
		var err error = configErrorFromState(s.ResolverState)
		if err == nil {
			err = fmt.Errorf("the %s balancer needs the goxds resolver: the resolver state carries no goxds snapshot", BalancerName)
		}
		cerr, transient := err.(*ConfigError)
		if transient {
			// Not a status error: gRPC fails the RPCs that are not
			// wait-for-ready with UNAVAILABLE and this text, and holds the
			// others until a configuration comes or their deadline, as
			// for any channel in TRANSIENT_FAILURE.
			b.dropConfigLocked(cerr)
		} else {
			b.dropConfigLocked(status.Error(codes.Unavailable, err.Error()))
		}
		b.finishAndUnlock()
		b.updatePlugins(nil)
		if transient {
			return nil
		}
		return balancer.ErrBadResolverState
	}
	prev := b.snap
	b.snap, b.failErr, b.republish = snap, nil, true
	b.rlsAdoptSetLocked(s.ResolverState)
	if prev != nil && prev.VirtualHost == snap.VirtualHost && b.rlsRootsSameLocked() {
		// The same routes, and the same clusters of RLS targets, so the
		// same clusters: only those whose ClusterConfig changed, and the
		// aggregates above them, can have changed. This is the usual
		// update (one cluster's endpoints), and it costs that cluster,
		// not every cluster.
		b.refreshChangedLocked(snap.Clusters.Changes(prev.Clusters))
	} else {
		roots := routeClusters(snap.VirtualHost)
		b.rlsRootsLocked(roots)
		for name, cl := range b.clusters {
			if _, ok := roots[name]; !ok {
				b.dropClusterLocked(cl)
			}
		}
		for name := range roots {
			cl := b.clusters[name]
			if cl == nil {
				cl = newClusterLB(name)
				// A cluster an RLS policy routes to was named by a lookup
				// made for an RPC: it connects at once.
				cl.idle = b.connectOnFirstRPC && b.rls.targets[name] == nil
				b.clusters[name] = cl
			}
			b.refreshClusterLocked(cl, false)
		}
	}
	b.pruneCountersLocked()
	b.finishAndUnlock()
	b.updatePlugins(snap)
	return nil
}

// refreshChangedLocked rebuilds the clusters of the given names, and the
// aggregate clusters they are leaves of.
func (b *xdsBalancer) refreshChangedLocked(names iter.Seq[string]) {
	var aggs []*clusterLB
	for name := range names {
		if cl := b.clusters[name]; cl != nil {
			b.refreshClusterLocked(cl, false)
		}
		for cl := range b.aggUsers[name] {
			aggs = append(aggs, cl)
		}
	}
	// After the walk: refreshing an aggregate edits aggUsers. One listed
	// twice, or refreshed above, finds its inputs unchanged the second time.
	for _, cl := range aggs {
		if b.clusters[cl.name] == cl {
			b.refreshClusterLocked(cl, false)
		}
	}
}

// routeClusters returns the clusters the routes of vh can send to.
func routeClusters(vh *resources.VirtualHost) map[string]struct{} {
	out := make(map[string]struct{})
	if vh == nil {
		return out
	}
	for _, r := range vh.Routes {
		if r.Action != resources.RouteActionRoute {
			continue
		}
		if r.Cluster != "" {
			out[r.Cluster] = struct{}{}
		}
		for _, wc := range r.WeightedClusters {
			out[wc.Name] = struct{}{}
		}
	}
	return out
}

// ResolverError implements balancer.Balancer. The goxds resolver hands
// configuration errors over in the resolver state, so this error is
// gRPC's own: as with gRPC's policies, a configuration in force stays, and
// without one RPCs fail with err (wait-for-ready ones wait).
func (b *xdsBalancer) ResolverError(err error) {
	b.mu.Lock()
	if b.snap == nil {
		b.failErr, b.republish = err, true
	}
	b.finishAndUnlock()
}

// dropConfigLocked forgets the snapshot and every cluster: the picker
// fails RPCs with err.
func (b *xdsBalancer) dropConfigLocked(err error) {
	b.snap, b.failErr, b.republish = nil, err, true
	for _, cl := range b.clusters {
		b.dropClusterLocked(cl)
	}
	b.pruneCountersLocked()
}

// UpdateSubConnState implements balancer.Balancer. It is not called: every
// SubConn has a state listener.
func (b *xdsBalancer) UpdateSubConnState(sc balancer.SubConn, s balancer.SubConnState) {
	b.mu.Lock()
	l := b.logger
	b.mu.Unlock()
	l.Error(BalancerName+": UpdateSubConnState called; SubConns have state listeners", "subconn", fmt.Sprint(sc), "state", s.ConnectivityState.String())
}

// ExitIdle implements balancer.Balancer: endpoints in use that went idle
// connect again. (They are reconnected as soon as they go idle anyway.)
func (b *xdsBalancer) ExitIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pool.ExitIdle()
}

// Close implements balancer.Balancer: every SubConn is shut down, every
// timer stopped and every DNS resolver closed before it returns.
func (b *xdsBalancer) Close() {
	b.mu.Lock()
	b.closed = true
	for _, cl := range b.clusters {
		cl.stopTimer()
		cl.stopOutliers()
	}
	b.stopFailoversLocked()
	b.stopIdleSweepLocked()
	b.pool.Close()
	for _, e := range b.security {
		e.hi.Close()
	}
	b.security = nil
	var releases []func()
	for _, h := range b.loads {
		releases = append(releases, h.release)
	}
	b.loads = nil
	var resolvers []resolver.Resolver
	for _, w := range b.dns {
		w.stopped = true
		if w.r != nil {
			resolvers = append(resolvers, w.r)
		}
	}
	b.clusters, b.dns = nil, nil
	plugins := b.rls.closeLocked()
	b.mu.Unlock()
	for _, p := range plugins {
		p.Close()
	}
	for _, r := range resolvers {
		r.Close()
	}
	for _, release := range releases {
		release()
	}
	b.stopWaking()
}

// finishAndUnlock chooses the priority and picker of every dirty cluster,
// publishes a new picker if anything changed, shuts down the SubConns no
// cluster uses any more, and unlocks mu; then it stops and starts DNS
// resolvers.
func (b *xdsBalancer) finishAndUnlock() {
	if b.closed {
		b.logs = nil
		b.mu.Unlock()
		return
	}
	picked := 0
	for len(b.dirty) > 0 {
		for cl := range b.dirty {
			picked++
			delete(b.dirty, cl)
			b.uncountLocked(cl)
			b.pickPriorityLocked(cl)
			b.markUsedLocked(cl)
			b.countLocked(cl)
			b.changes[cl.name] = cl.picker
			b.republish = true
		}
	}
	if picked > smallMap {
		// A Go map keeps its size once grown, and ranging over it costs
		// that size, empty or not: a map that once held every cluster (the
		// first configuration) made every later event cost O(clusters).
		b.dirty = make(map[*clusterLB]struct{})
	}
	if b.republish {
		b.republish = false
		b.publishLocked()
	}
	// After publishing: no picker in force hands out what is shut down.
	var releases []func()
	if b.pruneConns {
		b.pruneConns = false
		b.pool.Prune()
		releases = b.pruneLoadsLocked()
	}
	b.pruneSecurityLocked()
	start, stop := b.dnsChangesLocked()
	logger, logs := b.logger, b.logs
	b.logs = nil
	told := b.rlsTellLocked()
	b.mu.Unlock()
	for _, t := range told {
		t.tell()
	}
	for _, l := range logs {
		logger.Log(context.Background(), l.level, l.msg, l.args...)
	}
	for _, r := range stop {
		r.Close()
	}
	for _, w := range start {
		b.startDNS(w)
	}
	for _, release := range releases {
		release()
	}
}

// publishLocked hands gRPC a picker for the state in force.
func (b *xdsBalancer) publishLocked() {
	switch {
	case b.snap == nil:
		// The next configuration's picker is built whole.
		b.pickers = pickerMap{}
		clear(b.changes)
		b.rls.published.Store(nil)
	}
	switch {
	case b.snap == nil && b.failErr != nil:
		b.cc.UpdateState(balancer.State{
			ConnectivityState: connectivity.TransientFailure,
			Picker:            errorPicker{b.failErr},
		})
		return
	case b.snap == nil:
		b.cc.UpdateState(balancer.State{
			ConnectivityState: connectivity.Connecting,
			Picker:            errorPicker{balancer.ErrNoSubConnAvailable},
		})
		return
	}
	if len(b.changes) > 0 || b.pickers.len() != len(b.clusters) {
		if len(b.changes) > len(b.clusters)/4 || !b.pickers.balanced(len(b.clusters)) {
			b.pickers = newPickerMap(b.clusters)
		} else {
			b.pickers = b.pickers.with(b.changes)
		}
		if len(b.changes) > smallMap {
			b.changes = make(map[string]clusterPicker) // see finishAndUnlock
		} else {
			clear(b.changes)
		}
	}
	rp := &routePicker{clusters: b.pickers, channelID: b.channelID, authorities: &b.authorities,
		gen: b.gen, logger: b.logger, warned: &b.warnedNoInterceptors, noInterceptors: b.noInterceptors}
	if vh := b.snap.VirtualHost; vh != nil { // a snapshot always has one
		rp.routes = vh.Routes
	}
	state := connectivity.TransientFailure
	switch {
	case b.nReady > 0:
		state = connectivity.Ready
	case b.nConnecting > 0:
		state = connectivity.Connecting
	case b.nIdle > 0:
		state = connectivity.Idle
	}
	if b.mdFor != b.snap.VirtualHost {
		// Once per virtual host: the routes are many where the clusters
		// are, and an update of endpoints keeps them.
		b.mdFor, b.needsMD = b.snap.VirtualHost, routesNeedMD(rp.routes)
	}
	rp.needsMD = b.needsMD
	rp.plugins = b.rls.pickers
	b.rls.published.Store(rp)
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: rp})
}

// smallMap is the size up to which a map emptied is kept for reuse, and
// beyond which it is made anew.
const smallMap = 64

// countLocked counts cl in the state it is in, for the channel's state.
func (b *xdsBalancer) countLocked(cl *clusterLB) {
	cl.counted = cl.state
	switch cl.state {
	case connectivity.Ready:
		b.nReady++
	case connectivity.Connecting:
		b.nConnecting++
	case connectivity.Idle:
		b.nIdle++
	}
}

// uncountLocked undoes countLocked.
func (b *xdsBalancer) uncountLocked(cl *clusterLB) {
	switch cl.counted {
	case connectivity.Ready:
		b.nReady--
	case connectivity.Connecting:
		b.nConnecting--
	case connectivity.Idle:
		b.nIdle--
	}
	cl.counted = connectivity.Shutdown
}

// counterLocked returns the in-flight counter of a leaf cluster, held by
// cl until releaseLocked.
func (b *xdsBalancer) counterLocked(cl *clusterLB, leaf string) *atomic.Int64 {
	c := b.inflight[leaf]
	if c == nil {
		c = new(atomic.Int64)
		b.inflight[leaf] = c
	}
	b.inflightRefs[leaf]++
	cl.held.counters = append(cl.held.counters, leaf)
	return c
}

// releaseLocked lets go of what a cluster's priorities held: counters
// and load stores, which the next prune forgets if no cluster holds them.
func (b *xdsBalancer) releaseLocked(h heldRefs) {
	for _, leaf := range h.counters {
		if b.inflightRefs[leaf]--; b.inflightRefs[leaf] <= 0 {
			b.staleCounters[leaf] = struct{}{}
		}
	}
	for _, key := range h.loads {
		if s := b.loads[key]; s != nil {
			s.refs--
		}
	}
}

// pruneCountersLocked forgets the counters of leaves no cluster holds
// since the last prune; those held again are kept, with their count.
func (b *xdsBalancer) pruneCountersLocked() {
	for leaf := range b.staleCounters {
		if b.inflightRefs[leaf] <= 0 {
			delete(b.inflight, leaf)
			delete(b.inflightRefs, leaf)
		}
	}
	if len(b.staleCounters) > smallMap {
		b.staleCounters = make(map[string]struct{}) // see finishAndUnlock
	} else {
		clear(b.staleCounters)
	}
}

// logLine is a line to log once mu is released.
type logLine struct {
	level slog.Level
	msg   string
	args  []any
}

// logLocked queues a line for finishAndUnlock to write. Even whether the
// level is enabled is asked then: that too is the handler's code. Lines
// are few, one per decision, so queueing them unasked costs little.
func (b *xdsBalancer) logLocked(level slog.Level, msg string, args ...any) {
	if ok, args := b.limitLocked(level, msg, args); ok {
		b.logs = append(b.logs, logLine{level, msg, args})
	}
}
