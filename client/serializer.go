package client

import (
	"bytes"
	"runtime"
	"strconv"
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
	// goid identifies the serializer's goroutine, so that close, called
	// from a callback, knows not to wait for itself. Set once by run.
	goid atomic.Uint64
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
	s.goid.Store(goroutineID())
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
// Called from a callback, it cannot wait for that callback: it returns at
// once, and the goroutine ends as soon as the callback returns, running
// nothing else. It reports whether it waited.
func (s *serializer) close() (waited bool) {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.stopping.Store(true)
		s.queue = nil
		close(s.wake)
	}
	s.mu.Unlock()
	if s.inCallback() {
		return false
	}
	<-s.done
	return true
}

// inCallback tells whether the caller runs on the serializer's goroutine,
// that is, inside a callback.
func (s *serializer) inCallback() bool {
	id := s.goid.Load()
	return id != 0 && id == goroutineID()
}

// afterClose runs f on a goroutine of its own once the serializer's
// goroutine has ended, so that f, a callback, never overlaps another. It is
// for telling a watcher that arrives after close that the client is closed.
func (s *serializer) afterClose(f func()) {
	go func() {
		<-s.done
		f()
	}()
}

// goroutineID returns the id of the calling goroutine. Go hides goroutine
// identity on purpose, but Close must behave differently when a callback
// calls it (it cannot wait for its own caller to return), and the watcher
// API gives a callback no context to say so; the first line of the
// goroutine's stack trace, "goroutine 123 [running]:", names it. It costs
// about a microsecond and is only called by close, and once by run.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, _ = bytes.CutPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		// Unreachable with any Go release so far; were the format to
		// change, inCallback would take 0 for "not known" and close
		// would wait, as it did before it could tell.
		return 0
	}
	return id
}
