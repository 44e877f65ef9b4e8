package grpcxds

import (
	"container/heap"
	"log/slog"
	"time"
)

// failoverQueue holds the failover deadlines of every cluster waiting for
// a priority to connect, earliest first, behind a single timer of the
// balancer.
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
// up or when the queue is compacted. Guarded by xdsBalancer.mu.
type failoverQueue struct {
	h     failoverHeap
	seq   uint64  // the last seq handed out; 0 is none
	timer stopper // fires at timerAt; nil if none runs
	// timerAt is when timer fires.
	timerAt time.Time
}

// failoverEntry is the deadline of priority prio of cluster cl.
type failoverEntry struct {
	at   time.Time
	cl   *clusterLB
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
func (b *xdsBalancer) armFailoverLocked(cl *clusterLB, prio int) {
	if cl.failSeq != 0 && cl.timerPrio == prio {
		return
	}
	q := &b.failover
	q.seq++
	cl.failSeq, cl.timerPrio = q.seq, prio
	if len(q.h) > 2*len(b.clusters)+64 {
		q.compact()
	}
	heap.Push(&q.h, failoverEntry{at: b.clock.Now().Add(b.failoverTimeout), cl: cl, prio: prio, seq: q.seq})
	b.scheduleFailoverLocked()
}

// stopTimer stops cl's failover timer: its entry in the queue is left
// behind, dead.
func (cl *clusterLB) stopTimer() { cl.failSeq = 0 }

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

// scheduleFailoverLocked makes the balancer's timer fire failoverSlack
// after the earliest live deadline, or stops it if there is none.
func (b *xdsBalancer) scheduleFailoverLocked() {
	q := &b.failover
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
	fire := q.h[0].at.Add(failoverSlack(b.failoverTimeout))
	if q.timer != nil && !q.timerAt.After(fire) {
		return // it fires in time; then it schedules the next
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	var t stopper
	t = b.clock.AfterFunc(fire.Sub(b.clock.Now()), func() {
		b.mu.Lock()
		if b.closed || q.timer != t {
			b.mu.Unlock()
			return
		}
		q.timer = nil
		b.expireFailoversLocked(b.clock.Now())
		b.scheduleFailoverLocked()
		b.finishAndUnlock()
	})
	q.timer, q.timerAt = t, fire
}

// expireFailoversLocked gives up on every priority whose deadline is past,
// marking its cluster dirty: finishAndUnlock then chooses again, and
// publishes once.
func (b *xdsBalancer) expireFailoversLocked(now time.Time) {
	q := &b.failover
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
		b.logLocked(slog.LevelDebug, failoverLogMsg, "cluster", cl.name, "priority", e.prio, "timeout", b.failoverTimeout)
		b.dirty[cl] = struct{}{}
	}
}

// stopFailoversLocked stops the balancer's failover timer, for Close.
func (b *xdsBalancer) stopFailoversLocked() {
	if b.failover.timer != nil {
		b.failover.timer.Stop()
		b.failover.timer = nil
	}
	b.failover.h = nil
}
