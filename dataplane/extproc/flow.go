package extproc

import (
	"fmt"
	"math"
)

// The ext_proc protocol's flow control (gRFC A93, "Flow Control"): each
// of the four paths of message bodies through the processor has a window
// its sender spends and its receiver returns, so that one path's push-back
// does not hold up another (the processor's stream carries both of its
// directions' messages back, and a full queue of one would stop the other).
//
//   - The windows of the bodies the filter sends (client messages,
//     downstream to sidestream; server messages, upstream to sidestream):
//     a message waits while its window is not positive, then spends its
//     size (GRPC body mode: one whole message may take the window below
//     zero). ClientMessage and ServerMessage return only once the message
//     is sent, so the data plane reads no further meanwhile: the push-back
//     reaches the sender of the RPC.
//   - The windows of the bodies the processor sends back (sidestream to
//     upstream and to downstream): a message that arrives while its
//     window, as the filter counts it, is not positive cancels the stream
//     as a failure. Its bytes are returned (client_window_update) once the
//     data plane has taken it and come back for the next, its write done;
//     they go with the next message the filter sends, or on their own once
//     half a window has gathered.
//
// Compatibility: a processor that never sends a window update (every one
// before the protocol had flow control) does not know of it, and nothing
// holds it to a window: the filter counts, but neither waits on a send
// window nor refuses a message, returns no window, and queues the
// processor's messages a few at a time as it always did, pushing back on
// its stream. The first server_window_update (the protocol asks a
// processor that does flow control to send one at once, if only with
// zeros) turns it on for the rest of the stream. In observability mode
// there is none: the processor's stream is never read for it, and HTTP/2's
// own flow control pushes back (gRFC A93).

// InitialWindow is each of the four windows the filter announces in
// flow_control_init, in bytes: gRFC A93's "good default", grpc-go's, and
// the top of the 32K to 64K range the protocol's comments expect. A
// processor that wants less sends a negative window update.
const InitialWindow int64 = 64 << 10

// The directions a Call's flow state is kept for.
const (
	dirClient = iota // the client's messages
	dirServer        // the server's messages
)

// flow is a Call's flow control state, guarded by the Call's mu.
type flow struct {
	// active: the processor sent a window update, so it does flow control.
	active bool
	// send are the windows for the bodies the filter sends the processor.
	send [2]int64
	// recv are the processor's windows for the bodies it sends back, as
	// the filter counts them: what it announced and returned, less what
	// came.
	recv [2]int64
	// pending is window released by the data plane and not yet returned.
	pending [2]int64
	// held is the size of the message the data plane took last, released
	// when it comes back for the next.
	held [2]int64
	// grown is closed, and replaced, when a send window grows.
	grown chan struct{}
}

func newFlow() flow {
	return flow{send: [2]int64{InitialWindow, InitialWindow}, recv: [2]int64{InitialWindow, InitialWindow},
		grown: make(chan struct{})}
}

// flowInit is the flow_control_init the stream's first message carries.
func flowInit() *FlowControlInit {
	return &FlowControlInit{DownstreamToSidestream: InitialWindow, SidestreamToUpstream: InitialWindow,
		UpstreamToSidestream: InitialWindow, SidestreamToDownstream: InitialWindow}
}

// acquire waits until the window of d's messages to the processor is
// positive (or flow control is off, or the stream or call is over), and
// spends n bytes of it.
func (c *Call) acquire(d int, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.flow.active && c.flow.send[d] <= 0 && !c.passthrough && c.failed == nil && c.ctx.Err() == nil {
		grown := c.flow.grown
		c.mu.Unlock()
		select {
		case <-grown:
		case <-c.sctx.Done():
		case <-c.ctx.Done():
		}
		c.mu.Lock()
	}
	c.flow.send[d] -= int64(n)
}

// grantLocked applies a server_window_update; with c.mu held.
func (c *Call) grantLocked(u *ServerWindowUpdate) error {
	if u == nil {
		return nil
	}
	c.flow.active = true
	for d, inc := range [2]int64{u.DownstreamToSidestream, u.UpstreamToSidestream} {
		w, ok := addWindow(c.flow.send[d], inc)
		if !ok {
			return fmt.Errorf("server_window_update of %d takes the window of %s past the limits of int64", inc, dirName(d))
		}
		c.flow.send[d] = w
	}
	close(c.flow.grown)
	c.flow.grown = make(chan struct{})
	return nil
}

// addWindow is w+inc, and false when that overflows.
func addWindow(w, inc int64) (int64, bool) {
	if (inc > 0 && w > math.MaxInt64-inc) || (inc < 0 && w < math.MinInt64-inc) {
		return 0, false
	}
	return w + inc, true
}

func dirName(d int) string {
	if d == dirClient {
		return "the client's messages"
	}
	return "the server's messages"
}

// receivedLocked counts a body the processor sent for the data plane
// (k, its kind); with flow control on, one that came with its window
// spent is an error. With c.mu held.
func (c *Call) receivedLocked(k Kind, b *Body) error {
	if b.EndOfStream && b.EndOfStreamWithoutMessage {
		return nil // no message: nothing to count
	}
	d := dirOf(k)
	if c.flow.active && c.flow.recv[d] <= 0 {
		return fmt.Errorf("%v message of %d bytes with the processor's window at %d: it overran flow control", k, len(b.Data), c.flow.recv[d])
	}
	c.flow.recv[d] -= int64(len(b.Data))
	return nil
}

func dirOf(k Kind) int {
	if k == RequestBody || k == RequestHeaders {
		return dirClient
	}
	return dirServer
}

// release returns to the processor's window the message of direction d
// the data plane took last, now that it came back for the next (its write
// is done), whether or not another is there: a processor whose window
// that message took below zero sends no more until it has it back. The
// window goes back at once when half a window has gathered; the
// processor then still has more than half of its window, so it never
// waits on what the filter keeps.
func (c *Call) release(d int) {
	c.mu.Lock()
	c.flow.pending[d] += c.flow.held[d]
	c.flow.held[d] = 0
	send := c.flow.active && c.flow.pending[d] >= InitialWindow/2
	c.mu.Unlock()
	if send {
		c.returnWindow()
	}
}

// hold keeps the size n of the message of direction d the data plane
// takes, until it comes back for the next.
func (c *Call) hold(d int, n int64) {
	c.mu.Lock()
	c.flow.held[d] = n
	c.mu.Unlock()
}

// takeUpdateLocked is the window to return with the next message, if
// any, counted as returned. With c.mu held.
func (c *Call) takeUpdateLocked() *ClientWindowUpdate {
	p := c.flow.pending
	if !c.flow.active || (p[dirClient] == 0 && p[dirServer] == 0) {
		return nil
	}
	c.flow.pending = [2]int64{}
	for d := range p {
		// The window cannot overflow: it never exceeds InitialWindow plus
		// what the data plane holds, all of it bytes that came.
		c.flow.recv[d] += p[d]
	}
	return &ClientWindowUpdate{SidestreamToUpstream: p[dirClient], SidestreamToDownstream: p[dirServer]}
}

// returnWindow sends the window the data plane released, in a message of
// its own (a message with no event, which the protocol allows once the
// processor has shown it does flow control).
func (c *Call) returnWindow() {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.mu.Lock()
	s := c.stream
	if s == nil || c.passthrough || c.failed != nil || c.draining || c.ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	u := c.takeUpdateLocked()
	c.mu.Unlock()
	if u == nil {
		return
	}
	if err := s.Send(&Request{WindowUpdate: u}); err != nil {
		c.fail(fmt.Errorf("send client_window_update: %w", err))
	}
}
