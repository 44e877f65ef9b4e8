package httpxds

import "github.com/goxds/xds/internal/serverlds"

// ServingMode is whether a listening address serves requests (gRFC A36's
// serving modes, as package xdsserver has them for gRPC).
type ServingMode int

// The serving modes of an address.
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

// ServingModeChangeArgs is what Options.ServingModeCallback is told. Calls
// for one server never overlap, come in the order of the changes, and run
// with no lock of the server held.
type ServingModeChangeArgs struct {
	// Mode is the new mode.
	Mode ServingMode
	// Err says why the address is not serving; nil when serving.
	Err error
}

// tell gives r to the callback, or without one to the log
// (serverlds.Report.Log).
func (s *Server) tell(r serverlds.Report) {
	if cb := s.opts.ServingModeCallback; cb != nil {
		cb(r.Addr, ServingModeChangeArgs{Mode: ServingMode(r.Mode), Err: r.Err})
		return
	}
	r.Log(s.logger, "httpxds: ")
}
