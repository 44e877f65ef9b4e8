package grpcxds

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/warnlimit"
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

// xdsBalancer is the goxds balancer of one channel: the binding of a
// cluster.Set (package dataplane/cluster), which holds every cluster the
// routes of the snapshot send to over one pool of endpoints, to grpc-go's
// balancer API. It is the Set's Host: its endpoints' connections are
// SubConns (conns.go), their TLS is xdscreds' (security.go), LOGICAL_DNS
// names are resolved by gRPC's "dns" resolver (dns.go); and it hosts the
// RLS policies (package dataplane/rls) of the routes' cluster specifier
// plugins (rlsplugin.go).
//
// gRPC calls the Balancer methods and the SubConn state listeners one at a
// time, but DNS resolutions and the Set's timers arrive on goroutines of
// their own, so all state is guarded by mu, the Set's included. Every
// entry point ends with finishAndUnlock, which has the Set settle what
// changed, publishes the picker, and starts or stops DNS resolvers once
// mu is released (a resolver may report from inside Build, and Close
// waits for one that is reporting). Pickers never take mu: each holds an
// immutable view.
type xdsBalancer struct {
	// Read-only after Build.
	cc       balancer.ClientConn
	xdsCreds bool // the channel's credentials are xdscreds': clusters' TLS is honoured
	// bopts are the channel's, for the RLS lookup channels the balancer
	// makes.
	bopts balancer.BuildOptions

	// warnedNoInterceptors: an RPC came without the goxds interceptors,
	// and the log was told so; pickers set it.
	warnedNoInterceptors atomic.Bool
	// authorities holds the authority (gRFC A81) of each SubConn of an
	// endpoint that has one (balancer.SubConn → string), for pickers:
	// written as SubConns are made and shut down, read by pickers
	// (authority.go).
	authorities sync.Map
	// scale is gRFC A105's connection scaling (scale.go).
	scale scaleState

	mu     sync.Mutex
	closed bool
	ch     channelInfo
	// clock runs the Set's timers and paces warnings: the real one, but in
	// tests.
	clock lbpolicy.Clock
	balancerLogs
	// snap is the snapshot in force; nil before the first one and while
	// the configuration is unusable, failErr then saying why (a status
	// error, or any other error for RPCs to wait on if wait-for-ready).
	snap    *watchers.Snapshot
	failErr error
	// set holds the clusters routes send to, and their endpoints.
	set *cluster.Set
	// gen is the generation of the channel configuration in force;
	// republish is set when the route picker must be rebuilt even if no
	// cluster's picker changed.
	gen       uint64
	republish bool
	// needsMD is routePicker.needsMD for the routes of virtual host
	// mdFor, which an update of endpoints keeps.
	mdFor   *resources.VirtualHost
	needsMD bool
	// tls is the clusters' TLS (security.go).
	tls tlsState
	// rls is the state of the routes whose cluster an RLS policy names
	// (rlsplugin.go).
	rls rlsState
	balancerConnMetrics
}

// balancerLogs are what a balancer logs, guarded by its mu.
type balancerLogs struct {
	// logger is the Builder's, as the resolver state carries it; logs are
	// the lines to write once mu is released (finishAndUnlock): a logger's
	// handler is the user's code, and runs under no lock of ours.
	logger *slog.Logger
	logs   []logLine
	// warnings keeps a burst of like warnings from flooding the log.
	warnings warnlimit.Limiter
}

// balancerConnMetrics are a balancer's SubConn measurements (subchannelmetrics.go),
// guarded by its mu.
type balancerConnMetrics struct {
	// connSink is where the SubConns' metrics go, nil when the channel
	// does not measure them; connEvents the measurements to report once
	// mu is released.
	connSink   *endpoint.ConnSink
	connEvents endpoint.ConnEvents
}

// channelInfo is what the balancer learns of its channel from the
// channelState the resolver state carries.
type channelInfo struct {
	connectDialer  bool   // the channel has the goxds dial options, whose dialer tunnels (connect.go)
	maxConns       int    // Options.MaxConnectionsPerEndpoint (gRFC A105), 1 until known
	id             uint64 // what the channel_id hash policy hashes: the channelState's
	noInterceptors string // the channelState's: the warning for an RPC without the interceptors
}

// UpdateClientConnState implements balancer.Balancer: a new snapshot.
func (b *xdsBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	cfg := configOf(s.ResolverState)
	var src *source
	if cfg != nil {
		src = cfg.src
	}
	var gen uint64
	if src != nil {
		// The interceptors take the configuration before the picker made
		// from it is published: an RPC that chooses a cluster this update
		// adds waits for that picker (its selection's generation is newer
		// than the picker's), and none chooses from a configuration older
		// than the picker's. Handing it over here, rather than having the
		// resolver do it once UpdateState returns, holds however gRPC
		// schedules the balancer.
		src.cs.setFrom(src.epoch, cfg)
		gen = cfg.gen
	}
	b.mu.Lock()
	b.gen = gen
	b.ch.connectDialer = false
	if src != nil {
		cs := src.cs
		b.ch = channelInfo{id: cs.channelID, noInterceptors: cs.noInterceptors, connectDialer: cs.connectDialer, maxConns: cs.b.maxConns}
		if src.logger != nil {
			b.logger = src.logger
		}
		b.setBootstrapLocked(src.bootstrap)
		if src.client != nil {
			b.set.SetClient(src.client)
		}
	}
	var cs *channelState
	if src != nil {
		cs = src.cs
	}
	b.setConnSinkLocked(cs)
	if lbc, isOurs := s.BalancerConfig.(*lbConfig); isOurs {
		b.set.Configure(cluster.Config{FailoverTimeout: lbc.failoverTimeout,
			ConnectOnFirstRPC: lbc.connectOnFirstRPC, ClusterIdleTimeout: lbc.clusterIdleTimeout,
			OutlierMetrics: b.outlierMetricsLocked(cs)})
	}
	if cfg == nil || cfg.snap == nil {
		transient := cfg != nil && cfg.cerr != nil
		if transient {
			// Not a status error: gRPC fails the RPCs that are not
			// wait-for-ready with UNAVAILABLE and this text, and holds the
			// others until a configuration comes or their deadline, as
			// for any channel in TRANSIENT_FAILURE.
			b.dropConfigLocked(cfg.cerr)
		} else {
			b.dropConfigLocked(status.Errorf(codes.Unavailable, "the %s balancer needs the goxds resolver: the resolver state carries no goxds snapshot", BalancerName))
		}
		b.finishAndUnlock()
		b.updatePlugins(nil)
		if transient {
			return nil
		}
		return balancer.ErrBadResolverState
	}
	snap, prev := cfg.snap, b.snap
	b.snap, b.failErr, b.republish = snap, nil, true
	b.rlsAdoptSetLocked(s.ResolverState)
	// The roots are the routes' clusters and those of RLS targets; with
	// the same virtual host, and the same held clusters, only the
	// clusters whose ClusterConfig changed are looked at.
	b.rls.holds.Update(b.set, snap, prev != nil && prev.VirtualHost == snap.VirtualHost)
	b.finishAndUnlock()
	b.updatePlugins(snap)
	return nil
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
	b.set.Clear()
}

// UpdateSubConnState implements balancer.Balancer. It is not called: every
// SubConn has a state listener.
func (b *xdsBalancer) UpdateSubConnState(sc balancer.SubConn, s balancer.SubConnState) {
	b.mu.Lock()
	l := b.logger
	b.mu.Unlock()
	l.Error(BalancerName+": UpdateSubConnState called; SubConns have state listeners", "subconn", fmt.Sprint(sc), "state", s.ConnectivityState.String())
}

// ExitIdle implements balancer.Balancer (grpc-go calls it on
// ClientConn.Connect): pick_first clusters gone idle start a new pass,
// as grpc-go's do, and endpoints in use whose connections are idle
// connect again.
func (b *xdsBalancer) ExitIdle() {
	b.mu.Lock()
	if !b.closed {
		b.set.ExitIdle()
	}
	b.finishAndUnlock()
}

// Close implements balancer.Balancer: every SubConn is shut down, every
// timer stopped and every DNS resolver closed before it returns.
func (b *xdsBalancer) Close() {
	b.mu.Lock()
	b.closed = true
	after := b.set.Close()
	b.tls.security.Close()
	plugins := b.rls.closeLocked()
	conns := b.takeConnEventsLocked()
	b.mu.Unlock()
	conns.Report()
	if plugins != nil {
		plugins.Close()
	}
	after.Run()
	b.set.StopWaking()
}

// finishAndUnlock has the Set choose the priority and picker of every
// cluster that changed, publishes a new picker if anything changed, shuts
// down the SubConns no cluster uses any more, and unlocks mu; then it
// stops and starts DNS resolvers.
func (b *xdsBalancer) finishAndUnlock() {
	if b.closed {
		b.logs = nil
		conns := b.takeConnEventsLocked()
		b.mu.Unlock()
		conns.Report()
		return
	}
	if b.set.Settle() {
		b.republish = true
	}
	if b.republish {
		b.republish = false
		b.publishLocked()
	}
	// After publishing: no picker in force hands out what is shut down.
	after := b.set.Finish()
	b.tls.security.Prune()
	logger, logs := b.logger, b.logs
	b.logs = nil
	b.rls.holds.Publish(b.set)
	conns := b.takeConnEventsLocked()
	b.mu.Unlock()
	conns.Report()
	for _, l := range logs {
		logger.Log(context.Background(), l.level, l.msg, l.args...)
	}
	after.Run()
}

// Do implements cluster.Host: f runs under mu, and what it changed is
// applied.
func (b *xdsBalancer) Do(f func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	f()
	b.finishAndUnlock()
}

// Log implements cluster.Host.
func (b *xdsBalancer) Log(level slog.Level, msg string, args ...any) {
	b.logLocked(level, msg, args...)
}

// Pinned implements cluster.Host: a cluster an RLS policy routes to was
// named by a lookup made for an RPC, so it connects at once, and stays
// awake while the policy's cache keeps the target.
func (b *xdsBalancer) Pinned(name string) bool { return b.rls.holds.Held(name) }

// HeaderHash implements cluster.Host: req is the RPC's context.
func (b *xdsBalancer) HeaderHash(req any, name string) uint64 {
	ctx, _ := req.(context.Context)
	if ctx == nil {
		ctx = context.Background()
	}
	return headerHash(ctx, name)
}

// publishLocked hands gRPC a picker for the state in force.
func (b *xdsBalancer) publishLocked() {
	pickers := b.set.Pickers()
	switch {
	case b.snap == nil:
		// The next configuration's picker is built whole.
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
	rp := &routePicker{clusters: pickers, channelID: b.ch.id, authorities: &b.authorities,
		gen: b.gen, logger: b.logger, warned: &b.warnedNoInterceptors, noInterceptors: b.ch.noInterceptors}
	if vh := b.snap.VirtualHost; vh != nil { // a snapshot always has one
		rp.routes = vh.Routes
	}
	if b.mdFor != b.snap.VirtualHost {
		// Once per virtual host: the routes are many where the clusters
		// are, and an update of endpoints keeps them.
		b.mdFor, b.needsMD = b.snap.VirtualHost, route.NeedsHeaders(rp.routes)
	}
	rp.needsMD = b.needsMD
	rp.plugins = b.rls.pickers
	b.rls.published.Store(rp)
	b.cc.UpdateState(balancer.State{ConnectivityState: connectivityOf(b.set.State()), Picker: rp})
}

// connectivityOf is gRPC's name for an endpoint or cluster state.
func connectivityOf(s endpoint.State) connectivity.State {
	switch s {
	case endpoint.Idle:
		return connectivity.Idle
	case endpoint.Connecting:
		return connectivity.Connecting
	case endpoint.Ready:
		return connectivity.Ready
	}
	return connectivity.TransientFailure
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
	if ok, args := b.warnings.Limit(level, msg, args, b.clock.Now()); ok {
		b.logs = append(b.logs, logLine{level, msg, args})
	}
}
