package httpxds

import (
	"fmt"
	"sync"
)

// ServingMode is whether a listening address serves requests (gRFC A36's
// serving modes, as package xdsserver has them for gRPC).
type ServingMode int

// The serving modes of an address.
const (
	// ServingModeStarting: the address's Listener has not arrived yet;
	// connections are accepted and closed.
	ServingModeStarting ServingMode = iota
	// ServingModeServing: the Listener (and every route configuration it
	// names) is held; connections are served.
	ServingModeServing
	// ServingModeNotServing: the Listener does not exist, or was rejected
	// and nothing good is held; connections are accepted and closed, and
	// those already open are drained.
	ServingModeNotServing
)

// String names the mode.
func (m ServingMode) String() string {
	switch m {
	case ServingModeStarting:
		return "starting"
	case ServingModeServing:
		return "serving"
	case ServingModeNotServing:
		return "not-serving"
	}
	return fmt.Sprintf("ServingMode(%d)", int(m))
}

// ServingModeChangeArgs is what Options.ServingModeCallback is told. Calls
// for one server never overlap, come in the order of the changes, and run
// with no lock of the server held.
type ServingModeChangeArgs struct {
	// Mode is the new mode.
	Mode ServingMode
	// Err says why the address is not serving; nil when serving.
	Err error
}

// modeReport is one serving-mode change of a listener.
type modeReport struct {
	l    *listener
	mode ServingMode
	err  error
}

// reporter tells the mode changes in the order they happened, one at a
// time, with no lock held: they are queued under the listener's lock, in
// the critical section that made the change, and told by flush after it
// is released. A goroutine that finds another one telling leaves its
// reports to that one.
type reporter struct {
	s         *Server
	mu        sync.Mutex
	queue     []modeReport
	reporting bool
}

func (r *reporter) add(m modeReport) {
	r.mu.Lock()
	r.queue = append(r.queue, m)
	r.mu.Unlock()
}

func (r *reporter) flush() {
	r.mu.Lock()
	if r.reporting {
		r.mu.Unlock()
		return
	}
	r.reporting = true
	for len(r.queue) > 0 {
		m := r.queue[0]
		r.queue[0] = modeReport{}
		r.queue = r.queue[1:]
		r.mu.Unlock()
		r.s.tell(m)
		r.mu.Lock()
	}
	r.reporting = false
	r.mu.Unlock()
}

// tell gives m to the callback, or without one to the log: a server that
// does not serve must not be silent, or its operator only sees its
// clients' connections reset.
func (s *Server) tell(m modeReport) {
	addr := m.l.raw.Addr()
	if cb := s.opts.ServingModeCallback; cb != nil {
		cb(addr, ServingModeChangeArgs{Mode: m.mode, Err: m.err})
		return
	}
	args := []any{"address", addr.String(), "listener", m.l.name}
	if m.mode == ServingModeNotServing {
		s.warn("not serving: connections are closed at accept", append(args, "error", m.err)...)
		return
	}
	s.logger.Info("httpxds: serving", args...)
}
