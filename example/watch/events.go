package main

import (
	"context"
	"sync"

	"github.com/goxds/xds/watchers"
)

// event is one call of the tree to its watcher.
type event struct {
	snap    *watchers.Snapshot
	err     error // with ambient, or alone for a ResourceError
	ambient bool
}

// eventQueue is a TreeWatcher that queues what it is told for the main
// goroutine. It never blocks: the callbacks run on the client's goroutine,
// which must not wait for the printing.
type eventQueue struct {
	mu     sync.Mutex
	q      []event
	notify chan struct{} // capacity 1: something was queued
}

func newEventQueue() *eventQueue { return &eventQueue{notify: make(chan struct{}, 1)} }

func (q *eventQueue) push(ev event) {
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *eventQueue) Update(s *watchers.Snapshot) { q.push(event{snap: s}) }
func (q *eventQueue) ResourceError(err error)     { q.push(event{err: err}) }
func (q *eventQueue) AmbientError(err error)      { q.push(event{err: err, ambient: true}) }

// next returns the oldest event, waiting for one until ctx is done.
func (q *eventQueue) next(ctx context.Context) (event, error) {
	for {
		q.mu.Lock()
		if len(q.q) > 0 {
			ev := q.q[0]
			q.q = q.q[1:]
			q.mu.Unlock()
			return ev, nil
		}
		q.mu.Unlock()
		select {
		case <-q.notify:
		case <-ctx.Done():
			return event{}, ctx.Err()
		}
	}
}
