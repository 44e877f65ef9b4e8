package grpcxds

import (
	"log/slog"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// Clusters that connect on their first RPC (Options.ConnectOnFirstRPC),
// and go idle again when unused (Options.ClusterIdleTimeout).
//
// gRPC connects the endpoints of every cluster the routes name as soon as
// the configuration arrives. A mesh-wide route configuration names
// thousands of clusters a service never calls, and each endpoint connected
// costs grpc-go an HTTP/2 transport (tens of KiB and two goroutines) and,
// when the endpoint does not answer, a redial every backoff. With the
// option a route's cluster starts idle: nothing of it is built (no
// priorities, endpoints, timers or DNS resolutions: at 100,000 clusters
// that is most of the balancer's memory), and its picker wakes it on the
// first pick. The cluster is built then, from the snapshot in force, and
// the RPC waits for the picker that follows, as it would for a cluster
// still connecting.
//
// With an idle timeout, the picker of an awake cluster notes that it was
// used (usedPicker), and a sweep every timeout puts to sleep the clusters
// not used since the sweep before and with no RPC in flight: idle after one
// to two timeouts without an RPC. What was built of them is undone: endpoints that no other
// cluster lists are shut down, and those others list but none wants lose
// their SubConns.

// idlePicker is the picker of an idle cluster. Its first pick asks for the
// cluster to be woken, on a goroutine of the balancer's (a pick must not
// take mu, nor publish a picker from inside gRPC's pick); every pick
// queues its RPC.
type idlePicker struct {
	b     *xdsBalancer
	cl    *clusterLB
	woken *atomic.Bool // shared by the pickers of one idle spell
}

func (p idlePicker) pick(balancer.PickInfo, uint64) (balancer.PickResult, error) {
	if p.woken.CompareAndSwap(false, true) {
		p.b.askWake(p.cl)
	}
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}

// usedPicker is the picker of an awake cluster under an idle timeout: it
// marks the cluster used. The flag is read before it is written, so that
// RPCs to a busy cluster do not all write the same cache line.
type usedPicker struct {
	clusterPicker
	used *atomic.Bool
}

func (p usedPicker) pick(info balancer.PickInfo, hash uint64) (balancer.PickResult, error) {
	if !p.used.Load() {
		p.used.Store(true)
	}
	return p.clusterPicker.pick(info, hash)
}

// askWake queues cl to be woken. One goroutine wakes what is queued, so
// that RPCs fanning out to thousands of idle clusters at once make one
// goroutine and a few pickers, not one of each per cluster.
func (b *xdsBalancer) askWake(cl *clusterLB) {
	b.wakeMu.Lock()
	defer b.wakeMu.Unlock()
	if b.wakeClosed {
		return // a pick racing Close: nothing to wake
	}
	b.wakes = append(b.wakes, cl)
	if !b.waking {
		b.waking = true
		b.wakeDone.Go(b.wakeQueued)
	}
}

// stopWaking, for Close, lets no pick start waking, and waits for the
// goroutine waking clusters, if one runs (it finds the balancer closed).
func (b *xdsBalancer) stopWaking() {
	b.wakeMu.Lock()
	b.wakeClosed = true
	b.wakeMu.Unlock()
	b.wakeDone.Wait()
}

// wakeQueued wakes the queued clusters that are still the balancer's and
// idle, and publishes once.
func (b *xdsBalancer) wakeQueued() {
	b.mu.Lock()
	b.wakeMu.Lock()
	wakes := b.wakes
	b.wakes, b.waking = nil, false
	b.wakeMu.Unlock()
	var woken []string
	for _, cl := range wakes { // after Close, b.clusters is nil: nothing is woken
		if !b.closed && b.clusters[cl.name] == cl && cl.idle {
			b.wakeLocked(cl)
			woken = append(woken, cl.name)
		}
	}
	if len(woken) > 0 {
		slices.Sort(woken)
		b.logLocked(slog.LevelDebug, "clusters connecting on their first RPC", "count", len(woken), "clusters", woken[:min(len(woken), 10)])
	}
	b.finishAndUnlock()
}

// wakeLocked makes cl connect from now on: it is built from the snapshot
// in force (later snapshots change it as they change any cluster), and
// chooses a priority, and so wants its endpoints, when finishAndUnlock
// runs.
func (b *xdsBalancer) wakeLocked(cl *clusterLB) {
	if !cl.idle {
		return
	}
	cl.idle = false
	cl.used.Store(true) // the RPC that woke it: the next sweep spares it
	b.refreshClusterLocked(cl, true)
	b.dirty[cl] = struct{}{}
	if b.clusterIdleTimeout > 0 && b.idleSweep == nil {
		b.idleSweep = b.clock.AfterFunc(b.clusterIdleTimeout, b.sweepIdle)
	}
}

// sweepIdle puts to sleep the clusters no RPC used since the last sweep,
// and runs again while some cluster is awake.
func (b *xdsBalancer) sweepIdle() {
	b.mu.Lock()
	b.idleSweep = nil
	if b.closed || !b.connectOnFirstRPC || b.clusterIdleTimeout <= 0 {
		b.finishAndUnlock()
		return
	}
	awake := false
	var slept []string
	for name, cl := range b.clusters {
		switch {
		case cl.idle:
		case b.rls.targets[name] != nil:
			// An RLS child holds it: the RLS policy's cache decides how
			// long a target lives.
			awake = true
		case cl.used.Swap(false), b.inFlightLocked(cl):
			// Picked since the last sweep, or RPCs still running on it (a
			// long stream picks once): in use.
			awake = true
		default:
			b.sleepLocked(cl)
			slept = append(slept, name)
		}
	}
	if len(slept) > 0 {
		// One line, not one per cluster: thousands may sleep at once.
		slices.Sort(slept)
		b.logLocked(slog.LevelDebug, "clusters idle: no RPC within the idle timeout", "count", len(slept),
			"clusters", slept[:min(len(slept), 10)], "timeout", b.clusterIdleTimeout)
	}
	if awake {
		b.idleSweep = b.clock.AfterFunc(b.clusterIdleTimeout, b.sweepIdle)
	}
	b.finishAndUnlock()
}

// inFlightLocked reports whether RPCs picked in cl have not finished: the
// in-flight counts of its leaves (its circuit breakers'), which aggregate
// clusters sharing a leaf share too.
func (b *xdsBalancer) inFlightLocked(cl *clusterLB) bool {
	for _, leaf := range cl.held.counters {
		if c := b.inflight[leaf]; c != nil && c.Load() > 0 {
			return true
		}
	}
	return false
}

// stopIdleSweepLocked stops the sweep, for Close.
func (b *xdsBalancer) stopIdleSweepLocked() {
	if b.idleSweep != nil {
		b.idleSweep.Stop()
		b.idleSweep = nil
	}
}

// sleepLocked puts cl, awake, to sleep: what was built of it is undone,
// and the endpoints it wanted that another cluster lists but none wants
// lose their SubConns (those no other cluster lists are shut down as
// orphans).
func (b *xdsBalancer) sleepLocked(cl *clusterLB) {
	was := cl.wanted
	b.unbuildLocked(cl)
	for c := range was {
		if c.Wanted() == 0 && c.Listed() {
			b.pool.Release(c)
		}
	}
	cl.idle = true
	b.refreshClusterLocked(cl, false)
	b.dirty[cl] = struct{}{}
}

// idleLocked gives cl, idle and so not built, the state and picker of an
// idle cluster.
func (b *xdsBalancer) idleLocked(cl *clusterLB) {
	cl.state = connectivity.Idle
	if _, ok := cl.picker.(idlePicker); ok {
		return // the picker of this idle spell: a wake it started is on its way
	}
	cl.picker = idlePicker{b: b, cl: cl, woken: new(atomic.Bool)}
}

// markUsedLocked gives an awake cluster under an idle timeout the picker
// that notes its use.
func (b *xdsBalancer) markUsedLocked(cl *clusterLB) {
	if b.clusterIdleTimeout > 0 && !cl.idle {
		cl.picker = usedPicker{clusterPicker: cl.picker, used: &cl.used}
	}
}
