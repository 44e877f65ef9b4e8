package grpcxds_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// The external processing filter (gRFC A93) on a goxds channel,
// configured by go-control-plane's server, calling a scripted processor
// (testutils.ProcServer) before an echoing backend.

// The processor's header changes reach the server before the RPC is
// sent; it is told the RPC's :path and metadata; its changes to the
// response headers and trailers reach the application's grpc.Header and
// grpc.Trailer.
func TestExtProcClientHeadersAndTrailers(t *testing.T) {
	reqs := make(chan *procv3.ProcessingRequest, 16)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		reqs <- r
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
	}))
	var header, trailer metadata.MD
	got, err := echo(metadata.AppendToOutgoingContext(e.ctx, "x-app", "a"), e.dial(), "hi", grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil || got != "echo:hi/in" {
		t.Fatalf("Echo = %q, %v; want echo:hi/in (the server saw x-proc: in)", got, err)
	}
	if header.Get("x-proc-h") == nil || header.Get("x-srv-h") == nil {
		t.Errorf("response headers %v, want the server's x-srv-h and the processor's x-proc-h", header)
	}
	if trailer.Get("x-proc-t") == nil || trailer.Get("x-srv-t") == nil {
		t.Errorf("trailers %v, want the server's x-srv-t and the processor's x-proc-t", trailer)
	}
	first := <-reqs
	h := first.GetRequestHeaders().GetHeaders()
	if testutils.ProcHeaderValue(h, ":path") != procEcho || testutils.ProcHeaderValue(h, "x-app") != "a" || first.GetProtocolConfig() == nil {
		t.Errorf("first request %v, want request headers with :path %s and x-app: a, and protocol_config", first, procEcho)
	}
	if r := <-reqs; testutils.ProcHeaderValue(r.GetResponseHeaders().GetHeaders(), "x-srv-h") != "1" {
		t.Errorf("second request %v, want the server's headers", r)
	}
	if r := <-reqs; testutils.ProcHeaderValue(r.GetResponseTrailers().GetTrailers(), "grpc-status") != "0" {
		t.Errorf("third request %v, want the trailers with grpc-status 0", r)
	}
}

// In GRPC body mode the processor's messages replace the RPC's, both
// ways, on unary RPCs and on bidirectional streams.
func TestExtProcClientMessagesReplaced(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, marking)
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	conn := e.dial()
	var header, trailer metadata.MD
	got, err := echo(e.ctx, conn, "hi", grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil || got != "<echo:hi-proc/in>" {
		t.Fatalf("Echo = %q, %v; want <echo:hi-proc/in>", got, err)
	}
	if header.Get("x-proc-h") == nil || trailer.Get("x-proc-t") == nil {
		t.Errorf("header %v, trailer %v; want the processor's x-proc-h and x-proc-t", header, trailer)
	}

	desc := &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}
	header, trailer = nil, nil
	s, err := conn.NewStream(e.ctx, desc, procStream, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b"} {
		if err := s.SendMsg(wrapperspb.String(v)); err != nil {
			t.Fatal(err)
		}
		out := new(wrapperspb.StringValue)
		if err := s.RecvMsg(out); err != nil || out.GetValue() != "<echo:"+v+"-proc/in>" {
			t.Fatalf("stream's reply to %s: %q, %v; want <echo:%s-proc/in>", v, out.GetValue(), err, v)
		}
	}
	if md, err := s.Header(); err != nil || md.Get("x-proc-h") == nil {
		t.Errorf("stream's Header() = %v, %v; want x-proc-h", md, err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatalf("stream's end: %v, want io.EOF", err)
	}
	if s.Trailer().Get("x-proc-t") == nil || trailer.Get("x-proc-t") == nil || header.Get("x-proc-h") == nil {
		t.Errorf("stream's Trailer() %v, grpc.Trailer %v, grpc.Header %v; want the processor's changes", s.Trailer(), trailer, header)
	}
}

// An immediate response ends the RPC with its status, whichever event it
// answers: the client's headers (the RPC is not sent) or the server's
// message.
func TestExtProcClientImmediateResponse(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			if testutils.ProcHeaderValue(r.GetRequestHeaders().GetHeaders(), "x-stop") != "" {
				return []*procv3.ProcessingResponse{testutils.ProcImmediate(codes.PermissionDenied, "stopped at the headers")}, nil
			}
		case r.GetResponseBody() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcImmediate(codes.ResourceExhausted, "stopped at the response")}, nil
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	conn := e.dial()
	_, err := echo(metadata.AppendToOutgoingContext(e.ctx, "x-stop", "1"), conn, "hi")
	if status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != "stopped at the headers" {
		t.Fatalf("RPC stopped at its headers: %v, want PERMISSION_DENIED: stopped at the headers", err)
	}
	_, err = echo(e.ctx, conn, "hi")
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != "stopped at the response" {
		t.Fatalf("RPC stopped at its response: %v, want RESOURCE_EXHAUSTED: stopped at the response", err)
	}
}

// A processor that cannot be reached fails the RPC with INTERNAL, unless
// failure_mode_allow lets it through untouched.
func TestExtProcClientUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := "passthrough:///" + lis.Addr().String()
	lis.Close() // nothing listens there now
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "deny", true: "failure_mode_allow"}[allow], func(t *testing.T) {
			e := procEnv(t, target, nil, testutils.ExtProcFilter(target, func(m *extprocv3.ExternalProcessor) { m.FailureModeAllow = allow }))
			got, err := echo(e.ctx, e.dial(), "hi")
			if allow && (err != nil || got != "echo:hi/") {
				t.Fatalf("with failure_mode_allow: %q, %v; want echo:hi/ untouched", got, err)
			}
			if !allow && (status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "processing stream failed")) {
				t.Fatalf("%v, want INTERNAL: the processing stream failed", err)
			}
		})
	}
}

// A route whose typed_per_filter_config disables the filter opens no
// processing stream; an ExtProcPerRoute override changes its modes there.
func TestExtProcClientPerRoute(t *testing.T) {
	p, streams := testutils.StartProcCounting(t, marking)
	filter := testutils.ExtProcFilter(p.Target(), nil)
	t.Run("disabled", func(t *testing.T) {
		e := procEnv(t, p.Target(), testutils.MarshalAny(&routev3.FilterConfig{Disabled: true}), filter)
		conn := e.dial()
		got, err := echo(metadata.AppendToOutgoingContext(e.ctx, "x-route", "open"), conn, "hi")
		if err != nil || got != "echo:hi/" || streams.Load() != 0 {
			t.Fatalf("on the route that disables the filter: %q, %v, %d streams; want echo:hi/ and no stream", got, err, streams.Load())
		}
		if got, err := echo(e.ctx, conn, "hi"); err != nil || got != "echo:hi/in" || streams.Load() != 1 {
			t.Fatalf("elsewhere: %q, %v, %d streams; want echo:hi/in over one stream", got, err, streams.Load())
		}
	})
	t.Run("overrides", func(t *testing.T) {
		override := testutils.MarshalAny(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
			ProcessingMode: &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SKIP, RequestBodyMode: extprocv3.ProcessingMode_GRPC},
		}}})
		e := procEnv(t, p.Target(), override, filter)
		got, err := echo(metadata.AppendToOutgoingContext(e.ctx, "x-route", "open"), e.dial(), "hi")
		if err != nil || got != "echo:hi-proc/" {
			t.Fatalf("on the overriding route: %q, %v; want echo:hi-proc/ (request headers skipped, request body sent)", got, err)
		}
	})
}

// A change gRFC A102 forbids (a grpc- header) fails the processing
// stream: INTERNAL naming the header, or with failure_mode_allow the RPC
// untouched.
func TestExtProcClientForbiddenMutation(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetRequestHeaders() != nil {
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(testutils.ProcSetHeaders("x-proc", "yes", "grpc-timeout", "1n"))}, nil
		}
		return marking(r)
	})
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "deny", true: "failure_mode_allow"}[allow], func(t *testing.T) {
			e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) { m.FailureModeAllow = allow }))
			got, err := echo(e.ctx, e.dial(), "hi")
			if !allow {
				if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "grpc-timeout") {
					t.Fatalf("%v, want INTERNAL naming grpc-timeout", err)
				}
				return
			}
			if err != nil || got != "echo:hi/" {
				t.Fatalf("%q, %v; want echo:hi/, the headers unchanged", got, err)
			}
		})
	}
}

// The processor's request messages are sent uncompressed, whatever
// compressor the application asked for (gRFC A93); without a body mode
// the application's compressor is kept. The channel's compressor is
// grpc-go's legacy gzip one, which (unlike encoding/gzip's) registers
// nothing process-wide: a registered compressor makes every RPC of the
// test binary advertise it, which BenchmarkPerRPC would count.
func TestExtProcClientSendsUncompressed(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, marking)
	for _, bodies := range []bool{true, false} {
		t.Run(map[bool]string{true: "grpc_bodies", false: "headers_only"}[bodies], func(t *testing.T) {
			c := &compressions{got: make(chan string, 4)}
			var edit func(*extprocv3.ExternalProcessor)
			want := "gzip"
			if bodies {
				edit, want = testutils.ProcGRPCBodies, "identity"
			}
			e := procEnvOn(t, startEcho(t, grpc.StatsHandler(c), grpc.RPCDecompressor(grpc.NewGZIPDecompressor())), p.Target(), nil, testutils.ExtProcFilter(p.Target(), edit))
			//lint:ignore SA1019 the legacy compressor registers nothing process-wide
			conn := e.dial(grpc.WithCompressor(grpc.NewGZIPCompressor()))
			if _, err := echo(e.ctx, conn, "hi"); err != nil {
				t.Fatal(err)
			}
			if got := <-c.got; got != want {
				t.Fatalf("the server got the request with compression %q, want %q", got, want)
			}
		})
	}
}

// The filter runs once per RPC, outside its retry attempts (gRFC A39's
// filters run above the retry code): an RPC retried after UNAVAILABLE
// opens one processing stream, whose one set of request headers and one
// request message every attempt sends.
func TestExtProcClientOncePerRPCAcrossRetries(t *testing.T) {
	headers := make(chan struct{}, 4)
	p, streams := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetRequestHeaders() != nil {
			headers <- struct{}{}
		}
		return marking(r)
	})
	b, st := startEchoState(t)
	e := authzEnv(t, testutils.AllowGRPCService(p.Target()))
	res := tree(routes(withRetry(toCluster(prefix("/"), "A"), retryPolicy("unavailable", 2, 0, 0))), clusters("A"), eds("A", b))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))}
	e.update(res)
	got, err := echo(e.ctx, e.dial(), "flaky")
	if err != nil || got != "<echo:flaky-proc/in>" {
		t.Fatalf("Echo = %q, %v; want <echo:flaky-proc/in> on the second attempt", got, err)
	}
	if n := st.flaky.Load(); n != 2 {
		t.Fatalf("the server got %d attempts, want 2", n)
	}
	if n := streams.Load(); n != 1 || len(headers) != 1 {
		t.Fatalf("%d processing streams, %d request headers events; want 1 of each for the RPC", n, len(headers))
	}
}

// On a route with a timeout (max_stream_duration), whose context the
// RPC's end cancels, the processor still gets the stream's end: the
// processor's last messages and trailers reach the application.
func TestExtProcClientStreamOnRouteWithTimeout(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, marking)
	b := startEcho(t)
	e := authzEnv(t, testutils.AllowGRPCService(p.Target()))
	res := tree(routes(maxStreamDuration(toCluster(prefix("/"), "A"), testTimeout/2, 0)), clusters("A"), eds("A", b))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))}
	e.update(res)
	desc := &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}
	s, err := e.dial().NewStream(e.ctx, desc, procStream, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	out := new(wrapperspb.StringValue)
	if err := s.RecvMsg(out); err != nil || out.GetValue() != "<echo:a-proc/in>" {
		t.Fatalf("stream's reply: %q, %v; want <echo:a-proc/in>", out.GetValue(), err)
	}
	if err := s.RecvMsg(out); err != io.EOF {
		t.Fatalf("stream's end: %v, want io.EOF", err)
	}
	if s.Trailer().Get("x-proc-t") == nil {
		t.Errorf("stream's Trailer() %v, want the processor's x-proc-t", s.Trailer())
	}
}

// A Trailers-Only response (the server fails before sending headers) is
// told to the processor as headers with end_of_stream, carrying the
// status; its changes are the RPC's trailers, and the status stays.
func TestExtProcClientTrailersOnly(t *testing.T) {
	reqs := make(chan *procv3.ProcessingRequest, 16)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		reqs <- r
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
	}))
	var trailer metadata.MD
	_, err := echo(e.ctx, e.dial(), "fail", grpc.Trailer(&trailer))
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("%v, want the server's FAILED_PRECONDITION", err)
	}
	if trailer.Get("x-proc-h") == nil {
		t.Errorf("trailers %v, want the processor's x-proc-h", trailer)
	}
	<-reqs // the request headers
	r := <-reqs
	rh := r.GetResponseHeaders()
	if rh == nil || !rh.GetEndOfStream() || testutils.ProcHeaderValue(rh.GetHeaders(), "grpc-status") != "9" {
		t.Fatalf("second request %v, want response headers with end_of_stream and grpc-status 9", r)
	}
	if len(reqs) != 0 {
		t.Errorf("a trailers event after a Trailers-Only response: %v", <-reqs)
	}

	// The same on a stream, whose first message the server fails.
	s, err := e.dial().NewStream(e.ctx, &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}, procStream, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("fail")); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stream: %v, want the server's FAILED_PRECONDITION", err)
	}
	if s.Trailer().Get("x-proc-h") == nil {
		t.Errorf("stream's trailers %v, want the processor's x-proc-h", s.Trailer())
	}
	<-reqs
	if r := <-reqs; !r.GetResponseHeaders().GetEndOfStream() || testutils.ProcHeaderValue(r.GetResponseHeaders().GetHeaders(), "grpc-status") != "9" {
		t.Fatalf("stream's second request %v, want response headers with end_of_stream and grpc-status 9", r)
	}
}

// In observability mode the processor sees the RPC's events, marked so,
// and the RPC goes on untouched, without waiting for its answers.
func TestExtProcClientObservabilityMode(t *testing.T) {
	reqs := make(chan *procv3.ProcessingRequest, 16)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		reqs <- r
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		testutils.ProcGRPCBodies(m)
		m.ObservabilityMode = true
		// Long enough for the stream's last events to leave before its
		// deferred close cancels it, on a loaded machine too: events
		// still in the transport's buffers are lost with the stream.
		m.DeferredCloseTimeout = durationpb.New(2 * time.Second)
	}))
	var header metadata.MD
	got, err := echo(e.ctx, e.dial(), "hi", grpc.Header(&header))
	if err != nil || got != "echo:hi/" || header.Get("x-proc-h") != nil {
		t.Fatalf("Echo = %q, %v, header %v; want echo:hi/ untouched", got, err, header)
	}
	next := func() *procv3.ProcessingRequest {
		select {
		case r := <-reqs:
			return r
		case <-e.ctx.Done():
			t.Fatal("the processor was not sent the RPC's events")
			return nil
		}
	}
	r := next()
	if !r.GetObservabilityMode() || testutils.ProcHeaderValue(r.GetRequestHeaders().GetHeaders(), ":path") != procEcho {
		t.Fatalf("first request %v, want the request headers marked observability_mode", r)
	}
	if r := next(); !r.GetObservabilityMode() || testutils.ProcString(r.GetRequestBody().GetBody()) != "hi" {
		t.Fatalf("second request %v, want the request message hi marked observability_mode", r)
	}
}

// An immediate response to a message of a stream ends the RPC at once
// with its status, and the application's cancel of a stream ends its
// processing stream.
func TestExtProcClientStreamImmediateAndCancel(t *testing.T) {
	ended := make(chan struct{}, 4)
	each := testutils.ProcessEach(func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if b := r.GetRequestBody(); b != nil && testutils.ProcString(b.GetBody()) == "stop" {
			return []*procv3.ProcessingResponse{testutils.ProcImmediate(codes.Aborted, "stopped mid-stream")}, nil
		}
		return marking(r)
	})
	p, err := testutils.StartProcServer(func(s procv3.ExternalProcessor_ProcessServer) error {
		defer func() { ended <- struct{}{} }()
		return each(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	conn := e.dial()
	desc := &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}

	s, err := conn.NewStream(e.ctx, desc, procStream, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("stop")); err != nil {
		t.Fatal(err)
	}
	err = s.RecvMsg(new(wrapperspb.StringValue))
	if status.Code(err) != codes.Aborted || status.Convert(err).Message() != "stopped mid-stream" {
		t.Fatalf("stream stopped mid-way: %v, want ABORTED: stopped mid-stream", err)
	}
	<-ended

	ctx, cancel := context.WithCancel(e.ctx)
	s, err = conn.NewStream(ctx, desc, procStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-ended:
	case <-e.ctx.Done():
		t.Fatal("the processing stream outlived its cancelled RPC")
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled stream: %v, want CANCELLED", err)
	}
}

// An immediate response to the server's trailers sets the RPC's status
// and, through its headers, its trailers.
func TestExtProcClientImmediateResponseToTrailers(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetResponseTrailers() != nil {
			im := testutils.ProcImmediate(codes.DataLoss, "rewritten at the trailers")
			im.GetImmediateResponse().Headers = testutils.ProcSetHeaders("x-imm", "1")
			return []*procv3.ProcessingResponse{im}, nil
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
	}))
	var trailer metadata.MD
	_, err := echo(e.ctx, e.dial(), "hi", grpc.Trailer(&trailer))
	if status.Code(err) != codes.DataLoss || status.Convert(err).Message() != "rewritten at the trailers" {
		t.Fatalf("%v, want DATA_LOSS: rewritten at the trailers", err)
	}
	if trailer.Get("x-imm") == nil || trailer.Get("x-srv-t") == nil {
		t.Errorf("trailers %v, want the server's x-srv-t with the immediate response's x-imm", trailer)
	}
}

// A processor that gives no response message for an RPC whose server
// does not stream (here, client streaming) fails it with INTERNAL, as it
// does a unary RPC: the application is owed exactly one.
func TestExtProcClientNoResponseMessage(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetResponseBody() != nil {
			return nil, nil // dropped
		}
		return marking(r)
	})
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	desc := &grpc.StreamDesc{StreamName: "Stream", ClientStreams: true}
	s, err := e.dial().NewStream(e.ctx, desc, procStream, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Internal {
		t.Fatalf("RecvMsg: %v, want INTERNAL for the missing response", err)
	}
}
