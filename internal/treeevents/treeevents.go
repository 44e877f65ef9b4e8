// Package treeevents turns a config-tree watch into events a program's own
// goroutine takes one at a time, and prints them as a tree and then as the
// lines that change: what the goxds tool's watch and the watch example
// both do.
package treeevents

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/goxds/xds/watchers"
)

// Event is one call of the tree to its watcher.
type Event struct {
	Snap    *watchers.Snapshot
	Err     error // with Ambient, or alone for a ResourceError
	Ambient bool
	At      time.Time // when the tree told it
}

// Queue is a watchers.TreeWatcher that queues what it is told for the
// program's goroutine. It never blocks: the callbacks run on the client's
// goroutine, which must not wait for the printing (a slow terminal would
// hold the client's stream).
type Queue struct {
	mu     sync.Mutex
	q      []Event
	notify chan struct{} // capacity 1: something was queued
}

// NewQueue returns an empty Queue.
func NewQueue() *Queue { return &Queue{notify: make(chan struct{}, 1)} }

func (q *Queue) push(ev Event) {
	ev.At = time.Now()
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Update implements watchers.TreeWatcher.
func (q *Queue) Update(s *watchers.Snapshot) { q.push(Event{Snap: s}) }

// ResourceError implements watchers.TreeWatcher.
func (q *Queue) ResourceError(err error) { q.push(Event{Err: err}) }

// AmbientError implements watchers.TreeWatcher.
func (q *Queue) AmbientError(err error) { q.push(Event{Err: err, Ambient: true}) }

// Next returns the oldest event, waiting for one until ctx is done.
func (q *Queue) Next(ctx context.Context) (Event, error) {
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
			return Event{}, ctx.Err()
		}
	}
}

// Printer prints events: the first snapshot, and any after an error, in
// full; later ones as the lines that changed (watchers.DiffLines), with
// the lines above them in the tree for context.
type Printer struct {
	W io.Writer
	// Render draws a snapshot as a tree indented two spaces a level, one
	// line per element; nil: Snapshot.Lines.
	Render func(*watchers.Snapshot) []string
	prev   []string // the tree printed last; nil after a ResourceError
}

// Print prints ev; a change is headed by title.
func (p *Printer) Print(ev Event, title string) {
	render := p.Render
	if render == nil {
		render = (*watchers.Snapshot).Lines
	}
	switch {
	case ev.Ambient:
		fmt.Fprintf(p.W, "warning: %v (the tree above stays in force)\n", ev.Err)
	case ev.Err != nil:
		fmt.Fprintf(p.W, "error: %v\n", ev.Err)
		p.prev = nil
	case p.prev == nil:
		lines := render(ev.Snap)
		for _, l := range lines {
			fmt.Fprintln(p.W, l)
		}
		p.prev = lines
	default:
		lines := render(ev.Snap)
		changes := watchers.DiffLines(p.prev, lines)
		p.prev = lines
		if len(changes) == 0 {
			// A new snapshot can render the same: a resource resent with
			// another version, or a change to a field the tree does not show.
			return
		}
		fmt.Fprintf(p.W, "--- %s\n", title)
		for _, l := range changes {
			fmt.Fprintln(p.W, l)
		}
	}
}
