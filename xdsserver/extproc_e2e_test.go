package xdsserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// The external processing filter (gRFC A93) on an xDS-enabled server,
// configured by go-control-plane's server, calling a fake processor
// (testutils.ProcServer) that each test scripts.

// The processor sees the client's headers (with :path, and the
// attributes configured) and its changes reach the handler: a header set,
// one removed; it changes the server's headers and trailers too, which
// the client gets.
func TestExtProcHeadersMutated(t *testing.T) {
	seen := make(chan *procv3.ProcessingRequest, 64)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		seen <- r
		switch {
		case r.GetRequestHeaders() != nil:
			m := testutils.ProcSetHeaders("x-proc", "yes")
			m.RemoveHeaders = []string{"x-drop"}
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(m)}, nil
		case r.GetResponseHeaders() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(testutils.ProcSetHeaders("x-resp", "changed"))}, nil
		case r.GetResponseTrailers() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcTrailers(testutils.ProcSetHeaders("x-trl", "t"))}, nil
		}
		return nil, nil
	})
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
		m.RequestAttributes = []string{"request.path", "source.address"}
	}), procRoutes(nil))
	conn := e.dial()

	ctx := metadata.AppendToOutgoingContext(e.ctx, "x-drop", "d", "x-keep", "k")
	var hdr, trl metadata.MD
	got, err := echo(ctx, conn, "x-proc", grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil || got != "yes" {
		t.Fatalf("the handler saw x-proc %q (err %v), want yes", got, err)
	}
	if got, err := echo(ctx, conn, "x-drop"); err != nil || got != "" {
		t.Fatalf("the handler saw x-drop %q (err %v), want it removed", got, err)
	}
	if got, err := echo(ctx, conn, "x-keep"); err != nil || got != "k" {
		t.Fatalf("the handler saw x-keep %q (err %v), want k", got, err)
	}
	if hdr.Get("x-resp") == nil || hdr.Get("x-resp")[0] != "changed" || trl.Get("x-trl") == nil || trl.Get("x-trl")[0] != "t" {
		t.Fatalf("the client got headers %v, trailers %v; want x-resp: changed, x-trl: t", hdr, trl)
	}
	first := <-seen
	h := first.GetRequestHeaders().GetHeaders()
	if testutils.ProcHeaderValue(h, ":path") != echoMethod || testutils.ProcHeaderValue(h, "x-drop") != "d" {
		t.Errorf("the processor saw client headers %v", h)
	}
	attrs := first.GetAttributes()["envoy.filters.http.ext_proc"].GetFields()
	if attrs["request.path"].GetStringValue() != echoMethod || attrs["source.address"].GetStringValue() != "127.0.0.1" {
		t.Errorf("attributes %v", attrs)
	}
	if first.GetProtocolConfig() == nil {
		t.Errorf("the first message has no protocol_config")
	}
	var trailers *procv3.ProcessingRequest
	for trailers == nil {
		if r := <-seen; r.GetResponseTrailers() != nil {
			trailers = r
		}
	}
	if testutils.ProcHeaderValue(trailers.GetResponseTrailers().GetTrailers(), "grpc-status") != "0" {
		t.Errorf("the processor saw trailers %v, want grpc-status 0", trailers.GetResponseTrailers().GetTrailers())
	}
}

// In GRPC body mode the handler gets the processor's messages, and the
// client the processor's replies: for a unary RPC (its request and
// response each replaced) and a bidirectional stream.
func TestExtProcMessagesReplaced(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, marking)
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies), procRoutes(nil))
	conn := e.dial()

	// The client asks for x-up; the processor makes it x-up-proc, whose
	// value the handler answers with, and wraps the answer.
	ctx := metadata.AppendToOutgoingContext(e.ctx, "x-up", "wrong", "x-up-proc", "found")
	if got, err := echo(ctx, conn, "x-up"); err != nil || got != "<found>" {
		t.Fatalf("unary: got %q, %v; want <found>", got, err)
	}

	st, err := conn.NewStream(e.ctx, &greeterDesc.Streams[0], chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "bc"} {
		if err := st.SendMsg(wrapperspb.String(m)); err != nil {
			t.Fatal(err)
		}
		out := new(wrapperspb.StringValue)
		if err := st.RecvMsg(out); err != nil {
			t.Fatal(err)
		}
		if want := "<" + m + "-proc>"; out.GetValue() != want {
			t.Fatalf("chat: sent %q, got %q, want %q", m, out.GetValue(), want)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		t.Fatalf("chat after the half-close: %v, want the stream's OK end", err)
	}
}

// An immediate response ends the RPC with its grpc_status and details,
// before the handler runs when it answers the client's headers, and with
// the status it sets when it answers the trailers.
func TestExtProcImmediateResponse(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			if testutils.ProcHeaderValue(r.GetRequestHeaders().GetHeaders(), ":path") == sayHello {
				return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
					GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.PermissionDenied)}, Details: "go away"}}}}, nil
			}
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
		case r.GetResponseTrailers() != nil:
			return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
				GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.DataLoss)}, Details: "lost", Headers: testutils.ProcSetHeaders("x-why", "because")}}}}, nil
		}
		return nil, nil
	})
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode = &extprocv3.ProcessingMode{ResponseHeaderMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SEND}
	}), procRoutes(nil))
	conn := e.dial()
	err := call(e.ctx, conn, sayHello)
	if s := status.Convert(err); s.Code() != codes.PermissionDenied || s.Message() != "go away" {
		t.Fatalf("SayHello: %v, want PermissionDenied: go away", err)
	}
	var trl metadata.MD
	err = call(e.ctx, conn, sayBye, grpc.Trailer(&trl))
	if s := status.Convert(err); s.Code() != codes.DataLoss || s.Message() != "lost" || trl.Get("x-why") == nil {
		t.Fatalf("SayBye: %v with trailers %v, want DataLoss: lost and x-why", err, trl)
	}
}

// A processor that cannot be reached fails the RPC with INTERNAL, or with
// failure_mode_allow lets it through untouched.
func TestExtProcUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := "passthrough:///" + lis.Addr().String()
	lis.Close() // nothing listens there now
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "deny", true: "failure_mode_allow"}[allow], func(t *testing.T) {
			e := procEnv(t, target, testutils.ExtProcFilter(target, func(m *extprocv3.ExternalProcessor) { m.FailureModeAllow = allow }), procRoutes(nil))
			err := call(e.ctx, e.dial(), sayHello)
			if allow && err != nil {
				t.Fatalf("with failure_mode_allow: %v, want the RPC served", err)
			}
			if !allow && status.Code(err) != codes.Internal {
				t.Fatalf("%v, want INTERNAL", err)
			}
		})
	}
}

// A route whose FilterConfig disables the filter is served without the
// processor; an ExtProcPerRoute override's processing_mode replaces the
// filter's on its route.
func TestExtProcPerRoute(t *testing.T) {
	seen := make(chan string, 64)
	p, streams := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			seen <- "request_headers"
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
		case r.GetResponseHeaders() != nil:
			seen <- "response_headers"
			return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(testutils.ProcSetHeaders("x-resp", "p"))}, nil
		}
		return nil, nil
	})
	filter := testutils.ExtProcFilter(p.Target(), nil)
	t.Run("disabled", func(t *testing.T) {
		e := procEnv(t, p.Target(), filter, procRoutes(testutils.MarshalAny(&routev3.FilterConfig{Disabled: true})))
		conn := e.dial()
		if err := call(e.ctx, conn, sayBye); err != nil {
			t.Fatal(err)
		}
		if n := streams.Load(); n != 0 {
			t.Fatalf("%d processing streams for a route that disables the filter, want 0", n)
		}
		if err := call(e.ctx, conn, sayHello); err != nil || streams.Load() != 1 {
			t.Fatalf("SayHello: %v with %d streams, want 1", err, streams.Load())
		}
		if a, b := <-seen, <-seen; a != "request_headers" || b != "response_headers" {
			t.Fatalf("SayHello's events: %s, %s", a, b)
		}
	})
	t.Run("overrides", func(t *testing.T) {
		override := testutils.MarshalAny(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
			ProcessingMode: &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SKIP},
		}}})
		e := procEnv(t, p.Target(), filter, procRoutes(override))
		var hdr metadata.MD
		if err := call(e.ctx, e.dial(), sayBye, grpc.Header(&hdr)); err != nil {
			t.Fatal(err)
		}
		if got := <-seen; got != "response_headers" || hdr.Get("x-resp") == nil {
			t.Fatalf("first event %s, response headers %v; want response_headers only (request_header_mode SKIP), and x-resp", got, hdr)
		}
	})
}

// A change gRFC A102 forbids (a grpc- header, host, a pseudo-header)
// fails the processing stream: the RPC fails with INTERNAL, or with
// failure_mode_allow goes on with its headers unchanged.
func TestExtProcForbiddenMutation(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetRequestHeaders() != nil {
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(testutils.ProcSetHeaders("x-proc", "yes", "grpc-timeout", "1n"))}, nil
		}
		return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
	})
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "deny", true: "failure_mode_allow"}[allow], func(t *testing.T) {
			e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) { m.FailureModeAllow = allow }), procRoutes(nil))
			got, err := echo(e.ctx, e.dial(), "x-proc")
			if !allow {
				if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "grpc-timeout") {
					t.Fatalf("%v, want INTERNAL naming grpc-timeout", err)
				}
				return
			}
			if err != nil || got != "" {
				t.Fatalf("the handler saw x-proc %q (err %v), want the headers unchanged", got, err)
			}
		})
	}
}

// The GrpcService's timeout bounds the processing stream (gRFC A102): a
// processor that never answers fails the RPC with INTERNAL once it
// passes.
func TestExtProcTimeout(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) { return nil, nil })
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.GrpcService.Timeout = durationpb.New(100 * time.Millisecond)
	}), procRoutes(nil))
	if err := call(e.ctx, e.dial(), sayHello); status.Code(err) != codes.Internal {
		t.Fatalf("%v, want INTERNAL", err)
	}
}

// In observability mode the processor hears every event, marked so, and
// the RPC goes on without waiting for it.
func TestExtProcObservabilityMode(t *testing.T) {
	seen := make(chan *procv3.ProcessingRequest, 64)
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		seen <- r
		return nil, nil // never answers
	})
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		testutils.ProcGRPCBodies(m)
		m.ObservabilityMode = true
		// Long enough for every event to reach the processor before the
		// stream closes (the half-close at the RPC's end lets it end the
		// stream itself); the server's Stop ends it anyway.
		m.DeferredCloseTimeout = durationpb.New(time.Hour)
	}), procRoutes(nil))
	if got, err := echo(metadata.AppendToOutgoingContext(e.ctx, "x-a", "v"), e.dial(), "x-a"); err != nil || got != "v" {
		t.Fatalf("got %q, %v; want v", got, err)
	}
	var kinds []string
	for len(kinds) == 0 || kinds[len(kinds)-1] != "response_trailers" {
		var r *procv3.ProcessingRequest
		select {
		case r = <-seen:
		case <-e.ctx.Done():
			t.Fatalf("the processor heard %v, and nothing more", kinds)
		}
		if !r.GetObservabilityMode() {
			t.Errorf("%v not marked observability_mode", r)
		}
		switch {
		case r.GetRequestHeaders() != nil:
			kinds = append(kinds, "request_headers")
		case r.GetRequestBody() != nil:
			kinds = append(kinds, "request_body")
		case r.GetResponseHeaders() != nil:
			kinds = append(kinds, "response_headers")
		case r.GetResponseBody() != nil:
			if v := bodyValue(t, r.GetResponseBody()); v != "v" {
				t.Errorf("response body %q, want v", v)
			}
			kinds = append(kinds, "response_body")
		case r.GetResponseTrailers() != nil:
			kinds = append(kinds, "response_trailers")
		}
	}
	// The request's message, then its half-close.
	if got, want := strings.Join(kinds, ","), "request_headers,request_body,request_body,response_headers,response_body,response_trailers"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}

// An immediate response in answer to a client message of a stream ends
// the stream with its status while the handler waits for the message.
func TestExtProcImmediateResponseMidStream(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
		case r.GetRequestBody() != nil:
			return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
				GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.Aborted)}, Details: "enough"}}}}, nil
		}
		return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
	})
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_GRPC
	}), procRoutes(nil))
	err := chat(e.ctx, e.dial())
	if s := status.Convert(err); s.Code() != codes.Aborted || s.Message() != "enough" {
		t.Fatalf("%v, want Aborted: enough", err)
	}
}

// Two processing filters around RBAC: RBAC, and the second filter, see
// the first one's header change; the response's headers go through the
// second filter, then the first. An RPC RBAC denies ends as Trailers-Only:
// the first filter's processor hears response headers with end_of_stream
// and no trailers event (which it asks for); the second filter never
// starts.
func TestExtProcChainAndTrailersOnly(t *testing.T) {
	type event struct {
		filter string
		kind   string
		eos    bool
	}
	events := make(chan event, 64)
	p, err := testutils.StartProcServer(func(s procv3.ExternalProcessor_ProcessServer) error {
		filter := ""
		for {
			r, err := s.Recv()
			if err != nil {
				return nil
			}
			var resp *procv3.ProcessingResponse
			switch {
			case r.GetRequestHeaders() != nil:
				// The second filter's stream sees the first's change.
				filter, resp = "first", testutils.ProcRequestHeaders(testutils.ProcSetHeaders("x-proc", "yes"))
				if testutils.ProcHeaderValue(r.GetRequestHeaders().GetHeaders(), "x-proc") == "yes" {
					filter, resp = "second", testutils.ProcRequestHeaders(nil)
				}
				events <- event{filter, "request_headers", false}
			case r.GetResponseHeaders() != nil:
				events <- event{filter, "response_headers", r.GetResponseHeaders().GetEndOfStream()}
				resp = testutils.ProcResponseHeaders(testutils.ProcSetHeaders("x-order", filter))
			case r.GetResponseTrailers() != nil:
				events <- event{filter, "response_trailers", false}
				resp = testutils.ProcTrailers(nil)
			default:
				events <- event{filter, "other", false}
				continue
			}
			if err := s.Send(resp); err != nil {
				return err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	rbac := rbacWith(&rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{
		Action: rbacv3.RBAC_ALLOW,
		Policies: map[string]*rbacv3.Policy{"hello-with-x-proc": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{
				{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{Name: "x-proc",
					HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "yes"}}}},
				{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{
					Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: sayHello}}}}}},
			}}}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}},
	}})
	second := testutils.ExtProcFilter(p.Target(), nil)
	second.Name = "proc-2"
	// The first filter asks for trailers too: a Trailers-Only response
	// has none to send it.
	first := testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
	})
	e := procEnvChain(t, p.Target(), procRoutes(nil), first, rbac, second)
	conn := e.dial()
	next := func() event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-e.ctx.Done():
			t.Fatal("no event")
			return event{}
		}
	}

	var hdr metadata.MD
	if err := call(e.ctx, conn, sayHello, grpc.Header(&hdr)); err != nil {
		t.Fatalf("SayHello: %v, want RBAC to see the processor's x-proc", err)
	}
	if got := strings.Join(hdr.Get("x-order"), ","); got != "second,first" {
		t.Errorf("response header x-order %q, want second,first", got)
	}
	for range 5 {
		next() // both filters' request and response headers, the first's trailers
	}

	err = call(e.ctx, conn, sayBye)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("SayBye: %v, want PERMISSION_DENIED", err)
	}
	want := []event{{"first", "request_headers", false}, {"first", "response_headers", true}}
	for _, w := range want {
		if got := next(); got != w {
			t.Fatalf("event %+v, want %+v", got, w)
		}
	}
	select {
	case ev := <-events:
		t.Fatalf("unexpected event %+v after the Trailers-Only response", ev)
	default:
	}
}

// request_drain: the processor answers the first client message and asks
// for a drain; the filter half-closes its stream, the processor ends it
// with OK, and the stream's later messages go on untouched.
func TestExtProcDrain(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			return []*procv3.ProcessingResponse{testutils.ProcRequestHeaders(nil)}, nil
		case r.GetRequestBody() != nil:
			v := testutils.ProcString(r.GetRequestBody().GetBody())
			resp := testutils.ProcBody(true, v+"-proc", false, false)
			resp.RequestDrain = true
			return []*procv3.ProcessingResponse{resp}, nil
		}
		return []*procv3.ProcessingResponse{testutils.ProcResponseHeaders(nil)}, nil
	})
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_GRPC
	}), procRoutes(nil))
	st, err := e.dial().NewStream(e.ctx, &greeterDesc.Streams[0], chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ send, want string }{{"a", "a-proc"}, {"b", "b"}, {"c", "c"}} {
		if err := st.SendMsg(wrapperspb.String(tc.send)); err != nil {
			t.Fatal(err)
		}
		out := new(wrapperspb.StringValue)
		if err := st.RecvMsg(out); err != nil {
			t.Fatalf("after sending %q: %v", tc.send, err)
		}
		if out.GetValue() != tc.want {
			t.Fatalf("sent %q, got %q, want %q", tc.send, out.GetValue(), tc.want)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the half-close: %v, want the stream's OK end", err)
	}
}

// The RPC's deadline bounds the wait for the processor: a processor that
// never answers fails the RPC with DEADLINE_EXCEEDED at the client's
// deadline, and the filter then ends its processing stream, rather than
// wait on for the answer.
func TestExtProcRPCDeadline(t *testing.T) {
	ended := make(chan error, 1)
	p, err := testutils.StartProcServer(func(s procv3.ExternalProcessor_ProcessServer) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		_, err := s.Recv() // never answered: ends when the filter ends the stream
		ended <- err
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), nil), procRoutes(nil))
	ctx, cancel := context.WithTimeout(e.ctx, 200*time.Millisecond)
	defer cancel()
	if err := call(ctx, e.dial(), sayHello); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("%v, want DEADLINE_EXCEEDED", err)
	}
	select {
	case err := <-ended:
		if status.Code(err) != codes.Canceled {
			t.Errorf("the processing stream ended with %v, want CANCELLED", err)
		}
	case <-e.ctx.Done():
		t.Fatal("the processing stream outlived its RPC")
	}
}

// compressions records the compression of each response's headers a
// client hears.
type compressions chan string

func (c compressions) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c compressions) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok && h.Client {
		c <- h.Compression
	}
}
func (c compressions) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c compressions) HandleConn(context.Context, stats.ConnStats)                       {}

// The processor's messages are sent uncompressed (gRFC A93), where the
// server would otherwise answer a gzip client with gzip.
func TestExtProcRepliesUncompressed(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, marking)
	noBodies := testutils.MarshalAny(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
		ProcessingMode: &extprocv3.ProcessingMode{},
	}}})
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies), procRoutes(noBodies))
	got := make(compressions, 4)
	conn, err := grpc.NewClient(e.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(got))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct{ method, want string }{{sayBye, "gzip"}, {sayHello, "identity"}} {
		out := new(wrapperspb.StringValue)
		if err := conn.Invoke(e.ctx, tc.method, wrapperspb.String("hi"), out, grpc.UseCompressor(gzip.Name)); err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		if c := <-got; c != tc.want {
			t.Errorf("%s answered with compression %q, want %q", tc.method, c, tc.want)
		}
	}
}
