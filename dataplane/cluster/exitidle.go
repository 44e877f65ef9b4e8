package cluster

import (
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
)

// Priorities whose policy went idle: pick_first after the endpoint it
// chose lost its connection (gRFC A62). gRPC's pick_first goes IDLE then,
// connects nothing, and its picker asks it to exit idle on the next pick,
// which starts a new pass from the first address; the priority policy
// (gRFC A56) uses an IDLE child as it would a READY one. Here the
// priority's state is Idle, the cluster uses it without a failover timer,
// and its picker (idleLeafPicker) queues each request and has the Set
// call the leaf's ExitIdle, under the owner's lock, on the goroutine
// that wakes idle clusters (idle.go): a pick must not take that lock.

// leafWake is the wake of one idle priority, shared by the pickers of
// one idle spell: asked is set by the first pick.
type leafWake struct {
	s     *Set
	cl    *Cluster
	p     *priority
	asked atomic.Bool
}

// idleLeafPicker is the picker of a cluster whose priority in use is
// idle: the priority's picker applies drops and the circuit breaker as
// ever, and a request its policy meets idle (lbpolicy.ErrIdle) asks for
// the priority to connect and waits for the next picker.
type idleLeafPicker struct {
	Picker
	wake *leafWake
}

func (p idleLeafPicker) Pick(req any, hash uint64) (Result, error) {
	res, err := p.Picker.Pick(req, hash)
	if !errors.Is(err, lbpolicy.ErrIdle) {
		return res, err
	}
	if p.wake.asked.CompareAndSwap(false, true) {
		p.wake.s.askExitIdle(p.wake)
	}
	return Result{}, ErrQueue
}

// askExitIdle queues w's priority to leave idle, on the goroutine that
// wakes idle clusters.
func (s *Set) askExitIdle(w *leafWake) {
	wk := &s.waker
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.closed {
		return // a pick racing Close
	}
	wk.exits = append(wk.exits, w)
	if !wk.waking {
		wk.waking = true
		wk.done.Go(s.wakeQueued)
	}
}

// exitIdleLocked has the priorities of exits, if still their cluster's,
// start a new pass; their clusters choose their pickers again.
func (s *Set) exitIdleLocked(exits []*leafWake) {
	n := 0
	for _, w := range exits {
		cl := w.cl
		if s.closed || s.clusters[cl.name] != cl || !slices.Contains(cl.prios, w.p) {
			continue // rebuilt or dropped since: its new picker decides
		}
		if w.p.lb.ExitIdle() {
			s.dirty[cl] = struct{}{}
			n++
		}
	}
	if n > 0 {
		s.host.Log(slog.LevelDebug, "pick_first connecting again on an RPC", "clusters", n)
	}
}

// ExitIdle has every idle policy of the awake clusters start connecting
// (pick_first's new pass), and the pool connect the wanted endpoints
// whose connections are idle: the transport asks for it (gRPC's
// balancer.ExitIdle, on ClientConn.Connect). Idle clusters stay idle
// (ConnectOnFirstRPC): a request wakes them.
func (s *Set) ExitIdle() {
	for _, cl := range s.clusters {
		for _, p := range cl.prios {
			if p.lb.ExitIdle() {
				s.dirty[cl] = struct{}{}
			}
		}
	}
	s.pool.ExitIdle()
}

// releaseIdleLocked shuts down the connections of p's endpoints that no
// cluster wants, p being idle: as gRPC's pick_first shuts down its other
// SubConns when it goes idle, so that its next pass connects each
// endpoint afresh rather than finding it in a backoff left from the last
// pass (it would be passed over, and connected out of turn when its
// backoff ends). An endpoint released stays listed; it connects again
// when wanted.
func (s *Set) releaseIdleLocked(p *priority) {
	for _, l := range p.lb.Localities {
		for _, e := range l.Endpoints {
			if ep := e.Endpoint; ep.Wanted() == 0 && ep.Conn() != nil && ep.State() != endpoint.Ready {
				s.pool.Release(ep)
			}
		}
	}
}
