package extproc

import "context"

// The messages of an RPC: in GRPC body mode they go to the processor and
// the data plane gets the processor's (deliverLocked); otherwise they go
// straight on. Either way the data plane reads them from the call's
// queues, one per direction.

// push queues o, one of the RPC's own, for the data plane, unless the
// call is over. A message waits for room, which pushes back on the data
// plane's reads; an end does not (there is one).
func (c *Call) push(out *msgQueue, o outMsg) {
	out.put(c.ctx.Done(), o, !o.end)
}

// message sends a message (or, with end, the half-close) to the
// processor when its body mode says so, or on to the data plane.
func (c *Call) message(k Kind, out *msgQueue, msg []byte, end bool) error {
	c.mu.Lock()
	wait := c.drained
	draining := c.draining
	discard := k == RequestBody && c.reqEnded && !c.passthrough
	c.mu.Unlock()
	if draining {
		// Reading from the data plane stops until the drain ends.
		select {
		case <-wait:
		case <-c.ctx.Done():
		}
	}
	if discard {
		return nil // the processor ended the client's messages already
	}
	mode := c.p.cfg.Modes.RequestBody
	if k == ResponseBody {
		mode = c.p.cfg.Modes.ResponseBody
	}
	if mode {
		req := &Request{Kind: k, Body: msg, EndOfStream: end, EndOfStreamWithoutMessage: end}
		if !end && !c.observe() {
			// Flow control: the message waits for its window, and the data
			// plane's next read for the message (a half-close carries no
			// body, and spends none).
			c.acquire(dirOf(k), len(msg))
		}
		if c.send(req) && !c.observe() {
			return nil
		}
		if _, err := c.settled(nil); err != nil {
			return err
		}
	}
	c.push(out, outMsg{data: msg, end: end})
	return nil
}

// ClientMessage hands one serialized client message to the filter.
func (c *Call) ClientMessage(msg []byte) error {
	return c.message(RequestBody, c.clientOut, msg, false)
}

// ClientHalfClose hands the client's half-close to the filter. It
// continues (for grpc.*_ext_proc.client_half_close_duration) when
// NextClientMessage reports it.
func (c *Call) ClientHalfClose() error {
	c.seeHalfClose()
	return c.message(RequestBody, c.clientOut, nil, true)
}

// ServerMessage hands one serialized server message to the filter.
func (c *Call) ServerMessage(msg []byte) error {
	return c.message(ResponseBody, c.serverOut, msg, false)
}

// EndServerMessages tells the call the server's messages are over with
// no trailers event to follow (a Trailers-Only response, which
// ServerHeaders told the processor): NextServerMessage reports the end
// after the last one.
func (c *Call) EndServerMessages() { c.push(c.serverOut, outMsg{end: true}) }

// next waits for the next message for the data plane: ok false with a
// nil error is the end of the messages. Coming back for a message
// releases the window of the one taken before (its write is done).
func (c *Call) next(ctx context.Context, out *msgQueue) ([]byte, bool, error) {
	c.release(out.dir)
	for c.ctx.Err() == nil {
		if o, ok := out.take(); ok {
			c.hold(out.dir, o.credit)
			if o.end {
				if out.dir == dirClient {
					c.halfCloseGoesOn()
				}
				return nil, false, nil
			}
			return o.data, true, nil
		}
		select {
		case <-out.ready:
		case <-c.ctx.Done():
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	_, err := c.settled(nil)
	if err == nil {
		err = &Status{Code: codeInternal, Message: "ext_proc: call ended"}
	}
	return nil, false, err
}

// NextClientMessage returns the next message to send to the server; ok
// false with a nil error: half-close.
func (c *Call) NextClientMessage(ctx context.Context) (msg []byte, ok bool, err error) {
	return c.next(ctx, c.clientOut)
}

// NextServerMessage returns the next message for the client
// application; ok false with a nil error: no more (trailers follow).
func (c *Call) NextServerMessage(ctx context.Context) (msg []byte, ok bool, err error) {
	return c.next(ctx, c.serverOut)
}
