package grpcxds

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/internal/extprocgrpc"
)

// A streaming RPC through the external processing filters: each filter's
// procStream wraps the stream toward the server (the retrying stream, or
// the filter after it), the chain's first filter nearest the
// application, and procEnd around them all ends the filters' work when
// the RPC ends.

// wrap returns s, the RPC's stream toward the server, as the application
// sees it through the filters.
func (ps *procSet) wrap(s grpc.ClientStream, desc *grpc.StreamDesc, opts []grpc.CallOption) grpc.ClientStream {
	for i := len(ps.procs) - 1; i >= 0; i-- {
		s = &procStream{ps: ps, p: ps.procs[i], next: s, desc: desc}
	}
	return &procEnd{ClientStream: s, ps: ps, desc: desc, opts: opts}
}

// procStream is a streaming RPC inside one external processing filter.
// gRPC allows one goroutine sending (SendMsg, CloseSend) beside one
// receiving (RecvMsg, Header); in a body mode a pump carries the
// processor's messages on toward the server (request messages) or reads
// the server's for the processor (response messages), and the
// application's calls read the call's queues.
type procStream struct {
	ps   *procSet
	p    *httpfilter.Proc
	next grpc.ClientStream
	desc *grpc.StreamDesc

	sendOnce sync.Once
	recvOnce sync.Once
	recvDone chan struct{} // closed when the response pump ends; set by recvOnce

	hdrOnce sync.Once
	hdr     metadata.MD // the server's headers as the processor left them; nil: none
	hdrErr  error
	hdrSeen bool // the server sent headers (not Trailers-Only); set by hdrOnce

	mu      sync.Mutex
	endErr  error       // how the RPC ended, as this filter leaves it
	trailer metadata.MD // the trailers as the processor left them
	ended   bool
}

// Header implements grpc.ClientStream: the server's headers, once the
// processor has seen them.
func (s *procStream) Header() (metadata.MD, error) {
	s.header()
	return s.hdr, s.hdrErr
}

// header runs the server's headers through the processor, once. A
// stream that ended without headers (Trailers-Only, or no server
// reached) leaves hdr nil, and end tells the processor.
func (s *procStream) header() {
	s.hdrOnce.Do(func() {
		md, err := s.next.Header()
		if md == nil {
			s.hdrErr = err
			return
		}
		s.hdrSeen = true
		if s.p.Config.Modes.ResponseHeaders {
			out, perr := s.p.Call.ServerHeaders(md, false)
			if perr != nil {
				s.hdrErr = extprocgrpc.Status(perr)
				return
			}
			if !s.p.Config.ObservabilityMode {
				md = metadata.MD(out)
			}
		}
		s.hdr = md
	})
}

// Context implements grpc.ClientStream.
func (s *procStream) Context() context.Context { return s.next.Context() }

// Trailer implements grpc.ClientStream: the trailers as the processor
// left them, once the RPC ended.
func (s *procStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return s.trailer.Copy()
	}
	return s.next.Trailer()
}

// SendMsg implements grpc.ClientStream: in GRPC body mode m goes to the
// processor, whose messages the pump sends on.
func (s *procStream) SendMsg(m any) error {
	if !s.p.Config.Modes.RequestBody {
		return s.next.SendMsg(m)
	}
	pm, b, err := extprocgrpc.Marshal(procPrefix, "a request", m)
	if err != nil {
		return err
	}
	s.startSend(extprocgrpc.NewLike(pm))
	if err := s.p.Call.ClientMessage(b); err != nil {
		return extprocgrpc.Status(err)
	}
	return nil
}

// CloseSend implements grpc.ClientStream: in GRPC body mode the
// half-close goes to the processor, whose end of the client's messages
// the pump sends on.
func (s *procStream) CloseSend() error {
	if !s.p.Config.Modes.RequestBody {
		return s.next.CloseSend()
	}
	s.startSend(nil)
	if err := s.p.Call.ClientHalfClose(); err != nil {
		return extprocgrpc.Status(err)
	}
	return nil
}

// startSend starts, once, the pump that sends the processor's request
// messages (parsed as newMsg makes them; nil: the application sent none,
// and any is an error) and half-close toward the server.
func (s *procStream) startSend(newMsg func() proto.Message) {
	s.sendOnce.Do(func() {
		go func() {
			c := s.p.Call
			for {
				b, ok, err := c.NextClientMessage(s.ps.ctx)
				if err != nil {
					return // the call's or the RPC's end, which RecvMsg reports
				}
				if !ok {
					_ = s.next.CloseSend()
					return
				}
				if newMsg == nil {
					s.ps.failWith(status.Error(codes.Internal, "goxds: ext_proc: the processor sent a request message, but the application sent none whose type it could take"))
					return
				}
				m := newMsg()
				if err := extprocgrpc.Unmarshal(procPrefix, "request", b, m); err != nil {
					s.ps.failWith(err)
					return
				}
				if s.next.SendMsg(m) != nil {
					return // the stream is over: RecvMsg says how
				}
			}
		}()
	})
}

// RecvMsg implements grpc.ClientStream: the server's next message, in
// GRPC body mode the processor's; the RPC's end once the processor has
// seen it (end).
func (s *procStream) RecvMsg(m any) error {
	if !s.p.Config.Modes.ResponseBody {
		s.header()
		if s.hdrSeen && s.hdrErr != nil {
			// The processor did not let the server's headers through:
			// nothing after them reaches the application (gRFC A93).
			return s.end(s.hdrErr)
		}
		err := s.next.RecvMsg(m)
		if err == nil && s.desc.ServerStreams {
			return nil
		}
		if err == nil {
			// The one response of a stream the server does not stream
			// came with the RPC's end.
			if eerr := s.end(io.EOF); !errors.Is(eerr, io.EOF) {
				return eerr
			}
			return nil
		}
		return s.end(err)
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return extprocgrpc.NotProto(procPrefix, m)
	}
	s.recvOnce.Do(func() {
		s.recvDone = make(chan struct{})
		go s.recvPump(extprocgrpc.NewLike(pm))
	})
	b, ok, err := s.nextServer()
	if err != nil || !ok {
		return err
	}
	proto.Reset(pm)
	if err := extprocgrpc.Unmarshal(procPrefix, "response", b, pm); err != nil {
		return err
	}
	if s.desc.ServerStreams {
		return nil
	}
	// A stream the server does not stream ends with its one response.
	if _, more, err := s.nextServer(); err != nil && !errors.Is(err, io.EOF) {
		return err
	} else if more {
		return status.Error(codes.Internal, "goxds: ext_proc: the processor gave more than one response message for an RPC whose server does not stream")
	}
	return nil
}

// nextServer is the processor's next response message; at their end,
// ok false and the RPC's end as this filter leaves it (io.EOF: OK).
func (s *procStream) nextServer() ([]byte, bool, error) {
	b, ok, err := s.p.Call.NextServerMessage(s.ps.ctx)
	if err != nil {
		if f, _ := s.ps.failure(); f != nil {
			return nil, false, f
		}
		return nil, false, extprocgrpc.Status(err)
	}
	if !ok {
		<-s.recvDone
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, false, s.endErr
	}
	return b, true, nil
}

// recvPump reads the server's messages (as newMsg makes them) for the
// processor, and the RPC's end.
func (s *procStream) recvPump(newMsg func() proto.Message) {
	defer close(s.recvDone)
	s.header()
	for {
		m := newMsg()
		err := s.next.RecvMsg(m)
		if err != nil {
			s.end(err)
			return
		}
		b, err := proto.Marshal(m)
		if err != nil {
			s.ps.failWith(status.Errorf(codes.Internal, "goxds: ext_proc: marshal a response: %v", err))
			s.end(err)
			return
		}
		if err := s.p.Call.ServerMessage(b); err != nil {
			s.end(extprocgrpc.Status(err))
			return
		}
		if !s.desc.ServerStreams {
			s.end(io.EOF)
			return
		}
	}
}

// end tells the processor how the RPC ended (rpcErr; io.EOF: OK): the
// server's headers with end_of_stream for a Trailers-Only response, else
// its trailers, with grpc-status and grpc-message. It returns the RPC's
// end as this filter leaves it.
func (s *procStream) end(rpcErr error) error {
	s.mu.Lock()
	if s.ended {
		defer s.mu.Unlock()
		return s.endErr
	}
	s.mu.Unlock()
	s.header()
	st := rpcErr
	if errors.Is(st, io.EOF) {
		st = nil
	}
	c, observe := s.p.Call, s.p.Config.ObservabilityMode
	t := s.next.Trailer()
	out := rpcErr
	if !s.hdrSeen {
		// Trailers-Only (or no server reached): no trailers event.
		if s.p.Config.Modes.ResponseHeaders {
			h, err := c.ServerHeaders(withStatus(t, st), true)
			if err != nil {
				out = extprocgrpc.Status(err)
			} else if !observe {
				t = stripStatus(h)
			}
		}
		c.EndServerMessages()
	} else {
		tr, err := c.ServerTrailers(withStatus(t, st))
		if err != nil {
			out = extprocgrpc.Status(err)
		} else if !observe {
			t = stripStatus(tr)
		}
	}
	s.mu.Lock()
	s.ended, s.trailer, s.endErr = true, t, out
	s.mu.Unlock()
	return out
}

// procEnd is the outermost stream of an RPC through external processing
// filters: when the RPC ends, the filters' work ends, a filter's failure
// is the RPC's status, and the grpc.Header and grpc.Trailer call options
// get the headers and trailers as the filters left them.
type procEnd struct {
	grpc.ClientStream
	ps   *procSet
	desc *grpc.StreamDesc
	opts []grpc.CallOption
	done bool // only the receiving goroutine
}

// Header implements grpc.ClientStream: the headers the filters let
// through stay the stream's whatever ends it later (an immediate
// response to the trailers, say), as a gRPC stream's do; else a filter's
// failure comes first.
func (s *procEnd) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err == nil && md != nil {
		return md, nil
	}
	if f, _ := s.ps.failure(); f != nil {
		return nil, f
	}
	return md, err
}

// Trailer implements grpc.ClientStream: an immediate response's trailers
// come first.
func (s *procEnd) Trailer() metadata.MD {
	if _, t := s.ps.failure(); t != nil {
		return t
	}
	return s.ClientStream.Trailer()
}

// RecvMsg implements grpc.ClientStream.
func (s *procEnd) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if s.done || (err == nil && s.desc.ServerStreams) {
		return err
	}
	s.done = true
	hdr, _ := s.ClientStream.Header()
	trailer := s.Trailer()
	err = s.ps.finish(err)
	setCallOptions(s.opts, hdr, trailer)
	return err
}
