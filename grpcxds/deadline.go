package grpcxds

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// A route's timeout (max_stream_duration, grpc_timeout_header_max) gives
// the RPC a deadline. context.WithTimeout would cost seven allocations per
// RPC: its context, timer, the timer's and the cancel's closures, its Done
// channel and the map in which it keeps gRPC's own child context. When the
// application's context is never cancelled (no Done channel:
// context.Background, its values, context.WithoutCancel), the selection,
// which is the RPC's context already, carries the deadline itself instead:
// its Deadline reports it, its Done channel is closed at it, and the timer
// is shared, one per shard of deadlineShards for the whole process, armed
// for the earliest deadline in its heap. An application context that can
// be cancelled keeps context.WithTimeout: joining two sources of
// cancellation would cost as much.
//
// gRPC derives a context of its own from the RPC's (context.WithCancel);
// the context package links it to a parent that is not one of its own
// through the parent's AfterFunc method, which the selection has: that
// link is three allocations (the package's closure and stopCtx, and the
// stop func), so the RPC's deadline costs four with the Done channel.

// deadlineShardCount is how many heaps share the RPCs' deadlines, so that
// RPCs on many cores do not wait on one lock.
const deadlineShardCount = 16

// deadlineShards are the process's heaps of route deadlines; an RPC takes
// one at random.
var deadlineShards [deadlineShardCount]struct {
	deadlineShard
	_ [64]byte // one shard per cache line or two, not shared
}

// deadlineShard is a heap of the selections whose deadlines it keeps,
// earliest first, and the timer armed for the earliest. The timer is left
// armed when the heap empties (it finds nothing when it fires, and is not
// armed again), so that the usual RPC, whose deadline is later than the
// one armed, starts and stops no timer.
type deadlineShard struct {
	mu    sync.Mutex
	heap  []*selection // guarded by mu
	timer *time.Timer  // made at the first deadline; guarded by mu
	armed time.Time    // what timer is armed for; zero: not armed; guarded by mu
}

// startDeadline makes s carry the RPC's deadline, timeout from now, and
// queues it for its shard's timer. Only start calls it, before s is
// handed to anyone else.
func (s *selection) startDeadline(timeout time.Duration) {
	s.dl = time.Now().Add(timeout)
	s.done = make(chan struct{})
	s.afters = s.after0[:0]
	s.shard = uint8(rand.IntN(deadlineShardCount))
	s.deadlineShard().add(s)
}

// The ways a deadline the selection carries ends (dstate).
const (
	dlPending  = iota // not yet
	dlExceeded        // at the deadline
	dlCanceled        // when the RPC ended before it
)

// deadlineShard is the shard that keeps the deadline of s.
func (s *selection) deadlineShard() *deadlineShard {
	return &deadlineShards[s.shard].deadlineShard
}

// Deadline implements context.Context: the route's deadline, or the
// application's.
func (s *selection) Deadline() (time.Time, bool) {
	if s.done != nil {
		return s.dl, true
	}
	return s.Context.Deadline()
}

// Done implements context.Context: closed at the route's deadline or when
// the RPC ends, if s carries the deadline; else the application's.
func (s *selection) Done() <-chan struct{} {
	if s.done != nil {
		return s.done
	}
	return s.Context.Done()
}

// Err implements context.Context.
func (s *selection) Err() error {
	if s.done == nil {
		return s.Context.Err()
	}
	s.dmu.Lock()
	st := s.dstate
	s.dmu.Unlock()
	switch st {
	case dlExceeded:
		return context.DeadlineExceeded
	case dlCanceled:
		return context.Canceled
	}
	return nil
}

// AfterFunc arranges for f to run when s is done, and returns the func
// that stops that. The context package calls it (an unexported interface
// of its own) to cancel a context derived from s when s is done, such as
// the one gRPC makes for each RPC: without it, the package would start a
// goroutine per RPC to wait for s. When s does not carry a deadline, it is
// done when the application's context is, which takes f.
func (s *selection) AfterFunc(f func()) (stop func() bool) {
	if s.done == nil {
		return context.AfterFunc(s.Context, f)
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.dstate != dlPending {
		go f()
		return stopNothing
	}
	i := len(s.afters)
	s.afters = append(s.afters, f)
	if i == 0 {
		return s.stopFirst // gRPC's child: the usual and only one
	}
	return func() bool { return s.stopAfter(i) }
}

func stopNothing() bool { return false }

func (s *selection) stopFirst() bool { return s.stopAfter(0) }

// stopAfter stops the i-th func given to AfterFunc, if it has not run.
func (s *selection) stopAfter(i int) bool {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.dstate != dlPending || s.afters[i] == nil {
		return false
	}
	s.afters[i] = nil
	return true
}

// cancel makes s done (how: dlExceeded or dlCanceled), if it was not,
// and runs what AfterFunc was given. s must carry a deadline.
func (s *selection) cancel(how uint8) {
	s.dmu.Lock()
	if s.dstate != dlPending {
		s.dmu.Unlock()
		return
	}
	s.dstate = how
	close(s.done)
	fs := s.afters
	s.dmu.Unlock()
	// Not under dmu: a context derived from s takes its own lock and asks
	// s for its Err. They are the context package's funcs, which cancel a
	// child at once, as it cancels its own contexts' children.
	for _, f := range fs {
		if f != nil {
			f()
		}
	}
}

// endDeadline ends the deadline s carries, when the RPC ends: the shard
// forgets it, and s is done, as context.WithTimeout's cancel makes it.
func (s *selection) endDeadline() {
	s.deadlineShard().remove(s)
	s.cancel(dlCanceled)
}

// add queues s, whose deadline is set; s.heapIdx is then guarded by mu.
func (sh *deadlineShard) add(s *selection) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := len(sh.heap)
	s.heapIdx = int32(i)
	sh.heap = append(sh.heap, s)
	sh.up(i)
	if sh.armed.IsZero() || s.dl.Before(sh.armed) {
		d := time.Until(s.dl)
		if sh.timer == nil {
			sh.timer = time.AfterFunc(d, sh.expire)
		} else {
			sh.timer.Reset(d)
		}
		sh.armed = s.dl
	}
}

// remove forgets s, if it is still queued.
func (sh *deadlineShard) remove(s *selection) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.removeLocked(s)
}

func (sh *deadlineShard) removeLocked(s *selection) {
	if i := int(s.heapIdx); i >= 0 {
		last := len(sh.heap) - 1
		sh.swap(i, last)
		sh.heap[last] = nil
		sh.heap = sh.heap[:last]
		if i < last {
			sh.down(i)
			sh.up(i)
		}
		s.heapIdx = -1
	}
}

// expire is the shard's timer: it cancels every selection whose deadline
// has come, and arms the timer for the next one. A timer that fires late,
// or after being armed again, only finds less to do.
func (sh *deadlineShard) expire() {
	var due []*selection
	sh.mu.Lock()
	now := time.Now()
	for len(sh.heap) > 0 && !sh.heap[0].dl.After(now) {
		s := sh.heap[0]
		sh.removeLocked(s)
		due = append(due, s)
	}
	sh.armed = time.Time{}
	if len(sh.heap) > 0 {
		sh.armed = sh.heap[0].dl
		sh.timer.Reset(sh.armed.Sub(now))
	}
	sh.mu.Unlock()
	for _, s := range due {
		s.cancel(dlExceeded)
	}
}

func (sh *deadlineShard) swap(i, j int) {
	sh.heap[i], sh.heap[j] = sh.heap[j], sh.heap[i]
	sh.heap[i].heapIdx = int32(i)
	sh.heap[j].heapIdx = int32(j)
}

func (sh *deadlineShard) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !sh.heap[i].dl.Before(sh.heap[parent].dl) {
			return
		}
		sh.swap(i, parent)
		i = parent
	}
}

func (sh *deadlineShard) down(i int) {
	n := len(sh.heap)
	for {
		least := i
		if l := 2*i + 1; l < n && sh.heap[l].dl.Before(sh.heap[least].dl) {
			least = l
		}
		if r := 2*i + 2; r < n && sh.heap[r].dl.Before(sh.heap[least].dl) {
			least = r
		}
		if least == i {
			return
		}
		sh.swap(i, least)
		i = least
	}
}
