package serverlds

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
)

// Mode is whether a listening address serves (gRFC A36's serving modes).
// Each server's public ServingMode has these values, in this order.
type Mode int

// The serving modes of an address.
const (
	// Starting: the Listener has not arrived yet.
	Starting Mode = iota
	// Serving: the Listener, and every route configuration it names, is
	// held.
	Serving
	// NotServing: the Listener does not exist, or was rejected and
	// nothing good is held.
	NotServing
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case Starting:
		return "starting"
	case Serving:
		return "serving"
	case NotServing:
		return "not-serving"
	}
	return fmt.Sprintf("ServingMode(%d)", int(m))
}

// Report is one serving-mode change of a listening address, or a new
// reason for not serving while it is not serving.
type Report struct {
	// Addr is the listening address.
	Addr net.Addr
	// Name is its Listener resource's name.
	Name string
	// Mode is the new mode.
	Mode Mode
	// Err says why the address is not serving; nil when serving.
	Err error

	// said is what the log was last told of this address (Log); nil in
	// a Report not made by a Listener, which Log then tells in full.
	said *said
}

// said is the last mode logged of one address, and its reason.
type said struct {
	mode   Mode
	reason string
}

// Log writes r to logger, for a server that has no serving-mode callback:
// a server that does not serve must not be silent, or its operator only
// sees its clients' connections reset. Not serving is a warning with its
// reason (one told again is no news to the log, and is left out), and so
// is serving again after it, so that a log showing the warnings shows the
// end too. prefix names the server's package ("httpxds: ").
func (r Report) Log(logger *slog.Logger, prefix string) {
	if r.said == nil {
		r.said = new(said)
	}
	args := []any{"address", r.Addr.String(), "listener", r.Name}
	switch r.Mode {
	case NotServing:
		reason := fmt.Sprint(r.Err)
		if r.said.mode == NotServing && r.said.reason == reason {
			return
		}
		r.said.reason = reason
		logger.Warn(prefix+"not serving: connections are closed at accept", append(args, "error", r.Err)...)
	case Serving:
		if r.said.mode == NotServing {
			logger.Warn(prefix+"serving again", args...)
		} else {
			logger.Info(prefix+"serving", args...)
		}
	}
	r.said.mode = r.Mode
}

// Reporter tells a server's serving-mode changes in the order they
// happened, one at a time, with no lock held: a Listener queues them under
// its lock, in the critical section that made the change (so that the
// reports of one address keep their order even when they come from
// different goroutines), and tells them once the lock is released. A
// goroutine that finds another one telling leaves its reports to that
// one: reports never overlap, and no caller waits for another's.
type Reporter struct {
	tell func(Report)

	// mu is taken after a Listener's, never before.
	mu        sync.Mutex
	queue     []Report
	reporting bool // a goroutine is telling them
}

// NewReporter returns a Reporter that gives each report to tell.
func NewReporter(tell func(Report)) *Reporter {
	return &Reporter{tell: tell}
}

func (r *Reporter) add(m Report) {
	r.mu.Lock()
	r.queue = append(r.queue, m)
	r.mu.Unlock()
}

func (r *Reporter) flush() {
	r.mu.Lock()
	if r.reporting {
		r.mu.Unlock()
		return
	}
	r.reporting = true
	for len(r.queue) > 0 {
		m := r.queue[0]
		r.queue[0] = Report{}
		r.queue = r.queue[1:]
		r.mu.Unlock()
		r.tell(m)
		r.mu.Lock()
	}
	r.reporting = false
	r.mu.Unlock()
}
