// Package deadline is a deadline that a per-request context carries
// itself, for the route timeouts of grpcxds's RPCs and httpxds's client
// requests.
//
// context.WithTimeout costs a request seven allocations (its context,
// timer, the timer's and the cancel's closures, its Done channel, and the
// map in which it keeps a child context such as gRPC's or net/http's) and
// about 300 bytes. When the application's context is never cancelled (no
// Done channel: context.Background, its values, context.WithoutCancel), a
// context type of the caller's, already allocated per request, embeds a
// Carrier instead: the caller's Deadline, Done, Err and AfterFunc methods
// answer from it, its Done channel is closed at the deadline, and the
// timer is shared, one per shard of the process, armed for the earliest
// deadline in its heap. A context that can be cancelled keeps
// context.WithTimeout: joining two sources of cancellation would cost as
// much.
//
// The context package links a context derived from one that is not its
// own through the parent's AfterFunc method (an unexported interface of
// its own): a Carrier's context must have one (Carrier.AfterFunc), or the
// package would start a goroutine per request to wait for it.
package deadline

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// shardCount is how many heaps share the requests' deadlines, so that
// requests on many cores do not wait on one lock.
const shardCount = 16

// shards are the process's heaps of deadlines; a Carrier takes one at
// random.
var shards [shardCount]struct {
	shard
	_ [64]byte // one shard per cache line or two, not shared
}

// shard is a heap of the Carriers whose deadlines it keeps, earliest
// first, and the timer armed for the earliest. The timer is left armed
// when the heap empties (it finds nothing when it fires, and is not armed
// again), so that the usual request, whose deadline is later than the one
// armed, starts and stops no timer.
type shard struct {
	mu    sync.Mutex
	heap  []*Carrier  // guarded by mu
	timer *time.Timer // made at the first deadline; guarded by mu
	armed time.Time   // what timer is armed for; zero: not armed; guarded by mu
}

// The ways a Carrier's deadline ends (Carrier.state).
const (
	pending  = iota // not yet
	exceeded        // at the deadline
	canceled        // when the request ended before it
)

// Carrier is a request's deadline, kept in a struct the request allocates
// anyway (its context). The zero Carrier carries no deadline; Start gives
// it one. It must not be copied once started.
type Carrier struct {
	dl     time.Time
	done   chan struct{}
	afters []func()  // what AfterFunc was given; guarded by mu
	after0 [1]func() // afters' first, in the Carrier's allocation
	mu     sync.Mutex
	state  uint8 // how the deadline ended; guarded by mu
	shard  uint8 // the deadline's shards index
	// heapIdx is the Carrier's place in its shard's heap, -1 once out of
	// it; guarded by the shard's mu.
	heapIdx int32
}

// Start gives c the deadline timeout from now, and queues it for its
// shard's timer. Call it once, before c's context is handed to anyone.
func (c *Carrier) Start(timeout time.Duration) {
	c.dl = time.Now().Add(timeout)
	c.done = make(chan struct{})
	c.afters = c.after0[:0]
	c.shard = uint8(rand.IntN(shardCount))
	c.shardOf().add(c)
}

// Carries reports whether Start gave c a deadline.
func (c *Carrier) Carries() bool { return c.done != nil }

// Deadline is c's deadline, if it Carries one.
func (c *Carrier) Deadline() time.Time { return c.dl }

// Done is closed at the deadline or at End, if c Carries a deadline.
func (c *Carrier) Done() <-chan struct{} { return c.done }

func (c *Carrier) shardOf() *shard { return &shards[c.shard].shard }

// Err is what context.Context's Err says of c: nil while pending,
// context.DeadlineExceeded after the deadline, context.Canceled after
// End.
func (c *Carrier) Err() error {
	c.mu.Lock()
	st := c.state
	c.mu.Unlock()
	switch st {
	case exceeded:
		return context.DeadlineExceeded
	case canceled:
		return context.Canceled
	}
	return nil
}

// AfterFunc arranges for f to run when c is done, and returns the func
// that stops that, as context.AfterFunc does. c must carry a deadline.
func (c *Carrier) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != pending {
		go f()
		return stopNothing
	}
	i := len(c.afters)
	c.afters = append(c.afters, f)
	if i == 0 {
		return c.stopFirst // the request's derived context: the usual and only one
	}
	return func() bool { return c.stopAfter(i) }
}

func stopNothing() bool { return false }

func (c *Carrier) stopFirst() bool { return c.stopAfter(0) }

// stopAfter stops the i-th func given to AfterFunc, if it has not run.
func (c *Carrier) stopAfter(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != pending || c.afters[i] == nil {
		return false
	}
	c.afters[i] = nil
	return true
}

// cancel makes c done (how: exceeded or canceled), if it was not, and
// runs what AfterFunc was given.
func (c *Carrier) cancel(how uint8) {
	c.mu.Lock()
	if c.state != pending {
		c.mu.Unlock()
		return
	}
	c.state = how
	close(c.done)
	fs := c.afters
	c.mu.Unlock()
	// Not under mu: a context derived from c's takes its own lock and
	// asks c for its Err. They are the context package's funcs, which
	// cancel a child at once, as it cancels its own contexts' children.
	for _, f := range fs {
		if f != nil {
			f()
		}
	}
}

// End ends the deadline c carries, when the request ends: the shard
// forgets it, and c is done (Canceled unless the deadline came first), as
// context.WithTimeout's cancel makes its context. Calling it again does
// nothing. c must carry a deadline.
func (c *Carrier) End() {
	c.shardOf().remove(c)
	c.cancel(canceled)
}

// add queues c, whose deadline is set; c.heapIdx is then guarded by mu.
func (sh *shard) add(c *Carrier) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := len(sh.heap)
	c.heapIdx = int32(i)
	sh.heap = append(sh.heap, c)
	sh.up(i)
	if sh.armed.IsZero() || c.dl.Before(sh.armed) {
		d := time.Until(c.dl)
		if sh.timer == nil {
			sh.timer = time.AfterFunc(d, sh.expire)
		} else {
			sh.timer.Reset(d)
		}
		sh.armed = c.dl
	}
}

// remove forgets c, if it is still queued.
func (sh *shard) remove(c *Carrier) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.removeLocked(c)
}

func (sh *shard) removeLocked(c *Carrier) {
	if i := int(c.heapIdx); i >= 0 {
		last := len(sh.heap) - 1
		sh.swap(i, last)
		sh.heap[last] = nil
		sh.heap = sh.heap[:last]
		if i < last {
			sh.down(i)
			sh.up(i)
		}
		c.heapIdx = -1
	}
}

// expire is the shard's timer: it cancels every Carrier whose deadline
// has come, and arms the timer for the next one. A timer that fires late,
// or after being armed again, only finds less to do.
func (sh *shard) expire() {
	var due []*Carrier
	sh.mu.Lock()
	now := time.Now()
	for len(sh.heap) > 0 && !sh.heap[0].dl.After(now) {
		c := sh.heap[0]
		sh.removeLocked(c)
		due = append(due, c)
	}
	sh.armed = time.Time{}
	if len(sh.heap) > 0 {
		sh.armed = sh.heap[0].dl
		sh.timer.Reset(sh.armed.Sub(now))
	}
	sh.mu.Unlock()
	for _, c := range due {
		c.cancel(exceeded)
	}
}

func (sh *shard) swap(i, j int) {
	sh.heap[i], sh.heap[j] = sh.heap[j], sh.heap[i]
	sh.heap[i].heapIdx = int32(i)
	sh.heap[j].heapIdx = int32(j)
}

func (sh *shard) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !sh.heap[i].dl.Before(sh.heap[parent].dl) {
			return
		}
		sh.swap(i, parent)
		i = parent
	}
}

func (sh *shard) down(i int) {
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
