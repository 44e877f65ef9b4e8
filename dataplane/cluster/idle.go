package cluster

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goxds/xds/dataplane/endpoint"
)

// Clusters that connect on their first request (Config.ConnectOnFirstRPC),
// and go idle again when unused (Config.ClusterIdleTimeout).
//
// gRPC connects the endpoints of every cluster the routes name as soon as
// the configuration arrives. A mesh-wide route configuration names
// thousands of clusters a service never calls, and each endpoint connected
// costs grpc-go an HTTP/2 transport (tens of KiB and two goroutines) and,
// when the endpoint does not answer, a redial every backoff. With the
// option a route's cluster starts idle: nothing of it is built (no
// priorities, endpoints, timers or DNS resolutions: at 100,000 clusters
// that is most of the Set's memory), and its picker wakes it on the
// first pick. The cluster is built then, from the snapshot in force, and
// the RPC waits for the picker that follows, as it would for a cluster
// still connecting.
//
// With an idle timeout, the picker of an awake cluster notes that it was
// used (usedPicker), and a sweep every timeout puts to sleep the clusters
// not used since the sweep before and with no RPC in flight: idle after one
// to two timeouts without an RPC. What was built of them is undone: endpoints that no other
// cluster lists are shut down, and those others list but none wants lose
// their connections.

// idlePicker is the picker of an idle cluster. Its first pick asks for the
// cluster to be woken, on a goroutine of the Set's (a pick must not take
// the owner's lock, nor publish a picker from inside the transport's
// pick); every pick queues its request.
type idlePicker struct {
	s     *Set
	cl    *Cluster
	woken *atomic.Bool // shared by the pickers of one idle spell
}

func (p idlePicker) Pick(any, uint64) (Result, error) {
	if p.woken.CompareAndSwap(false, true) {
		p.s.askWake(p.cl)
	}
	return Result{}, ErrQueue
}

// usedPicker is the picker of an awake cluster under an idle timeout: it
// marks the cluster used. The flag is read before it is written, so that
// RPCs to a busy cluster do not all write the same cache line.
type usedPicker struct {
	Picker
	used *atomic.Bool
}

func (p usedPicker) Pick(req any, hash uint64) (Result, error) {
	if !p.used.Load() {
		p.used.Store(true)
	}
	return p.Picker.Pick(req, hash)
}

// waker wakes the idle clusters pickers asked to wake (askWake), and the
// idle priorities of awake ones (askExitIdle, exitidle.go), on one
// goroutine. Guarded by mu, which pickers take, never with the owner's
// lock; done is the goroutine's, which Close waits for.
type waker struct {
	mu     sync.Mutex
	wakes  []*Cluster
	exits  []*leafWake
	waking bool
	closed bool
	done   sync.WaitGroup
}

// askWake queues cl to be woken. One goroutine wakes what is queued, so
// that RPCs fanning out to thousands of idle clusters at once make one
// goroutine and a few pickers, not one of each per cluster.
func (s *Set) askWake(cl *Cluster) {
	w := &s.waker
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return // a pick racing Close: nothing to wake
	}
	w.wakes = append(w.wakes, cl)
	if !w.waking {
		w.waking = true
		w.done.Go(s.wakeQueued)
	}
}

// StopWaking, for the owner's Close, once its lock is released, lets no
// pick start waking clusters, and waits for the goroutine waking them, if
// one runs (it finds the Set closed).
func (s *Set) StopWaking() {
	w := &s.waker
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.done.Wait()
}

// wakeQueued wakes the queued clusters that are still the Set's and idle,
// and the queued priorities, and has the owner publish once.
func (s *Set) wakeQueued() {
	s.host.Do(s.wakeQueuedLocked)
}

func (s *Set) wakeQueuedLocked() {
	w := &s.waker
	w.mu.Lock()
	wakes, exits := w.wakes, w.exits
	w.wakes, w.exits, w.waking = nil, nil, false
	w.mu.Unlock()
	s.exitIdleLocked(exits)
	var woken []string
	for _, cl := range wakes { // after Close, s.clusters is nil: nothing is woken
		if !s.closed && s.clusters[cl.name] == cl && cl.idle {
			s.wakeLocked(cl)
			woken = append(woken, cl.name)
		}
	}
	if len(woken) > 0 {
		slices.Sort(woken)
		s.host.Log(slog.LevelDebug, "clusters connecting on their first RPC", "count", len(woken), "clusters", woken[:min(len(woken), 10)])
	}
}

// wakeLocked makes cl connect from now on: it is built from the snapshot
// in force (later snapshots change it as they change any cluster), and
// chooses a priority, and so wants its endpoints, when Settle runs.
func (s *Set) wakeLocked(cl *Cluster) {
	if !cl.idle {
		return
	}
	cl.idle = false
	cl.used.Store(true) // the RPC that woke it: the next sweep spares it
	s.refreshClusterLocked(cl, true)
	s.dirty[cl] = struct{}{}
	if s.cfg.ClusterIdleTimeout > 0 && s.idleSweep == nil {
		s.idleSweep = s.clock.AfterFunc(s.cfg.ClusterIdleTimeout, s.sweepIdle)
	}
}

// sweepIdle puts to sleep the clusters no RPC used since the last sweep,
// and runs again while some cluster is awake.
func (s *Set) sweepIdle() { s.host.Do(s.sweepIdleLocked) }

func (s *Set) sweepIdleLocked() {
	s.idleSweep = nil
	if s.closed || !s.cfg.ConnectOnFirstRPC || s.cfg.ClusterIdleTimeout <= 0 {
		return
	}
	awake := false
	var slept []string
	for name, cl := range s.clusters {
		switch {
		case cl.idle:
		case s.host.Pinned(name):
			// The host holds it awake (grpcxds: an RLS child, whose
			// policy's cache decides how long a target lives).
			awake = true
		case cl.used.Swap(false), s.inFlightLocked(cl):
			// Picked since the last sweep, or RPCs still running on it (a
			// long stream picks once): in use.
			awake = true
		default:
			s.sleepLocked(cl)
			slept = append(slept, name)
		}
	}
	if len(slept) > 0 {
		// One line, not one per cluster: thousands may sleep at once.
		slices.Sort(slept)
		s.host.Log(slog.LevelDebug, "clusters idle: no RPC within the idle timeout", "count", len(slept),
			"clusters", slept[:min(len(slept), 10)], "timeout", s.cfg.ClusterIdleTimeout)
	}
	if awake {
		s.idleSweep = s.clock.AfterFunc(s.cfg.ClusterIdleTimeout, s.sweepIdle)
	}
}

// inFlightLocked reports whether RPCs picked in cl have not finished: the
// in-flight counts of its leaves (its circuit breakers'), which aggregate
// clusters sharing a leaf share too.
func (s *Set) inFlightLocked(cl *Cluster) bool {
	for _, leaf := range cl.held.counters {
		if c := s.counters.inflight[leaf]; c != nil && c.Load() > 0 {
			return true
		}
	}
	return false
}

// stopIdleSweepLocked stops the sweep, for Close.
func (s *Set) stopIdleSweepLocked() {
	if s.idleSweep != nil {
		s.idleSweep.Stop()
		s.idleSweep = nil
	}
}

// sleepLocked puts cl, awake, to sleep: what was built of it is undone,
// and the endpoints it wanted that another cluster lists but none wants
// lose their connections (those no other cluster lists are shut down as
// orphans).
func (s *Set) sleepLocked(cl *Cluster) {
	was := cl.wanted
	s.unbuildLocked(cl)
	for c := range was {
		if c.Wanted() == 0 && c.Listed() {
			s.pool.Release(c)
		}
	}
	cl.idle = true
	s.refreshClusterLocked(cl, false)
	s.dirty[cl] = struct{}{}
}

// idleLocked gives cl, idle and so not built, the state and picker of an
// idle cluster.
func (s *Set) idleLocked(cl *Cluster) {
	cl.state = endpoint.Idle
	if _, ok := cl.picker.(idlePicker); ok {
		return // the picker of this idle spell: a wake it started is on its way
	}
	cl.picker = idlePicker{s: s, cl: cl, woken: new(atomic.Bool)}
}

// markUsedLocked gives an awake cluster under an idle timeout the picker
// that notes its use.
func (s *Set) markUsedLocked(cl *Cluster) {
	if s.cfg.ClusterIdleTimeout > 0 && !cl.idle {
		cl.picker = usedPicker{Picker: cl.picker, used: &cl.used}
	}
}
