package cluster

import (
	"sync/atomic"

	"github.com/goxds/xds/dataplane/endpoint"
)

// What a Set holds, for debugging and tests. Like the rest of the Set,
// under the owner's lock.

// ClusterInfo is what a Set holds of one cluster.
type ClusterInfo struct {
	// Idle: the cluster waits for its first request, and nothing of it
	// is built.
	Idle bool
	// Priorities are the endpoints of each of its priorities, highest
	// first; nil while idle or unusable.
	Priorities [][]*endpoint.Endpoint
	// TimedOut are the priorities whose failover timer fired while they
	// were connecting, and that have not been ready since.
	TimedOut []int
	// State is the cluster's state, as its picker goes by.
	State endpoint.State
}

// Info returns what the Set holds of the named cluster, and false if it
// has no such cluster.
func (s *Set) Info(name string) (ClusterInfo, bool) {
	cl := s.clusters[name]
	if cl == nil {
		return ClusterInfo{}, false
	}
	info := ClusterInfo{Idle: cl.idle, State: cl.state}
	for _, p := range cl.prios {
		var eps []*endpoint.Endpoint
		for _, l := range p.lb.Localities {
			for _, e := range l.Endpoints {
				eps = append(eps, e.Endpoint)
			}
		}
		info.Priorities = append(info.Priorities, eps)
	}
	for i := range cl.prios {
		if cl.timedOut[i] {
			info.TimedOut = append(info.TimedOut, i)
		}
	}
	return info, true
}

// Names returns the names of the Set's clusters, in no order.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.clusters))
	for name := range s.clusters {
		out = append(out, name)
	}
	return out
}

// Stats counts what the Set holds.
type Stats struct {
	// Clusters are the Set's clusters; Built those whose priorities are
	// built (neither idle nor unusable).
	Clusters, Built int
	// FailoverEntries are the entries of the failover queue, dead ones
	// (stopped timers) included until they come up or are compacted.
	FailoverEntries int
	// IdleSweep: the idle sweep's timer runs.
	IdleSweep bool
	// Waking: a goroutine wakes the WakesQueued idle clusters pickers
	// asked to wake.
	Waking      bool
	WakesQueued int
	// PrunePending: some endpoint may have lost its last cluster since
	// the last Finish.
	PrunePending bool
}

// Stats returns the Set's counts.
func (s *Set) Stats() Stats {
	st := Stats{Clusters: len(s.clusters), FailoverEntries: s.failover.h.Len(),
		IdleSweep: s.idleSweep != nil, PrunePending: s.pruneConns}
	for _, cl := range s.clusters {
		if cl.prios != nil {
			st.Built++
		}
	}
	s.waker.mu.Lock()
	st.Waking, st.WakesQueued = s.waker.waking, len(s.waker.wakes)
	s.waker.mu.Unlock()
	return st
}

// Counter returns the in-flight counter of a leaf cluster's circuit
// breaker, nil if no cluster holds one: it outlives pickers, and the
// updates that keep a cluster using the leaf.
func (s *Set) Counter(leaf string) *atomic.Int64 {
	if c := s.counters.inflight[leaf]; c != nil {
		return &c.Int64
	}
	return nil
}

// Limits returns a leaf cluster's connection limits, nil without
// Config.ConnectionLimits or while no cluster uses the leaf.
func (s *Set) Limits(leaf string) *Limits {
	if c := s.counters.inflight[leaf]; c != nil {
		return c.limits
	}
	return nil
}
