//go:build !linux

package transport

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// watchReportsCloses: fsnotify does not tell when a writer closes a file,
// so a file changed in place is read once it has been quiet.
const watchReportsCloses = false

// dirWatcher reports changes in directories through fsnotify, its events
// translated by a goroutine of its own.
type dirWatcher struct {
	w      *fsnotify.Watcher
	evs    chan fileEvent
	done   chan struct{} // closed by close: the translator stops
	exited chan struct{} // closed when the translator returns

	mu   sync.Mutex
	dirs map[string]bool // the directories watched; guarded by mu
}

func newDirWatcher() (*dirWatcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("fsnotify: %w", err)
	}
	w := &dirWatcher{
		w:      fw,
		evs:    make(chan fileEvent),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
		dirs:   make(map[string]bool),
	}
	go w.translate()
	return w, nil
}

func (w *dirWatcher) events() <-chan fileEvent { return w.evs }
func (w *dirWatcher) errors() <-chan error     { return w.w.Errors }

// add watches dir, which must exist.
func (w *dirWatcher) add(dir string) error {
	dir = filepath.Clean(dir)
	if err := w.w.Add(dir); err != nil {
		return err
	}
	w.mu.Lock()
	w.dirs[dir] = true
	w.mu.Unlock()
	return nil
}

// close stops the watcher; no goroutine of it is left when it returns.
func (w *dirWatcher) close() {
	close(w.done)
	w.w.Close()
	<-w.exited
}

func (w *dirWatcher) translate() {
	defer close(w.exited)
	for {
		var ev fsnotify.Event
		select {
		case <-w.done:
			return
		case e, ok := <-w.w.Events:
			if !ok {
				return
			}
			ev = e
		}
		name := filepath.Clean(ev.Name)
		var out fileEvent
		w.mu.Lock()
		gone := w.dirs[name] && ev.Has(fsnotify.Remove|fsnotify.Rename)
		if gone {
			delete(w.dirs, name)
		}
		w.mu.Unlock()
		switch {
		case gone:
			out = fileEvent{name: name, op: opDirGone}
		case ev.Has(fsnotify.Write):
			// Looked at as a change in place; file.go tells a file
			// replaced from one changed by its identity.
			out = fileEvent{name: name, op: opWritten}
		case ev.Has(fsnotify.Chmod):
			out = fileEvent{name: name, op: opAttrib}
		case ev.Has(fsnotify.Create):
			out = fileEvent{name: name, op: opReplaced}
		case ev.Has(fsnotify.Remove | fsnotify.Rename):
			out = fileEvent{name: name, op: opRemoved}
		default:
			continue
		}
		select {
		case w.evs <- out:
		case <-w.done:
			return
		}
	}
}
