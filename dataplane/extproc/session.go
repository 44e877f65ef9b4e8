package extproc

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/goxds/xds/resources"
)

// A Session is the sequencing of one filter's Call on a streaming RPC,
// which a client and a server binding both need: the response's headers
// run through the processor once, before the first response message or
// at the end (then as a Trailers-Only response, headers with
// end_of_stream and no trailers event); in each direction the messages
// the application hands over go to the processor while a pump writes its
// answers on toward the peer, and the messages the application reads
// come from the processor while a pump feeds it the peer's; the RPC's
// end goes to the processor as trailers with grpc-status and
// grpc-message; and a failure of the filter (its processor's status, or
// a message the binding cannot take) overrides the RPC's status.
//
// The binding gives the session its peer, the stream toward the other
// side (the next filter's, or the transport's), in the RPC's messages,
// protocol buffers: the GRPC body mode sends them serialized. Errors the
// session returns are the peer's as they are, or a *Status, which the
// binding turns into its transport's status.

// Peer is the RPC's stream toward the other side, as its binding gives
// it. One goroutine may send while another receives.
type Peer interface {
	SendMsg(m any) error
	// RecvMsg reads the next message into m; io.EOF at the peer's OK end
	// of its messages (a server: the client's half-close).
	RecvMsg(m any) error
}

// ClientPeer is a client's stream toward the server.
type ClientPeer interface {
	Peer
	// Header waits for the server's headers; nil when the RPC ended
	// without any (Trailers-Only, or no server reached), with the RPC's
	// error, if any.
	Header() (map[string][]string, error)
	// Trailer is the server's trailers, once the RPC ended.
	Trailer() map[string][]string
	CloseSend() error
}

// ServerPeer is a server's stream toward the client: the response
// headers and trailers set on it go with the response.
type ServerPeer interface {
	Peer
	SetHeader(h map[string][]string) error
	SendHeader(h map[string][]string) error
	SetTrailer(t map[string][]string)
}

// SessionOptions are what a binding gives a Session.
type SessionOptions struct {
	// Client or Server, exactly one, is the peer; which one says the
	// session's side.
	Client ClientPeer
	Server ServerPeer
	// Ctx is the RPC's context: the session's waits end with it.
	Ctx context.Context
	// Fail ends the RPC at once; the session calls it when the filter
	// fails the RPC (gRFC A93: an out-of-band cancellation). It may be
	// called more than once.
	Fail func()
	// Single says the direction the application reads carries exactly
	// one message: a client's RPC whose server does not stream, or a
	// server's unary request.
	Single bool
	// Code is an RPC error's status code and message, for the trailers
	// the processor sees (nil and io.EOF are OK; a *Status is read
	// without it).
	Code func(err error) (code uint32, message string)
	// Prefix starts the session's own error texts, naming the side
	// ("goxds: ext_proc").
	Prefix string
}

// Session is one filter's Call on one RPC, driven by its binding.
type Session struct {
	call    *Call
	modes   resources.ExtProcModes
	o       SessionOptions
	peer    Peer
	ctx     context.Context // o.Ctx, cancelled by Close: the pumps' waits
	cancel  context.CancelFunc
	unwatch func() bool // the watch of the call's failure

	h       respHeaders
	endOnce sync.Once
	endErr  error

	w, r pump

	mu        sync.Mutex
	failed    error               // the binding's failure of the RPC (a *Status)
	held      map[string][]string // server: the handler's headers, until taken
	heldTrl   map[string][]string // server: the handler's trailers
	hdrTaken  bool                // server: SetHeader is too late
	trailer   map[string][]string // the trailers as the filter left them, once ended
	ended     bool
	failTrlOK bool // server: the failure's trailers were set
}

// respHeaders are the response's headers as the processor left them,
// settled once.
type respHeaders struct {
	once  sync.Once
	ready chan struct{} // closed when settled
	seen  bool          // the response had headers (not Trailers-Only); set in once
	md    map[string][]string
	err   error
}

// pump is one direction's goroutine: started once, its end waited for.
type pump struct {
	once   sync.Once
	done   chan struct{}
	ctx    context.Context // the reader's: cancelled with its failure as the cause
	cancel context.CancelCauseFunc
}

// Session starts the session of c on one RPC.
func (c *Call) Session(o SessionOptions) *Session {
	s := &Session{call: c, modes: c.p.cfg.Modes, o: o, h: respHeaders{ready: make(chan struct{})}}
	if o.Client != nil {
		s.peer = o.Client
	} else {
		s.peer = o.Server
	}
	s.ctx, s.cancel = context.WithCancel(o.Ctx)
	s.w.done, s.r.done = make(chan struct{}), make(chan struct{})
	s.r.ctx, s.r.cancel = context.WithCancelCause(s.ctx)
	// The filter failing the RPC (an immediate response, a failed stream)
	// ends it at once (gRFC A93).
	s.unwatch = context.AfterFunc(c.Context(), func() {
		if c.Err() != nil {
			o.Fail()
		}
	})
	return s
}

func (s *Session) client() bool { return s.o.Client != nil }

// fail fails the RPC with err, the binding's side of the filter, unless
// it failed already. The application's read waiting for the processor
// returns it at once; the writer reads on, so that the processor is not
// held up.
func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	s.r.cancel(err)
	s.o.Fail()
}

// internal is an INTERNAL *Status with the session's prefix.
func (s *Session) internal(msg string) error {
	return &Status{Code: codeInternal, Message: s.o.Prefix + ": " + msg}
}

// Failure is the status the filter fails the RPC with (its processor's,
// or the binding's own: a message it cannot take), with the trailers it
// gives, less the status; nil when it did not fail it.
func (s *Session) Failure() (error, map[string][]string) {
	if err := s.call.Err(); err != nil {
		var st *Status
		if errors.As(err, &st) && st.Trailers != nil {
			return err, stripStatus(st.Trailers)
		}
		return err, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed, nil
}

// failure is Failure's status; a server sets its trailers, once.
func (s *Session) failure() error {
	err, t := s.Failure()
	if err == nil || t == nil || s.client() {
		return err
	}
	s.mu.Lock()
	first := !s.failTrlOK
	s.failTrlOK = true
	s.mu.Unlock()
	if first && len(t) > 0 {
		s.o.Server.SetTrailer(t)
	}
	return err
}

// failureOr is failure, or err when the filter did not fail the RPC.
func (s *Session) failureOr(err error) error {
	if f := s.failure(); f != nil {
		return f
	}
	return err
}

// headers runs the response's headers through the processor, once: a
// client's from its peer, a server's those held, then sent on (send) or
// set to go with the first message.
func (s *Session) headers(send bool) error {
	s.h.once.Do(func() {
		defer close(s.h.ready)
		var h map[string][]string
		if s.client() {
			if h, s.h.err = s.o.Client.Header(); h == nil {
				return
			}
			s.h.err = nil
		} else {
			s.mu.Lock()
			s.hdrTaken, h = true, s.held
			s.mu.Unlock()
		}
		s.h.seen = true
		if s.modes.ResponseHeaders {
			out, err := s.call.ServerHeaders(h, false)
			if err != nil {
				s.h.err = err
				return
			}
			h = out
		}
		s.h.md = h
		switch {
		case s.client():
		case send:
			s.h.err = s.o.Server.SendHeader(h)
		default:
			s.h.err = s.o.Server.SetHeader(h)
		}
	})
	return s.h.err
}

// Header is, on a client, the server's headers as the processor left
// them (nil: none came).
func (s *Session) Header() (map[string][]string, error) {
	err := s.headers(false)
	return s.h.md, err
}

// TakeHeader runs the response headers through the processor now: a
// client's as Header does, a server's set to go with the response (a
// unary handler's, which has returned it).
func (s *Session) TakeHeader() error { return s.headers(false) }

// SetHeader holds a server's response headers for the processor.
func (s *Session) SetHeader(h map[string][]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hdrTaken {
		return s.internal("SetHeader after the headers were sent")
	}
	s.held = join(s.held, h)
	return nil
}

// SendHeader sends a server's response headers, through the processor.
func (s *Session) SendHeader(h map[string][]string) error {
	if err := s.SetHeader(h); err != nil {
		return err
	}
	return s.headers(true)
}

// SetTrailer holds a server's response trailers for the processor.
func (s *Session) SetTrailer(t map[string][]string) {
	s.mu.Lock()
	s.heldTrl = join(s.heldTrl, t)
	s.mu.Unlock()
}

// Trailer is the trailers as the filter leaves them: the failure's, the
// processor's once the RPC ended, else (a client's) the peer's.
func (s *Session) Trailer() map[string][]string {
	if _, t := s.Failure(); t != nil {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || !s.client() {
		return s.trailer
	}
	return s.o.Client.Trailer()
}

// End tells the processor how the RPC ended (rpcErr; nil or io.EOF: OK)
// and returns its end as the filter leaves it: the filter's failure
// comes first. The response's end is its headers with end_of_stream when
// none were sent (Trailers-Only, with no trailers event: gRFC A93), else
// its trailers; either way with grpc-status and grpc-message. On a
// server the trailers the processor leaves are set on the peer. End runs
// once; later calls return the first's result.
func (s *Session) End(rpcErr error) error {
	s.endOnce.Do(func() { s.endErr = s.end(rpcErr) })
	return s.endErr
}

func (s *Session) end(rpcErr error) error {
	if !s.client() {
		if f := s.failure(); f != nil {
			return f
		}
		// Headers not taken by now never will be: Trailers-Only.
		s.h.once.Do(func() {
			s.mu.Lock()
			s.hdrTaken = true
			s.mu.Unlock()
			close(s.h.ready)
		})
	} else {
		_ = s.headers(false)
	}
	s.mu.Lock()
	held, t := s.held, s.heldTrl
	s.mu.Unlock()
	if s.client() {
		t = s.o.Client.Trailer()
	}
	code, msg := s.code(rpcErr)
	full := withStatus(t, code, msg)
	var perr error
	out := full
	if !s.h.seen {
		if s.modes.ResponseHeaders {
			out, perr = s.call.ServerHeaders(join(held, full), true)
		} else if len(held) > 0 {
			_ = s.o.Server.SetHeader(held)
		}
		s.call.EndServerMessages()
	} else {
		drain := !s.client() && s.modes.ResponseBody
		if drain {
			s.startWriter(nil) // reads the processor's messages to their end
		}
		out, perr = s.call.ServerTrailers(full)
		if drain {
			<-s.w.done
		}
	}
	if perr == nil {
		t = stripStatus(out)
	}
	s.mu.Lock()
	s.ended, s.trailer = true, t
	s.mu.Unlock()
	if perr != nil {
		return s.failureOr(perr)
	}
	if !s.client() {
		if f := s.failure(); f != nil {
			return f
		}
		if len(t) > 0 {
			s.o.Server.SetTrailer(t)
		}
	}
	return rpcErr
}

// code is rpcErr's status code and message.
func (s *Session) code(rpcErr error) (uint32, string) {
	var st *Status
	switch {
	case rpcErr == nil, errors.Is(rpcErr, io.EOF):
		return 0, ""
	case errors.As(rpcErr, &st):
		return st.Code, st.Message
	}
	return s.o.Code(rpcErr)
}

// Close ends the filter's work on the RPC: the call is done (its stream
// closes, in observability mode after deferred_close_timeout) and the
// session's pumps end, the one that writes waited for. It may be called
// more than once.
func (s *Session) Close() {
	s.call.Done()
	s.unwatch()
	s.r.cancel(nil)
	s.cancel()
	s.w.once.Do(func() { close(s.w.done) }) // never started
	<-s.w.done
}

// withStatus is t with the status as grpc-status and grpc-message, as
// the processor sees trailers.
func withStatus(t map[string][]string, code uint32, msg string) map[string][]string {
	out := make(map[string][]string, len(t)+2)
	for k, v := range t {
		out[k] = v
	}
	out["grpc-status"] = []string{strconv.FormatUint(uint64(code), 10)}
	if msg != "" {
		out["grpc-message"] = []string{msg}
	} else {
		delete(out, "grpc-message")
	}
	return out
}

// stripStatus is t less the status, which gRPC gives as the RPC's
// error, not among its trailers.
func stripStatus(t map[string][]string) map[string][]string {
	out := make(map[string][]string, len(t))
	for k, v := range t {
		if k != "grpc-status" && k != "grpc-message" {
			out[k] = v
		}
	}
	return out
}

// join is a with b's values appended, in a new map.
func join(a, b map[string][]string) map[string][]string {
	out := make(map[string][]string, len(a)+len(b))
	for k, v := range a {
		out[k] = append([]string(nil), v...)
	}
	for k, v := range b {
		out[k] = append(out[k], v...)
	}
	return out
}
