package serverlds

import (
	"errors"
	"sync"
)

// ErrStopped is Set.Serve's error once the set has stopped.
var ErrStopped = errors.New("the server has stopped")

// Set is the listeners of one server, so that its stop reaches every one
// that serves. The zero value is an empty set.
type Set[G comparable] struct {
	mu      sync.Mutex
	ls      map[*Listener[G]]bool
	stopped bool
}

// Serve runs l.Serve as a listener of the set, and returns its error.
// After Stop it returns ErrStopped at once, and closes l's socket.
func (s *Set[G]) Serve(l *Listener[G]) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		l.cfg.Raw.Close()
		return ErrStopped
	}
	if s.ls == nil {
		s.ls = make(map[*Listener[G]]bool)
	}
	s.ls[l] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.ls, l)
		s.mu.Unlock()
	}()
	return l.Serve()
}

// Stop stops the set: Serve refuses new listeners. It returns the
// listeners serving, for the server to close, and whether the set had
// stopped already.
func (s *Set[G]) Stop() (ls []*Listener[G], already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	already, s.stopped = s.stopped, true
	ls = make([]*Listener[G], 0, len(s.ls))
	for l := range s.ls {
		ls = append(ls, l)
	}
	return ls, already
}
