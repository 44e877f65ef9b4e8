package xdsserver

import (
	"fmt"
	"net"
)

// ServingMode is whether a listening address serves RPCs.
type ServingMode int

// The serving modes of an address (gRFC A36).
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

// ServingModeChangeArgs is what a ServingModeCallback is told.
type ServingModeChangeArgs struct {
	// Mode is the new mode.
	Mode ServingMode
	// Err says why the address is not serving; nil when serving.
	Err error
}

// ServingModeCallbackFunc is told each change of an address's serving
// mode, and each new reason for not serving while it is not serving (as in
// grpc-go). Calls for one server never overlap, come in the order of the
// changes, and run with no lock of the server held, so the callback may
// call the server; it should return quickly, as the server's xDS updates
// may wait for it.
type ServingModeCallbackFunc func(addr net.Addr, args ServingModeChangeArgs)

// modeReport is one serving-mode change of a listener, for the
// ServingModeCallback or, without one, the server's log.
type modeReport struct {
	l    *listener
	mode ServingMode
	err  error
}

// queueReportLocked queues a mode change of l. It is called with l.mu
// held, in the critical section that made the change, so that the reports
// of a listener are queued in the order of its changes even when they come
// from different goroutines (the xDS client's callbacks, and the builds of
// certificate providers). flushReports tells them after l.mu is released.
func (s *GRPCServer) queueReportLocked(r modeReport) {
	s.reportMu.Lock()
	s.reports = append(s.reports, r)
	s.reportMu.Unlock()
}

// flushReports tells the queued reports in order, one at a time, with no
// lock held. A goroutine that finds another one telling leaves its reports
// to that one: reports never overlap, and no caller waits for another's.
func (s *GRPCServer) flushReports() {
	s.reportMu.Lock()
	if s.reporting {
		s.reportMu.Unlock()
		return
	}
	s.reporting = true
	for len(s.reports) > 0 {
		r := s.reports[0]
		s.reports[0] = modeReport{}
		s.reports = s.reports[1:]
		s.reportMu.Unlock()
		s.tell(r)
		s.reportMu.Lock()
	}
	s.reporting = false
	s.reportMu.Unlock()
}

// tell gives r to the ServingModeCallback, or without one to the log, as
// grpc-go does: a server that does not serve must not be silent, or its
// operator only sees its clients' connections reset.
func (s *GRPCServer) tell(r modeReport) {
	if s.opts.modeCallback != nil {
		s.opts.modeCallback(r.l.raw.Addr(), ServingModeChangeArgs{Mode: r.mode, Err: r.err})
		return
	}
	l := r.l
	args := []any{"address", l.raw.Addr().String(), "listener", l.name}
	switch r.mode {
	case ServingModeNotServing:
		reason := fmt.Sprint(r.err)
		if l.logged == ServingModeNotServing && l.loggedReason == reason {
			return // said already: the same reason told again is no news to the log
		}
		l.loggedReason = reason
		s.logger.Warn("xdsserver: not serving: connections are closed at accept", append(args, "error", r.err)...)
	case ServingModeServing:
		if l.logged == ServingModeNotServing {
			// At the level of the warning it ends, so that a default log
			// shows the end too.
			s.logger.Warn("xdsserver: serving again", args...)
		} else {
			s.logger.Info("xdsserver: serving", args...)
		}
	}
	l.logged = r.mode
}

// warn logs a warning as a structured record, so that operators can filter
// on the Listener's name rather than parse a message.
func (s *GRPCServer) warn(msg string, args ...any) {
	s.logger.Warn("xdsserver: "+msg, args...)
}
