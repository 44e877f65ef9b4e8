package grpcxds_test

import (
	"io"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// gRFC A93's request_drain on a goxds channel (the server side's is
// xdsserver's TestExtProcDrain): the processor answers the stream's first
// message and asks for a drain; the filter half-closes the processing
// stream, the processor ends it with OK, and the stream's later messages
// go to the server untouched.
func TestExtProcClientDrain(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
		case r.GetRequestBody() != nil:
			resp := testutils.ProcBody(true, testutils.ProcString(r.GetRequestBody().GetBody())+"-proc", false, false)
			resp.RequestDrain = true
			return []*procv3.ProcessingResponse{resp}, nil
		}
		return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_GRPC
	}))
	s, err := e.dial().NewStream(e.ctx, &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}, procStream, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ send, want string }{{"a", "echo:a-proc/"}, {"b", "echo:b/"}, {"c", "echo:c/"}} {
		if err := s.SendMsg(wrapperspb.String(tc.send)); err != nil {
			t.Fatal(err)
		}
		out := new(wrapperspb.StringValue)
		if err := s.RecvMsg(out); err != nil {
			t.Fatalf("after sending %q: %v", tc.send, err)
		}
		if out.GetValue() != tc.want {
			t.Fatalf("sent %q, got %q, want %q", tc.send, out.GetValue(), tc.want)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatalf("after the half-close: %v, want the stream's OK end", err)
	}
}
