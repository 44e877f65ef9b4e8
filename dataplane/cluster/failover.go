package cluster

import (
	"container/heap"
	"log/slog"
	"time"

	"github.com/goxds/xds/dataplane/lbpolicy"
)

// failoverQueue holds the failover deadlines of every cluster waiting for
// a priority to connect, earliest first, behind a single timer of the
// Set.
//
// A timer per cluster made expiries that come together (the endpoints of
// a zone that went down, all armed by one configuration) each take the
// lock and publish a route picker over every cluster: O(N²), seconds of
// CPU at 10,000 clusters during which no update was applied. Here the
// timer fires once for all the deadlines within failoverSlack of the
// earliest, each expiry costs only its cluster, and the route picker is
// built once for the batch.
//
// A cluster's entry is the one whose seq is the cluster's failSeq; a
// stopped or replaced timer leaves its entry behind, dropped when it comes
// up or when the queue is compacted. Guarded by the owner's lock.
type failoverQueue struct {
	h     failoverHeap
	seq   uint64         // the last seq handed out; 0 is none
	timer lbpolicy.Timer // fires at timerAt; nil if none runs
	// timerAt is when timer fires.
	timerAt time.Time
}

// failoverEntry is the deadline of priority prio of cluster cl.
type failoverEntry struct {
	at   time.Time
	cl   *Cluster
	prio int
	seq  uint64
}

func (e *failoverEntry) live() bool { return e.seq == e.cl.failSeq }

// failoverHeap is a min-heap of entries by deadline (container/heap).
type failoverHeap []failoverEntry

func (h failoverHeap) Len() int           { return len(h) }
func (h failoverHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h failoverHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *failoverHeap) Push(x any)        { *h = append(*h, x.(failoverEntry)) }
func (h *failoverHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = failoverEntry{} // let the cluster go
	*h = old[:len(old)-1]
	return e
}

// failoverSlack is how late a deadline may be acted on so that it shares
// the batch of an earlier one: a sixteenth of the timeout, at most 250 ms.
// Deadlines armed by one configuration lie as far apart as applying it
// took; a priority given slightly longer to connect loses nothing.
func failoverSlack(timeout time.Duration) time.Duration {
	return min(timeout/16, 250*time.Millisecond)
}

// armFailoverLocked starts the failover timer of priority prio unless it
// runs already: if the priority is still connecting when it fires, the
// next one is tried.
func (s *Set) armFailoverLocked(cl *Cluster, prio int) {
	if cl.failSeq != 0 && cl.timerPrio == prio {
		return
	}
	q := &s.failover
	q.seq++
	cl.failSeq, cl.timerPrio = q.seq, prio
	if len(q.h) > 2*len(s.clusters)+64 {
		q.compact()
	}
	heap.Push(&q.h, failoverEntry{at: s.clock.Now().Add(s.cfg.FailoverTimeout), cl: cl, prio: prio, seq: q.seq})
	s.scheduleFailoverLocked()
}

// stopTimer stops cl's failover timer: its entry in the queue is left
// behind, dead.
func (cl *Cluster) stopTimer() { cl.failSeq = 0 }

// compact drops the dead entries, so that clusters that keep re-arming
// (or are gone) do not grow the queue.
func (q *failoverQueue) compact() {
	live := q.h[:0]
	for _, e := range q.h {
		if e.live() {
			live = append(live, e)
		}
	}
	clear(q.h[len(live):])
	q.h = live
	heap.Init(&q.h)
}

// scheduleFailoverLocked makes the Set's timer fire failoverSlack
// after the earliest live deadline, or stops it if there is none.
func (s *Set) scheduleFailoverLocked() {
	q := &s.failover
	for len(q.h) > 0 && !q.h[0].live() {
		heap.Pop(&q.h)
	}
	if len(q.h) == 0 {
		if q.timer != nil {
			q.timer.Stop()
			q.timer = nil
		}
		return
	}
	fire := q.h[0].at.Add(failoverSlack(s.cfg.FailoverTimeout))
	if q.timer != nil && !q.timerAt.After(fire) {
		return // it fires in time; then it schedules the next
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	var t lbpolicy.Timer
	t = s.clock.AfterFunc(fire.Sub(s.clock.Now()), func() {
		s.host.Do(func() {
			if s.closed || q.timer != t {
				return
			}
			q.timer = nil
			s.expireFailoversLocked(s.clock.Now())
			s.scheduleFailoverLocked()
		})
	})
	q.timer, q.timerAt = t, fire
}

// expireFailoversLocked gives up on every priority whose deadline is past,
// marking its cluster dirty: Settle then chooses again, and the owner
// publishes once.
func (s *Set) expireFailoversLocked(now time.Time) {
	q := &s.failover
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		e := heap.Pop(&q.h).(failoverEntry)
		if !e.live() {
			continue
		}
		cl := e.cl
		cl.failSeq = 0
		if cl.timedOut == nil { // made on first use: most clusters never need it
			cl.timedOut = make(map[int]bool)
		}
		cl.timedOut[e.prio] = true
		s.host.Log(slog.LevelDebug, FailoverLogMsg, "cluster", cl.name, "priority", e.prio, "timeout", s.cfg.FailoverTimeout)
		s.dirty[cl] = struct{}{}
	}
}

// stopFailoversLocked stops the Set's failover timer, for Close.
func (s *Set) stopFailoversLocked() {
	if s.failover.timer != nil {
		s.failover.timer.Stop()
		s.failover.timer = nil
	}
	s.failover.h = nil
}
