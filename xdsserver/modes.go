package xdsserver

import (
	"net"

	"github.com/goxds/xds/internal/serverlds"
)

// ServingMode is whether a listening address serves RPCs.
type ServingMode int

// The serving modes of an address (gRFC A36).
const (
	// ServingModeStarting: the address's Listener has not arrived yet;
	// connections are accepted and closed.
	ServingModeStarting = ServingMode(serverlds.Starting)
	// ServingModeServing: the Listener (and every route configuration it
	// names) is held; connections are served.
	ServingModeServing = ServingMode(serverlds.Serving)
	// ServingModeNotServing: the Listener does not exist, or was rejected
	// and nothing good is held; connections are accepted and closed, and
	// those already open are drained.
	ServingModeNotServing = ServingMode(serverlds.NotServing)
)

// String names the mode.
func (m ServingMode) String() string { return serverlds.Mode(m).String() }

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

// tell gives r to the ServingModeCallback, or without one to the log
// (serverlds.Report.Log), as grpc-go does.
func (s *GRPCServer) tell(r serverlds.Report) {
	if cb := s.opts.modeCallback; cb != nil {
		cb(r.Addr, ServingModeChangeArgs{Mode: ServingMode(r.Mode), Err: r.Err})
		return
	}
	r.Log(s.logger, "xdsserver: ")
}

// warn logs a warning as a structured record, so that operators can filter
// on the Listener's name rather than parse a message.
func (s *GRPCServer) warn(msg string, args ...any) {
	s.logger.Warn("xdsserver: "+msg, args...)
}
