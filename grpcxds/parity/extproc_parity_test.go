package parity_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/testutils"
)

// grpc-go v1.85 runs the external processing filter (gRFC A93) on its
// clients only when this is "true" when it starts; goxds always does.
const extProcEnv = "GRPC_EXPERIMENTAL_XDS_EXT_PROC_ON_CLIENT"

// procCase is one comparison: the filter's configuration (and a route's
// override), the processor's answers, and the RPCs the application makes.
type procCase struct {
	name    string
	filter  func(m *extprocv3.ExternalProcessor)
	special *anypb.Any // the typed_per_filter_config of x-route: special's route
	answer  func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error)
	target  string // "closed": a target nothing listens on; "": the processor's
	streams int    // processing streams each client opens
	rpcs    func(ctx context.Context, conn *grpc.ClientConn) []string
	// raw compares the headers the processor is told as they are, rawEnd
	// how its streams end; else both are normalized (procLine,
	// procLog.process) and these cases show the differences.
	raw, rawEnd bool
	// differs, when set, says why goxds and grpc-go are expected to
	// differ in this case, and which follows the gRFC; differsIn names
	// the views that differ ("application", "processor", "backend"): the
	// others must still be the same.
	differs   string
	differsIn []string
	// grpcGoRace, when set, says how what grpc-go's application gets
	// depends on timing in this case, so that it is not compared: goxds's
	// must be one of wantApp, the outcomes the gRFC allows; the other
	// views are compared.
	grpcGoRace string
	wantApp    [][]string
}

// gRFC A93 on both clients: the same resources from go-control-plane's
// server, the same processor and the same backend, and each channel
// making the same RPCs; what the processor was sent (each event in
// order, its headers, messages, flags, attributes and protocol
// configuration), what the backend got (metadata and messages), and what
// the application got (status, headers, trailers, messages) are the same
// through goxds and through grpc-go's xds resolver, or differ as the case
// says. grpc-go reads its switch once, at init, so the comparison runs in
// a child process of this test binary started with the switch on.
func TestParityExtProc(t *testing.T) {
	if os.Getenv(extProcEnv) != "true" {
		ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestParityExtProc$", "-test.v")
		cmd.Env = append(os.Environ(), extProcEnv+"=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with %s=true: %v\n%s", extProcEnv, err, out)
		}
		t.Logf("with %s=true:\n%s", extProcEnv, out)
		return
	}
	for _, tc := range append(procCases(), moreProcCases()...) {
		t.Run(tc.name, func(t *testing.T) { testParityExtProc(t, tc) })
	}
}

func testParityExtProc(t *testing.T, tc procCase) {
	log, ps := startProcLog(t, tc.answer, tc.raw, tc.rawEnd)
	target := ps.Target()
	if tc.target == "closed" {
		target = closedTarget(t)
	}
	b := startProcBackend(t)
	p := procPair(t)
	p.update(procTree(t, b, testutils.ExtProcFilter(target, tc.filter), tc.special))
	type view struct{ app, proc, backend []string }
	views := map[string]view{}
	for _, name := range []string{"goxds", "grpc-go"} {
		app := tc.rpcs(p.ctx, p.conns[name])
		views[name] = view{app: app, proc: log.take(p.ctx, t, tc.streams), backend: b.take(p.ctx, t)}
	}
	g, o := views["goxds"], views["grpc-go"]
	var differ []string
	for _, part := range []struct {
		name          string
		goxds, grpcGo []string
	}{{"application", g.app, o.app}, {"processor", g.proc, o.proc}, {"backend", g.backend, o.backend}} {
		if !slices.Equal(part.goxds, part.grpcGo) {
			differ = append(differ, part.name)
		}
	}
	show := func(v view) string {
		return "\n  application:\n    " + strings.Join(v.app, "\n    ") + "\n  processor:\n    " + strings.Join(v.proc, "\n    ") +
			"\n  backend:\n    " + strings.Join(v.backend, "\n    ")
	}
	switch {
	case tc.grpcGoRace != "":
		if !slices.ContainsFunc(tc.wantApp, func(w []string) bool { return slices.Equal(g.app, w) }) {
			t.Errorf("goxds's application got %q, want one of %q", g.app, tc.wantApp)
		}
		if len(differ) > 0 && (len(differ) > 1 || differ[0] != "application") {
			t.Errorf("%v differ\ngoxds:%s\ngrpc-go:%s", differ, show(g), show(o))
		}
		t.Logf("grpc-go's application not compared (%s):\ngoxds:%s\ngrpc-go:%s", tc.grpcGoRace, show(g), show(o))
	case !slices.Equal(differ, tc.differsIn) && tc.differs != "":
		t.Errorf("known difference (%s) expected in %v, found in %v; change the note:\ngoxds:%s\ngrpc-go:%s", tc.differs, tc.differsIn, differ, show(g), show(o))
	case len(differ) > 0 && tc.differs == "":
		t.Errorf("%v differ\ngoxds:%s\ngrpc-go:%s", differ, show(g), show(o))
	case len(differ) > 0:
		t.Logf("differs as expected (%s):\ngoxds:%s\ngrpc-go:%s", tc.differs, show(g), show(o))
	default:
		t.Logf("both:%s", show(g))
	}
}

// answers is a processor answering each event with what the map gives
// its kind (none: the event's plain CONTINUE), messages marked as
// testutils.ProcMarking does.
func answers(m map[string]*procv3.ProcessingResponse) func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
	marking := testutils.ProcMarking(nil, nil, nil)
	return func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		kind := eventKind(r)
		if a, ok := m[kind]; ok {
			return []*procv3.ProcessingResponse{a}, nil
		}
		return marking(r)
	}
}

// eventKind is the name of r's event.
func eventKind(r *procv3.ProcessingRequest) string {
	switch {
	case r.GetRequestHeaders() != nil:
		return "request_headers"
	case r.GetResponseHeaders() != nil:
		return "response_headers"
	case r.GetResponseTrailers() != nil:
		return "response_trailers"
	case r.GetRequestBody() != nil:
		return "request_body"
	case r.GetResponseBody() != nil:
		return "response_body"
	}
	return ""
}

// echoes makes Echo RPCs of vs, with the x- metadata kv (key, value...).
func echoes(kv []string, vs ...string) func(ctx context.Context, conn *grpc.ClientConn) []string {
	return func(ctx context.Context, conn *grpc.ClientConn) []string {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		var out []string
		for _, v := range vs {
			out = append(out, appEcho(ctx, conn, v))
		}
		return out
	}
}

// setHeaders is a mutation setting each key to its value (key, value,
// key, value...) in both of HeaderValue's fields: gRFC A102 reads
// raw_value, grpc-go v1.85 value (the case "raw_value only" shows it), so
// that the other cases compare the rest.
func setHeaders(kv ...string) *procv3.HeaderMutation {
	m := testutils.ProcSetHeaders(kv...)
	for _, o := range m.SetHeaders {
		o.Header.Value = string(o.Header.RawValue)
	}
	return m
}

// closedTarget is a target nothing listens on.
func closedTarget(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return "passthrough:///" + addr
}

// unaryHeadersDiffer: grpc-go's grpc.Header and grpc.Trailer call
// options read the headers and trailers of the attempt's transport
// stream, under its filter's interceptor, so on a unary RPC (Invoke) the
// application gets the server's, not the processor's changes; on a
// stream (ClientStream.Header, Trailer) it gets the changes. gRFC A93:
// the filter holds the headers and trailers until the processor answers
// and applies its mutations "before allowing them to proceed on the data
// plane RPC"; goxds does so for both.
const unaryHeadersDiffer = "grpc-go's unary RPCs (grpc.Header, grpc.Trailer) miss the processor's header and trailer mutations, which the gRFC applies"

func procCases() []procCase {
	headerMutation := setHeaders("x-proc", "in")
	headerMutation.RemoveHeaders = []string{"x-drop"}
	sendTrailers := func(m *extprocv3.ExternalProcessor) {
		m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
	}
	return []procCase{
		{
			name: "client headers mutated",
			filter: func(m *extprocv3.ExternalProcessor) {
				m.RequestAttributes = []string{"request.path", "request.method"}
			},
			answer: answers(map[string]*procv3.ProcessingResponse{
				"request_headers":  testutils.ProcRequestHeaders(headerMutation),
				"response_headers": testutils.ProcResponseHeaders(setHeaders("x-proc-h", "1")),
			}),
			streams: 2,
			rpcs: func(ctx context.Context, conn *grpc.ClientConn) []string {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-app", "a", "x-drop", "d")
				return []string{appEcho(ctx, conn, "hi"), appChat(ctx, conn, "a")}
			},
			differs:   unaryHeadersDiffer,
			differsIn: []string{"application"},
		},
		{
			name:    "server headers and trailers SEND",
			filter:  sendTrailers,
			answer:  answers(map[string]*procv3.ProcessingResponse{"response_trailers": testutils.ProcTrailers(setHeaders("x-proc-t", "1")), "response_headers": testutils.ProcResponseHeaders(setHeaders("x-proc-h", "1"))}),
			streams: 4,
			// "fail": a Trailers-Only response.
			rpcs: func(ctx context.Context, conn *grpc.ClientConn) []string {
				return []string{appEcho(ctx, conn, "hi"), appEcho(ctx, conn, "fail"), appChat(ctx, conn, "a"), appChat(ctx, conn, "fail")}
			},
			differs:   unaryHeadersDiffer,
			differsIn: []string{"application"},
		},
		{
			name:    "GRPC body mode, messages replaced both ways",
			filter:  testutils.ProcGRPCBodies,
			answer:  answers(nil),
			streams: 2,
			rpcs: func(ctx context.Context, conn *grpc.ClientConn) []string {
				return []string{appEcho(ctx, conn, "hi"), appChat(ctx, conn, "a", "b")}
			},
		},
		{
			name:    "immediate response to the client headers",
			answer:  answers(map[string]*procv3.ProcessingResponse{"request_headers": testutils.ProcImmediate(codes.PermissionDenied, "stopped")}),
			streams: 1,
			rpcs:    echoes(nil, "hi"),
		},
		{
			// On a stream: grpc-go v1.85's unary RPC writes the
			// grpc.Header call option's target after Invoke has returned
			// (its response loop racing the immediate response; the race
			// detector finds it), and gets the server's trailers or none.
			name:    "immediate response to the server's message",
			filter:  testutils.ProcGRPCBodies,
			answer:  answers(map[string]*procv3.ProcessingResponse{"response_body": testutils.ProcImmediate(codes.ResourceExhausted, "too much")}),
			streams: 1,
			rpcs:    chatting(nil, "a"),
			differs: "the server's headers, which the processor let through before its immediate response, stay the goxds " +
				"stream's Header, as a gRPC stream's stay when it is cancelled after them (the gRFC: the RPC fails \"as if it " +
				"were an out-of-band cancellation\"); grpc-go's stream's Header fails with the status",
			differsIn: []string{"application"},
		},
		{
			name:   "processor unreachable, failure_mode_allow false",
			target: "closed",
			answer: answers(nil),
			rpcs:   echoes(nil, "hi"),
		},
		{
			name:   "processor unreachable, failure_mode_allow true",
			target: "closed",
			filter: func(m *extprocv3.ExternalProcessor) { m.FailureModeAllow = true },
			answer: answers(nil),
			rpcs:   echoes(nil, "hi"),
		},
		{
			name: "observability mode",
			filter: func(m *extprocv3.ExternalProcessor) {
				testutils.ProcGRPCBodies(m)
				m.ObservabilityMode = true
				m.DeferredCloseTimeout = durationpb.New(1e8)
			},
			// Ignored: the filter does not wait for answers.
			answer:  answers(map[string]*procv3.ProcessingResponse{"request_headers": testutils.ProcImmediate(codes.PermissionDenied, "ignored")}),
			streams: 1,
			rpcs:    echoes(nil, "hi"),
		},
		{
			name: "per-route ExtProcPerRoute override",
			special: testutils.MarshalAny(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
				ProcessingMode: &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_GRPC, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP},
			}}}),
			answer:  answers(nil),
			streams: 2,
			rpcs: func(ctx context.Context, conn *grpc.ClientConn) []string {
				return []string{
					appEcho(ctx, conn, "plain"),
					appEcho(metadata.AppendToOutgoingContext(ctx, "x-route", "special"), conn, "special"),
				}
			},
		},
		{
			name:    "per-route disable",
			special: testutils.MarshalAny(&routev3.FilterConfig{Disabled: true}),
			answer:  answers(nil),
			streams: 1,
			rpcs: func(ctx context.Context, conn *grpc.ClientConn) []string {
				return []string{
					appEcho(ctx, conn, "plain"),
					appEcho(metadata.AppendToOutgoingContext(ctx, "x-route", "special"), conn, "special"),
				}
			},
		},
	}
}
