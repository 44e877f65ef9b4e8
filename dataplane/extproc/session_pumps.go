package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// A Session's messages. The application writes one direction (a
// client's requests, a server's responses) and reads the other. In GRPC
// body mode what it writes goes to the processor and a writer pump hands
// the processor's messages on to the peer; what it reads is the
// processor's, while a reader pump feeds the processor the peer's. Each
// pump starts at the first message, whose type the processor's messages
// are parsed as.

// writeKind and readKind are the body events of the directions the
// application writes and reads.
func (s *Session) writeKind() Kind {
	if s.client() {
		return RequestBody
	}
	return ResponseBody
}

func (s *Session) readKind() Kind {
	if s.client() {
		return ResponseBody
	}
	return RequestBody
}

func (s *Session) bodyMode(k Kind) bool {
	if k == RequestBody {
		return s.modes.RequestBody
	}
	return s.modes.ResponseBody
}

// what names a direction's messages in error texts.
func what(k Kind) string {
	if k == RequestBody {
		return "request"
	}
	return "response"
}

// hand gives the call one message of direction k.
func (s *Session) hand(k Kind, b []byte) error {
	if k == RequestBody {
		return s.call.ClientMessage(b)
	}
	return s.call.ServerMessage(b)
}

// next is the processor's next message of direction k for the peer or
// the application.
func (s *Session) next(ctx context.Context, k Kind) ([]byte, bool, error) {
	if k == RequestBody {
		return s.call.NextClientMessage(ctx)
	}
	return s.call.NextServerMessage(ctx)
}

// SendMsg is the application's next message: to the peer, or in GRPC
// body mode to the processor. A server's response headers go first.
func (s *Session) SendMsg(m any) error {
	k := s.writeKind()
	if !s.client() {
		if f := s.failure(); f != nil {
			return f
		}
		if err := s.headers(true); err != nil {
			return err
		}
	}
	if !s.bodyMode(k) {
		return s.peer.SendMsg(m)
	}
	pm, b, err := Marshal(s.o.Prefix, "a "+what(k), m)
	if err != nil {
		return err
	}
	s.startWriter(NewLike(pm))
	if err := s.hand(k, b); err != nil {
		return err
	}
	if s.client() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// CloseSend is a client's half-close: to the peer, or in GRPC body mode
// to the processor, whose end of the messages the writer hands on.
func (s *Session) CloseSend() error {
	if !s.modes.RequestBody {
		return s.o.Client.CloseSend()
	}
	s.startWriter(nil)
	return s.call.ClientHalfClose()
}

// startWriter starts, once, the pump that writes the processor's
// messages (parsed as newMsg makes them; nil: the application wrote none,
// and any is an error) to the peer, and a client's half-close.
func (s *Session) startWriter(newMsg func() proto.Message) {
	s.w.once.Do(func() { go s.writer(newMsg) })
}

func (s *Session) writer(newMsg func() proto.Message) {
	defer close(s.w.done)
	k := s.writeKind()
	peerOK := true
	for {
		b, ok, err := s.next(s.ctx, k)
		if err != nil {
			return // the call's or the RPC's end, which the reads report
		}
		if !ok {
			if s.client() {
				_ = s.o.Client.CloseSend()
			}
			return
		}
		if f, _ := s.Failure(); f != nil || !peerOK {
			continue // read on, so that the processor is not held up
		}
		if !s.client() {
			// The headers go before the first message.
			select {
			case <-s.h.ready:
			case <-s.ctx.Done():
				return
			}
		}
		if newMsg == nil {
			s.fail(s.internal(fmt.Sprintf("the processor sent a %s message, but the application sent none whose type it could take", what(k))))
			continue
		}
		m := newMsg()
		if err := Unmarshal(s.o.Prefix, what(k), b, m); err != nil {
			s.fail(err)
			continue
		}
		if err := s.peer.SendMsg(m); err != nil {
			// A client's stream is over, which its reads say how; a
			// server's failure to send fails the RPC.
			peerOK = false
			if !s.client() {
				s.fail(err)
			}
		}
	}
}

// RecvMsg reads the next message into m: the peer's, or in GRPC body
// mode the processor's. At the end it returns, on a client, the RPC's
// end as the filter leaves it (io.EOF: OK), on a server io.EOF (the
// client's half-close). With Single, the one message comes with the
// end, and a processor giving none or more fails the RPC.
func (s *Session) RecvMsg(m any) error {
	k := s.readKind()
	if !s.client() {
		if f := s.failure(); f != nil {
			return f
		}
	}
	if !s.bodyMode(k) {
		if !s.client() {
			return s.peer.RecvMsg(m)
		}
		if err := s.headers(false); err != nil && s.h.seen {
			// The processor did not let the server's headers through:
			// nothing after them reaches the application (gRFC A93).
			return s.End(err)
		}
		err := s.peer.RecvMsg(m)
		if err == nil && !s.o.Single {
			return nil
		}
		if err == nil {
			if eerr := s.End(io.EOF); !errors.Is(eerr, io.EOF) {
				return eerr
			}
			return nil
		}
		return s.End(err)
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return NotProto(s.o.Prefix, m)
	}
	s.r.once.Do(func() { go s.reader(NewLike(pm)) })
	b, ok, err := s.nextRead(k)
	if err != nil || !ok {
		if s.o.Single && errors.Is(err, io.EOF) {
			return s.internal(fmt.Sprintf("the processor gave no %s message, want 1", what(k)))
		}
		return err
	}
	proto.Reset(pm)
	if err := Unmarshal(s.o.Prefix, what(k), b, pm); err != nil {
		return err
	}
	if !s.o.Single {
		return nil
	}
	if _, more, err := s.nextRead(k); err != nil && !errors.Is(err, io.EOF) {
		return err
	} else if more {
		return s.internal(fmt.Sprintf("the processor gave more than one %s message, want 1", what(k)))
	}
	return nil
}

// nextRead is the processor's next message for the application; at the
// end, ok false and the end RecvMsg returns.
func (s *Session) nextRead(k Kind) ([]byte, bool, error) {
	b, ok, err := s.next(s.r.ctx, k)
	switch {
	case err != nil:
		if cause := context.Cause(s.r.ctx); s.r.ctx.Err() != nil && cause != nil {
			err = cause // the reader's failure
		}
		if f, _ := s.Failure(); f != nil {
			err = f
		}
		return nil, false, err
	case ok:
		return b, true, nil
	case s.client():
		<-s.r.done
		return nil, false, s.End(nil)
	}
	return nil, false, io.EOF
}

// reader feeds the processor the peer's messages (as newMsg makes them),
// and their end: a client's the RPC's (End), a server's the client's
// half-close.
func (s *Session) reader(newMsg func() proto.Message) {
	defer close(s.r.done)
	k := s.readKind()
	if s.client() {
		_ = s.headers(false)
	}
	for {
		m := newMsg()
		err := s.peer.RecvMsg(m)
		switch {
		case err == nil:
		case s.client():
			s.End(err)
			return
		case errors.Is(err, io.EOF):
			_ = s.call.ClientHalfClose()
			return
		default:
			s.r.cancel(err)
			return
		}
		b, err := proto.Marshal(m)
		if err != nil {
			err = s.internal(fmt.Sprintf("marshal a %s: %v", what(k), err))
			if s.client() {
				s.fail(err)
				s.End(err)
			} else {
				s.r.cancel(err)
			}
			return
		}
		if err := s.hand(k, b); err != nil {
			if s.client() {
				s.End(err)
			}
			return // a server's read reports the call's failure
		}
		if s.client() && s.o.Single {
			s.End(io.EOF)
			return
		}
	}
}

// NotProto is the INTERNAL *Status of a message m that is not a protocol
// buffer: the GRPC body mode sends messages serialized, which only a
// proto.Message can be here. prefix names the side.
func NotProto(prefix string, m any) error {
	return &Status{Code: codeInternal, Message: fmt.Sprintf("%s: a message of type %T is not a protocol buffer, which the GRPC body mode needs", prefix, m)}
}

// Marshal is m as a proto.Message and serialized; what names m in the
// error ("a request", "a response"), an INTERNAL *Status.
func Marshal(prefix, what string, m any) (proto.Message, []byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, nil, NotProto(prefix, m)
	}
	b, err := proto.Marshal(pm)
	if err != nil {
		return nil, nil, &Status{Code: codeInternal, Message: fmt.Sprintf("%s: marshal %s: %v", prefix, what, err)}
	}
	return pm, b, nil
}

// Unmarshal parses b, a message the processor gave, into m; what
// ("request", "response") names the message's direction in the error,
// an INTERNAL *Status.
func Unmarshal(prefix, what string, b []byte, m proto.Message) error {
	if err := proto.Unmarshal(b, m); err != nil {
		return &Status{Code: codeInternal, Message: fmt.Sprintf("%s: the processor's %s message is not a %s: %v", prefix, what, m.ProtoReflect().Descriptor().FullName(), err)}
	}
	return nil
}

// NewLike returns a function making new messages of m's type; m is not
// read again (the application may be filling it meanwhile).
func NewLike(m proto.Message) func() proto.Message {
	t := m.ProtoReflect().Type()
	return func() proto.Message { return t.New().Interface() }
}
