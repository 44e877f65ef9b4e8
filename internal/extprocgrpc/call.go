package extprocgrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/dataplane/extproc"
)

// The pieces below are what the client's (client_rpc.go) and the
// server's (server_rpc.go) sides both do around an extproc.Call. Error
// texts start with prefix, the side's own (ClientPrefix, ServerPrefix),
// so that an RPC's status says which side failed it.

// Status is err as the status an RPC ends with: a Call's *extproc.Status
// as a gRPC status (its message as given), a context's end as gRPC's,
// anything else as it is.
func Status(err error) error {
	var st *extproc.Status
	switch {
	case errors.As(err, &st):
		return status.Error(codes.Code(st.Code), st.Message)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return err
}

// Marshal is m as a proto.Message and serialized; what names m in the
// error ("a request", "a response").
func Marshal(prefix, what string, m any) (proto.Message, []byte, error) {
	pm, b, err := extproc.Marshal(prefix, what, m)
	return pm, b, Status(err)
}

// Unmarshal parses b, a message the processor gave, into m; what
// ("request", "response") names the message's direction in the error.
func Unmarshal(prefix, what string, b []byte, m proto.Message) error {
	return Status(extproc.Unmarshal(prefix, what, b, m))
}

// Code is an RPC error's gRPC status code and message, as a Session
// gives the processor its trailers.
func Code(err error) (uint32, string) {
	st := status.Convert(err)
	return uint32(st.Code()), st.Message()
}

// NewLike returns a function making new messages of m's type
// (extproc.NewLike).
func NewLike(m proto.Message) func() proto.Message { return extproc.NewLike(m) }

// UnaryRequest sends a unary RPC's request req and half-close to the
// processor of c and returns the one message it gives back, of req's
// type; waits end with ctx. A processor giving none or more than one
// fails the RPC with INTERNAL (a unary RPC carries exactly one).
func UnaryRequest(ctx context.Context, c *extproc.Call, prefix string, req any) (any, error) {
	m, b, err := Marshal(prefix, "the request", req)
	if err != nil {
		return nil, err
	}
	if err := c.ClientMessage(b); err != nil {
		return nil, Status(err)
	}
	if err := c.ClientHalfClose(); err != nil {
		return nil, Status(err)
	}
	var out proto.Message
	n := 0
	for {
		b, ok, err := c.NextClientMessage(ctx)
		if err != nil {
			return nil, Status(err)
		}
		if !ok {
			break
		}
		if n++; n == 1 {
			out = m.ProtoReflect().New().Interface()
			if err := Unmarshal(prefix, "request", b, out); err != nil {
				return nil, err
			}
		}
	}
	if n != 1 {
		return nil, notOneMessage(prefix, "request", n)
	}
	return out, nil
}

// notOneMessage is the status of a unary RPC whose processor gave n
// messages in direction dir ("request", "response"): INTERNAL, as a
// unary RPC carries exactly one each way.
func notOneMessage(prefix, dir string, n int) error {
	return status.Errorf(codes.Internal, "%s: the processor gave %d %s messages for a unary RPC, want 1", prefix, n, dir)
}
