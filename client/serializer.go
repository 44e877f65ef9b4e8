package client

import (
	"sync"
	"sync/atomic"
)

// serializer runs callbacks one at a time, in the order they were
// scheduled, on a goroutine of its own. It is the only place user code runs,
// so watcher callbacks never overlap and never run under a client lock.
// Scheduling never blocks: the queue is unbounded, which is what lets the
// client schedule while holding its mutex.
type serializer struct {
	mu     sync.Mutex
	queue  []func() // guarded by mu
	closed bool     // guarded by mu
	// stopping is closed, readable without mu, so that close need not wait
	// for the rest of a batch already taken from the queue.
	stopping atomic.Bool

	wake chan struct{} // capacity 1
	done chan struct{} // closed when the goroutine has returned
}

func newSerializer() *serializer {
	s := &serializer{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// schedule queues f. After close, f is dropped.
func (s *serializer) schedule(f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, f)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *serializer) run() {
	defer close(s.done)
	var batch []func()
	for range s.wake {
		for {
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return
			}
			batch, s.queue = s.queue, batch[:0]
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for i, f := range batch {
				if s.stopping.Load() {
					return
				}
				f()
				batch[i] = nil // let the closure's captures go
			}
		}
	}
}

// close drops what is queued and waits for a running callback to return.
// It must not be called from a callback.
func (s *serializer) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.stopping.Store(true)
		s.queue = nil
		close(s.wake)
	}
	s.mu.Unlock()
	<-s.done
}
