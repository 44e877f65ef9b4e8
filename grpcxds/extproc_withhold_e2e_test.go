package grpcxds_test

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// A unary RPC that an immediate response ends at the server's message
// fails without that message: the application's reply stays empty, as
// it would had the RPC been cancelled (gRFC A93), and as grpc-go's filter
// leaves it.
func TestExtProcClientImmediateResponseWithholdsTheReply(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetResponseBody() != nil {
			return []*procv3.ProcessingResponse{testutils.ProcImmediate(codes.ResourceExhausted, "stopped at the response")}, nil
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	got, err := echo(e.ctx, e.dial(), "hi")
	if status.Code(err) != codes.ResourceExhausted || got != "" {
		t.Fatalf("RPC stopped at its response: reply %q, %v; want no reply, RESOURCE_EXHAUSTED", got, err)
	}
}

// An immediate response to the server's trailers ends a stream with its
// status and headers in the trailers (gRFC A93); the server's headers,
// which the processor had let through, stay the stream's Header, as they
// stay a gRPC stream's whatever ends it.
func TestExtProcClientImmediateResponseToTrailersKeepsTheHeaders(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetResponseTrailers() != nil {
			return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
				GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.Aborted)}, Details: "at the trailers", Headers: testutils.ProcSetHeaders("x-imm", "1")}}}}, nil
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
	}))
	s, err := e.dial().NewStream(e.ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, procStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for err == nil {
		err = s.RecvMsg(new(wrapperspb.StringValue))
	}
	if status.Code(err) != codes.Aborted || s.Trailer().Get("x-imm") == nil {
		t.Fatalf("stream's end %v, trailer %v; want ABORTED with x-imm", err, s.Trailer())
	}
	if md, err := s.Header(); err != nil || md.Get("x-srv-h") == nil || md.Get("x-proc-h") == nil {
		t.Errorf("stream's Header() = %v, %v; want the server's x-srv-h and the processor's x-proc-h", md, err)
	}
}

// A processor that fails its stream at the server's headers fails the RPC
// with INTERNAL, and what came after the headers, which it never let
// through, does not reach the application: not a stream's message, not a
// unary RPC's reply.
func TestExtProcClientFailureAtResponseHeadersWithholdsMessages(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetResponseHeaders() != nil {
			return nil, status.Error(codes.Unavailable, "the processor fails")
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), nil))
	conn := e.dial()
	got, err := echo(e.ctx, conn, "hi")
	if status.Code(err) != codes.Internal || got != "" {
		t.Errorf("unary RPC: reply %q, %v; want no reply, INTERNAL", got, err)
	}
	s, err := conn.NewStream(e.ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, procStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	out := new(wrapperspb.StringValue)
	if err := s.RecvMsg(out); status.Code(err) != codes.Internal {
		t.Errorf("stream's first RecvMsg: %q, %v; want INTERNAL and no message", out.GetValue(), err)
	}
}
