package extprocgrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/dataplane/extproc"
)

// A streaming RPC through the external processing filters: each filter's
// procStream wraps the stream toward the server (the retrying stream, or
// the filter after it), the chain's first filter nearest the
// application, and procEnd around them all ends the filters' work when
// the RPC ends. The sequencing (held headers, the pumps, the end) is the
// filter's Session; what is here converts gRPC's types and statuses.

// Wrap returns s, the RPC's stream toward the server (the one made with
// the context NewClientRPC returned), as the application sees it through
// the filters; the stream's end calls Finish.
func (r *ClientRPC) Wrap(s grpc.ClientStream, desc *grpc.StreamDesc, opts []grpc.CallOption) grpc.ClientStream {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.links[i].ClientStream = s
		s = &procStream{s: r.sess[i], next: s}
	}
	return &procEnd{ClientStream: s, r: r, desc: desc, opts: opts}
}

// clientLink is a session's peer: the stream toward the server, set
// before the session is used.
type clientLink struct{ grpc.ClientStream }

func (l *clientLink) Header() (map[string][]string, error) {
	md, err := l.ClientStream.Header()
	return md, err
}

func (l *clientLink) Trailer() map[string][]string { return l.ClientStream.Trailer() }

// procStream is a streaming RPC inside one external processing filter,
// its session's grpc.ClientStream.
type procStream struct {
	s    *extproc.Session
	next grpc.ClientStream
}

// Header implements grpc.ClientStream: the server's headers, once the
// processor has seen them.
func (s *procStream) Header() (metadata.MD, error) {
	h, err := s.s.Header()
	return h, Status(err)
}

// Context implements grpc.ClientStream.
func (s *procStream) Context() context.Context { return s.next.Context() }

// Trailer implements grpc.ClientStream: the trailers as the processor
// left them, once the RPC ended.
func (s *procStream) Trailer() metadata.MD { return metadata.MD(s.s.Trailer()).Copy() }

// SendMsg implements grpc.ClientStream.
func (s *procStream) SendMsg(m any) error { return Status(s.s.SendMsg(m)) }

// CloseSend implements grpc.ClientStream.
func (s *procStream) CloseSend() error { return Status(s.s.CloseSend()) }

// RecvMsg implements grpc.ClientStream.
func (s *procStream) RecvMsg(m any) error { return Status(s.s.RecvMsg(m)) }

// procEnd is the outermost stream of an RPC through external processing
// filters: when the RPC ends, the filters' work ends, a filter's failure
// is the RPC's status, and the grpc.Header and grpc.Trailer call options
// get the headers and trailers as the filters left them.
type procEnd struct {
	grpc.ClientStream
	r    *ClientRPC
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
	if f, _ := s.r.failure(); f != nil {
		return nil, f
	}
	return md, err
}

// Trailer implements grpc.ClientStream: an immediate response's trailers
// come first.
func (s *procEnd) Trailer() metadata.MD {
	if _, t := s.r.failure(); t != nil {
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
	err = s.r.Finish(err)
	setCallOptions(s.opts, hdr, trailer)
	return err
}
