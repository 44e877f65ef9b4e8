package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/goxds/xds/resources"
)

// outDepth is how many messages from the processor (or passed through)
// wait for the data plane in each direction before the processor's
// stream, or the sender, is pushed back.
const outDepth = 8

// Processor runs one external processing filter configuration (its
// overrides already applied, resources.ExtProcOf) for the RPCs it is
// given.
type Processor struct {
	owner  context.Context
	cfg    *resources.ExtProcConfig
	client Client
	// afterFunc runs f after d; time.AfterFunc unless a test injects a
	// fake clock. It delays the close of observability-mode streams.
	afterFunc func(d time.Duration, f func()) (stop func() bool)
	// metrics hears the events' times (metrics.go); nil: none. now is
	// the clock they are read from; nil: time.Now.
	metrics Metrics
	now     func() time.Time
}

// New returns a Processor for cfg whose streams client opens. owner is
// the life of the adapter that runs it (a channel, a server): when it
// ends, every stream ends, a deferred close included.
func New(owner context.Context, cfg *resources.ExtProcConfig, client Client) *Processor {
	return &Processor{owner: owner, cfg: cfg, client: client, afterFunc: func(d time.Duration, f func()) func() bool {
		return time.AfterFunc(d, f).Stop
	}}
}

// WithAfterFunc returns p with its timer function replaced (tests).
func (p *Processor) WithAfterFunc(f func(d time.Duration, fn func()) (stop func() bool)) *Processor {
	q := *p
	q.afterFunc = f
	return &q
}

type outMsg struct {
	data []byte
	end  bool
	// credit is the window the message took of the processor's (its
	// size, for one the processor sent), returned once it is written on.
	credit int64
}

// hdrResult is what a wait for a header answer gets.
type hdrResult struct {
	resp *Response // nil: pass the headers on unchanged
	err  error
}

// Call is the filter on one RPC. The adapter calls the client-side
// methods (ClientHeaders, ClientMessage, ClientHalfClose) from one
// goroutine and the server-side ones from another, reads the messages to
// forward with NextClientMessage and NextServerMessage, and calls Done
// when the RPC is over. An error returned is a *Status to fail the RPC
// with.
type Call struct {
	p *Processor
	// ctx ends with the call (Done) or its failure; sctx, under it, with
	// the stream, which may end first and let the RPC through.
	ctx, sctx       context.Context
	cancel, scancel context.CancelFunc
	callAttrs

	sendMu sync.Mutex // serializes Send, and the stream's opening
	first  bool       // the next Send is the stream's first

	mu          sync.Mutex
	stream      Stream
	passthrough bool  // the stream is over: events go on untouched
	failed      error // the RPC fails with this (*Status)
	sentBody    bool  // a body went to the processor (failure_mode_allow no longer applies)
	draining    bool
	drained     chan struct{} // closed when a drain ends
	awaited
	reqEnded bool                // the processor ended the client's messages
	trailers map[string][]string // the server's, while their answer is awaited
	done     bool

	flow   // the ext_proc protocol's flow control (flow.go)
	timing // the events' times in the filter, for metrics (metrics.go)

	clientOut, serverOut *msgQueue
}

// NewCall starts the filter on an RPC. attrs are the attributes the
// adapter knows of it (e.g. "request.path"); those the configuration
// names are sent. The stream gets ctx's values, not its cancellation: it
// ends with Done, or with the Processor's owner.
func (p *Processor) NewCall(ctx context.Context, attrs map[string]any) *Call {
	// Not the RPC's cancellation: an observability-mode stream outlives
	// the RPC (Done); the owner's, though.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(p.owner, cancel)
	sctx, scancel := context.WithCancel(ctx)
	return &Call{p: p, ctx: ctx, sctx: sctx, scancel: scancel, callAttrs: callAttrs{attrs: attrs}, first: true,
		cancel:    func() { stop(); cancel() },
		clientOut: newQueue(dirClient), serverOut: newQueue(dirServer), flow: newFlow()}
}

// callAttrs are the attributes a Call sends the processor, and whether
// each direction's have gone (with its first message); the flags are
// guarded by the Call's mu.
type callAttrs struct {
	attrs                    map[string]any
	reqAttrSent, rspAttrSent bool
}

// awaited are the header and trailer answers a Call waits for, and
// whether each was had; guarded by the Call's mu.
type awaited struct {
	waitReqHdr, waitRspHdr, waitTrl chan hdrResult
	reqHdrDone, rspHdrDone, trlDone bool
}

func (c *Call) observe() bool { return c.p.cfg.ObservabilityMode }

// attributes picks the configured names of c.attrs, once per direction.
func (c *Call) attributes(k Kind) map[string]any {
	names, sent := c.p.cfg.RequestAttributes, &c.reqAttrSent
	if k >= ResponseHeaders {
		names, sent = c.p.cfg.ResponseAttributes, &c.rspAttrSent
	}
	if *sent || len(names) == 0 {
		return nil
	}
	*sent = true
	out := make(map[string]any)
	for _, n := range names {
		if v, ok := c.attrs[n]; ok {
			out[n] = v
		}
	}
	return out
}

// send sends req on the stream, opening it first if need be. false: the
// stream is over (passthrough) or failed; the caller reads c's state.
func (c *Call) send(req *Request) bool {
	for {
		// A half-closed (draining) stream takes no event: it waits for the
		// drain's end and then goes on untouched. The wait is outside
		// sendMu, which the drain's CloseSend takes.
		c.mu.Lock()
		w := c.drained
		draining := c.draining
		c.mu.Unlock()
		if draining {
			select {
			case <-w:
			case <-c.ctx.Done():
			}
		}
		c.sendMu.Lock()
		c.mu.Lock()
		if !c.draining || c.ctx.Err() != nil {
			break
		}
		c.mu.Unlock()
		c.sendMu.Unlock()
	}
	defer c.sendMu.Unlock()
	if c.passthrough || c.failed != nil || c.ctx.Err() != nil {
		c.mu.Unlock()
		return false
	}
	req.Attributes = c.attributes(req.Kind)
	if req.Kind == RequestBody || req.Kind == ResponseBody {
		c.sentBody = true
	}
	s := c.stream
	c.mu.Unlock()
	req.ObservabilityMode = c.observe()
	if s == nil {
		var err error
		if s, err = c.p.client.Open(c.sctx); err != nil {
			c.fail(fmt.Errorf("open the processing stream: %w", err))
			return false
		}
		c.mu.Lock()
		c.stream = s
		c.mu.Unlock()
		go c.recvLoop(s)
	}
	if c.first {
		c.first = false
		m := c.p.cfg.Modes
		req.ProtocolConfig = &ProtocolConfig{RequestBodyGRPC: m.RequestBody, ResponseBodyGRPC: m.ResponseBody}
		if !c.observe() {
			req.FlowControl = flowInit()
		}
	}
	c.mu.Lock()
	req.WindowUpdate = c.takeUpdateLocked()
	c.mu.Unlock()
	if err := s.Send(req); err != nil {
		c.fail(fmt.Errorf("send %v: %w", req.Kind, err))
		return false
	}
	return true
}

// fail ends the stream on a failure: the RPC goes on untouched when
// failure_mode_allow allows (no body sent yet, or observability mode),
// else fails with INTERNAL. Every wait is released.
func (c *Call) fail(err error) {
	c.mu.Lock()
	if c.passthrough || c.failed != nil {
		c.mu.Unlock()
		return
	}
	if c.p.cfg.FailureModeAllow && (c.observe() || !c.sentBody) {
		c.passthrough = true
	} else {
		c.failed = &Status{Code: codeInternal, Message: "ext_proc: processing stream failed: " + err.Error()}
	}
	c.endLocked(hdrResult{err: c.failed})
}

// endLocked releases every wait with r and closes the stream; called with
// c.mu held, which it releases.
func (c *Call) endLocked(r hdrResult) {
	for _, w := range []*chan hdrResult{&c.waitReqHdr, &c.waitRspHdr, &c.waitTrl} {
		if *w != nil {
			*w <- r
			*w = nil
		}
	}
	if c.draining {
		c.draining = false
		close(c.drained)
	}
	s, failed := c.stream, c.failed != nil
	c.mu.Unlock()
	if s != nil {
		s.Close()
	}
	c.scancel()
	if failed {
		c.cancel() // the waits for messages return the failure
	}
}

// immediate ends the RPC with the processor's immediate response.
func (c *Call) immediate(im *Immediate, trailers map[string][]string) {
	c.mu.Lock()
	if c.passthrough || c.failed != nil {
		c.mu.Unlock()
		return
	}
	st := &Status{Code: im.Code, Message: im.Details}
	if trailers != nil {
		if t, err := c.mutate(trailers, im.SetHeaders, im.RemoveHeaders, "immediate_response.headers"); err == nil {
			st.Trailers = t
		} else {
			st.Trailers = trailers
		}
	}
	c.failed = st
	c.endLocked(hdrResult{err: st})
}

func (c *Call) recvLoop(s Stream) {
	for {
		resp, err := s.Recv()
		if err != nil {
			c.ended(err)
			return
		}
		if c.observe() {
			continue // the processor cannot change the RPC
		}
		if err := c.handle(resp); err != nil {
			c.fail(err)
			return
		}
	}
}

// ended handles the stream's end: OK after a drain, or with nothing
// left that needed a drain (no body mode, or observability mode), lets
// the rest of the RPC through; otherwise it is a failure (gRFC A93).
func (c *Call) ended(err error) {
	if !errors.Is(err, io.EOF) {
		c.fail(err)
		return
	}
	m := c.p.cfg.Modes
	c.mu.Lock()
	ok := c.draining || c.observe() || (!m.RequestBody && !m.ResponseBody)
	if !ok {
		c.mu.Unlock()
		c.fail(errors.New("the processor ended the stream without draining it"))
		return
	}
	if c.passthrough || c.failed != nil {
		c.mu.Unlock()
		return
	}
	c.passthrough = true
	c.endLocked(hdrResult{})
}

// handle checks one answer against what was sent (gRFC A93: answers come
// in the order of the events, and only for events sent) and acts on it.
func (c *Call) handle(r *Response) error {
	if r.Replace {
		return fmt.Errorf("%v answer with status CONTINUE_AND_REPLACE, which gRPC does not support", r.Kind)
	}
	if im := r.Immediate; im != nil {
		if c.p.cfg.DisableImmediateResponse {
			return errors.New("immediate_response, which disable_immediate_response refuses")
		}
		c.mu.Lock()
		var trailers map[string][]string
		if c.waitTrl != nil {
			trailers = c.trailers
		}
		c.mu.Unlock()
		c.immediate(im, trailers)
		return nil
	}
	m := c.p.cfg.Modes
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.grantLocked(r.WindowUpdate); err != nil {
		return err
	}
	if r.RequestDrain && !c.draining {
		// Half-close the stream; the processor echoes what it has and
		// ends it with OK, and the RPC then goes on untouched.
		c.draining, c.drained = true, make(chan struct{})
		s := c.stream
		go func() {
			c.sendMu.Lock()
			defer c.sendMu.Unlock()
			_ = s.CloseSend()
		}()
	}
	var w *chan hdrResult
	switch r.Kind {
	case RequestHeaders:
		w = &c.waitReqHdr
	case ResponseHeaders:
		w = &c.waitRspHdr
	case ResponseTrailers:
		w = &c.waitTrl
	case RequestBody:
		if !m.RequestBody || (m.RequestHeaders && !c.reqHdrDone) || c.reqEnded || r.Body == nil {
			return errors.New("unexpected request_body answer")
		}
		if err := c.receivedLocked(r.Kind, r.Body); err != nil {
			return err
		}
		return c.deliverLocked(c.clientOut, r.Body, true)
	case ResponseBody:
		if !m.ResponseBody || (m.ResponseHeaders && !c.rspHdrDone) || c.trlDone || r.Body == nil {
			return errors.New("unexpected response_body answer")
		}
		if r.Body.EndOfStream {
			return errors.New("response_body answer with end_of_stream")
		}
		if err := c.receivedLocked(r.Kind, r.Body); err != nil {
			return err
		}
		return c.deliverLocked(c.serverOut, r.Body, false)
	default:
		if !r.RequestDrain && r.WindowUpdate == nil {
			return errors.New("answer with no event set")
		}
		return nil
	}
	if w != nil {
		if *w == nil {
			return fmt.Errorf("%v answer to no %v event sent", r.Kind, r.Kind)
		}
		*w <- hdrResult{resp: r}
		*w = nil
		switch r.Kind {
		case RequestHeaders:
			c.reqHdrDone = true
		case ResponseHeaders:
			c.rspHdrDone = true
		case ResponseTrailers:
			c.trlDone = true
		}
	}
	return nil
}

// deliverLocked queues a body for the data plane. With c.mu held; it is
// released while the queue is full, which pushes back on the processor
// when it does no flow control (msgQueue).
func (c *Call) deliverLocked(out *msgQueue, b *Body, request bool) error {
	if b.Compressed {
		return errors.New("body answer with grpc_message_compressed")
	}
	msgs := []outMsg{}
	if !(b.EndOfStream && b.EndOfStreamWithoutMessage) {
		msgs = append(msgs, outMsg{data: b.Data, credit: int64(len(b.Data))})
	}
	if request && b.EndOfStream {
		c.reqEnded = true
		msgs = append(msgs, outMsg{end: true})
	}
	bounded := !c.flow.active
	c.mu.Unlock()
	defer c.mu.Lock()
	for _, o := range msgs {
		if !out.put(c.ctx.Done(), o, bounded) {
			return nil
		}
	}
	return nil
}

// headers sends a header event and, unless in observability mode, waits
// for its answer and applies it.
func (c *Call) headers(k Kind, w *chan hdrResult, h map[string][]string, eos bool) (map[string][]string, error) {
	ch := make(chan hdrResult, 1)
	c.mu.Lock()
	if !c.observe() && c.failed == nil && !c.passthrough {
		*w = ch
	}
	c.mu.Unlock()
	if !c.send(&Request{Kind: k, Headers: c.forwarded(h), EndOfStream: eos}) {
		return c.settled(h)
	}
	if c.observe() {
		return h, nil
	}
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	if r.resp == nil {
		return h, nil
	}
	out, err := c.mutate(h, r.resp.SetHeaders, r.resp.RemoveHeaders, k.String()+".response.header_mutation")
	if err != nil {
		c.fail(err)
		return c.settled(h)
	}
	return out, nil
}

// settled is what an event gets once the stream is over: through
// unchanged, or the RPC's failure.
func (c *Call) settled(h map[string][]string) (map[string][]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return nil, c.failed
	}
	return h, nil
}

// ClientHeaders runs the client's headers through the processor (when
// request_header_mode sends them) and returns those to send on.
func (c *Call) ClientHeaders(h map[string][]string) (out map[string][]string, err error) {
	measured := c.since(ClientHeadersEvent, false)
	defer func() { measured(err) }()
	if !c.p.cfg.Modes.RequestHeaders {
		return c.settled(h)
	}
	return c.headers(RequestHeaders, &c.waitReqHdr, h, false)
}

// ServerHeaders runs the server's headers through the processor;
// trailersOnly marks a Trailers-Only response (end_of_stream), after
// which there is no trailers event and no server message.
func (c *Call) ServerHeaders(h map[string][]string, trailersOnly bool) (out map[string][]string, err error) {
	measured := c.since(ServerHeadersEvent, trailersOnly)
	defer func() { measured(err) }()
	if !c.p.cfg.Modes.ResponseHeaders {
		return c.settled(h)
	}
	return c.headers(ResponseHeaders, &c.waitRspHdr, h, trailersOnly)
}

// ServerTrailers runs the server's trailers through the processor. Once
// it returns, NextServerMessage reports the end of the server's messages
// after the last one.
func (c *Call) ServerTrailers(t map[string][]string) (out map[string][]string, err error) {
	measured := c.since(ServerTrailersEvent, false)
	defer func() { measured(err) }()
	defer c.push(c.serverOut, outMsg{end: true})
	if !c.p.cfg.Modes.ResponseTrailers {
		return c.settled(t)
	}
	c.mu.Lock()
	c.trailers = t
	c.mu.Unlock()
	return c.headers(ResponseTrailers, &c.waitTrl, t, false)
}

// Done ends the filter's work on the RPC: its stream is closed, at once
// or, in observability mode, after deferred_close_timeout so that the
// processor can read what was sent. Done returns at once.
func (c *Call) Done() {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.done = true
	s := c.stream
	c.mu.Unlock()
	if s == nil || !c.observe() {
		c.closeStream()
		return
	}
	c.sendMu.Lock()
	_ = s.CloseSend()
	c.sendMu.Unlock()
	c.p.afterFunc(c.p.cfg.DeferredClose, c.closeStream)
}

// Context is done when the filter's work on the RPC is over: the filter
// failed the RPC (Err says with what), Done was called, or the
// Processor's owner ended. An adapter stops the RPC's handler on it when
// Err is not nil: an immediate response, or a failed stream, ends the RPC
// at once (gRFC A93).
func (c *Call) Context() context.Context { return c.ctx }

// Err is the *Status the filter fails the RPC with, or nil.
func (c *Call) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

func (c *Call) closeStream() {
	c.mu.Lock()
	s := c.stream
	c.mu.Unlock()
	if s != nil {
		s.Close()
	}
	c.cancel()
}
