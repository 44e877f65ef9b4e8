package parity_test

import (
	"context"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// The cases of TestParityExtProc beyond the brief's: the header
// differences the other cases normalize, the stream's end, the
// configuration's other knobs (forward_rules, mutation_rules,
// disable_immediate_response, attributes), an immediate response to the
// trailers, a processor failing mid-RPC, and the drain.

// chatting makes one Chat stream of vs, with the x- metadata kv.
func chatting(kv []string, vs ...string) func(ctx context.Context, conn *grpc.ClientConn) []string {
	return func(ctx context.Context, conn *grpc.ClientConn) []string {
		return []string{appChat(metadata.AppendToOutgoingContext(ctx, kv...), conn, vs...)}
	}
}

func moreProcCases() []procCase {
	return []procCase{
		{
			name: "headers as sent",
			filter: func(m *extprocv3.ExternalProcessor) {
				m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
			},
			answer:  answers(nil),
			raw:     true,
			streams: 2,
			rpcs: func(ctx context.Context, conn *grpc.ClientConn) []string {
				return []string{appChat(ctx, conn, "a"), appChat(ctx, conn, "fail")}
			},
			differs: "goxds tells the processor the request's :method and :path, and the status (grpc-status, grpc-message) in the " +
				"trailers or a Trailers-Only response's headers, as Envoy's filter does; grpc-go sends the metadata alone. " +
				"The gRFC says only that the event \"contains the headers\"",
			differsIn: []string{"processor"},
		},
		{
			name:      "how the stream ends",
			answer:    answers(nil),
			rawEnd:    true,
			streams:   1,
			rpcs:      chatting(nil, "a"),
			differs:   "at the RPC's end goxds cancels the processing stream, grpc-go half-closes it; the gRFC does not say which",
			differsIn: []string{"processor"},
		},
		{
			name: "raw_value only",
			answer: answers(map[string]*procv3.ProcessingResponse{
				"request_headers":  testutils.ProcRequestHeaders(testutils.ProcSetHeaders("x-proc", "in")),
				"response_headers": testutils.ProcResponseHeaders(testutils.ProcSetHeaders("x-proc-h", "1")),
			}),
			streams: 1,
			rpcs:    chatting(nil, "a"),
			differs: "gRFC A102 reads a HeaderValue's raw_value (value only when raw_value is unset), goxds too; " +
				"grpc-go v1.85 reads value, and sets the headers empty",
			differsIn: []string{"application", "backend"},
		},
		{
			name: "forward_rules",
			filter: func(m *extprocv3.ExternalProcessor) {
				m.ForwardRules = &extprocv3.HeaderForwardingRules{
					AllowedHeaders:    &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-"}}}},
					DisallowedHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}},
				}
			},
			answer:  answers(nil),
			streams: 1,
			rpcs:    chatting([]string{"x-app", "a", "x-secret", "s", "y-other", "o"}, "a"),
		},
		{
			name: "mutation_rules: a disallowed change is an error",
			filter: func(m *extprocv3.ExternalProcessor) {
				m.MutationRules = &mutationv3.HeaderMutationRules{
					DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-bad.*"},
					DisallowIsError:    wrapperspb.Bool(true),
				}
			},
			answer:  answers(map[string]*procv3.ProcessingResponse{"request_headers": testutils.ProcRequestHeaders(setHeaders("x-bad", "1"))}),
			streams: 1,
			rpcs:    chatting(nil, "a"),
		},
		{
			name: "mutation_rules: a disallowed change is ignored",
			filter: func(m *extprocv3.ExternalProcessor) {
				m.MutationRules = &mutationv3.HeaderMutationRules{DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-bad.*"}}
			},
			answer:  answers(map[string]*procv3.ProcessingResponse{"request_headers": testutils.ProcRequestHeaders(setHeaders("x-bad", "1", "x-good", "1"))}),
			streams: 1,
			rpcs:    chatting(nil, "a"),
		},
		{
			name:    "disable_immediate_response",
			filter:  func(m *extprocv3.ExternalProcessor) { m.DisableImmediateResponse = true },
			answer:  answers(map[string]*procv3.ProcessingResponse{"request_headers": testutils.ProcImmediate(codes.PermissionDenied, "stopped")}),
			streams: 1,
			rpcs:    chatting(nil, "a"),
		},
		{
			name: "immediate response to the trailers",
			filter: func(m *extprocv3.ExternalProcessor) {
				m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
			},
			answer: answers(map[string]*procv3.ProcessingResponse{"response_trailers": {Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
				GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.Aborted)}, Details: "at the trailers", Headers: setHeaders("x-imm", "1")}}}}),
			streams: 1,
			rpcs:    chatting(nil, "a"),
		},
		{
			name: "immediate response to the trailers, unary",
			filter: func(m *extprocv3.ExternalProcessor) {
				m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
			},
			answer: answers(map[string]*procv3.ProcessingResponse{"response_trailers": {Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
				GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.Aborted)}, Details: "at the trailers", Headers: setHeaders("x-imm", "1")}}}}),
			streams:   1,
			rpcs:      echoes(nil, "hi"),
			differs:   unaryHeadersDiffer,
			differsIn: []string{"application"},
		},
		{
			name:    "the processor fails the stream mid-RPC",
			answer:  failAt("response_headers"),
			streams: 1,
			rpcs:    chatting(nil, "a"),
			grpcGoRace: "grpc-go v1.85 hands the application the server's message that followed the headers the processor " +
				"never let through (the gRFC holds the headers until the processor answers; goxds fails the RPC before " +
				"anything after them), and then fails the RPC with INTERNAL in most runs, in some ends it OK with no headers",
			// The server's trailers are the stream's if they came before
			// the failure, as for a cancelled RPC.
			wantApp: [][]string{
				{`Chat(["a"]): [] Internal: (a side-channel error); header []; trailer []`},
				{`Chat(["a"]): [] Internal: (a side-channel error); header []; trailer [x-srv-t: 1]`},
			},
		},
		{
			name:    "the processor fails the stream mid-RPC, failure_mode_allow true",
			filter:  func(m *extprocv3.ExternalProcessor) { m.FailureModeAllow = true },
			answer:  failAt("response_headers"),
			streams: 1,
			rpcs:    chatting(nil, "a"),
		},
		{
			name: "request_attributes",
			filter: func(m *extprocv3.ExternalProcessor) {
				testutils.ProcGRPCBodies(m)
				m.RequestAttributes = []string{"request.path", "request.url_path", "request.host", "request.method", "request.headers",
					"request.referer", "request.useragent", "request.id", "request.query"}
			},
			answer:  answers(nil),
			streams: 1,
			rpcs:    chatting([]string{"x-request-id", "r1", "referer", "http://ref"}, "a"),
		},
		{
			name: "response_attributes",
			filter: func(m *extprocv3.ExternalProcessor) {
				testutils.ProcGRPCBodies(m)
				m.ResponseAttributes = []string{"request.path"}
			},
			answer:  answers(nil),
			streams: 1,
			rpcs:    chatting(nil, "a"),
			differs: "gRFC A93 sends response_attributes with the server-to-client events, goxds with the first; " +
				"grpc-go v1.85 parses them and never sends them",
			differsIn: []string{"processor"},
		},
	}
}

// failAt is a processor that answers as answers(nil) does, and fails
// the stream with UNAVAILABLE at the event named kind.
func failAt(kind string) func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
	a := answers(nil)
	return func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if eventKind(r) == kind {
			return nil, status.Error(codes.Unavailable, "the processor fails")
		}
		return a(r)
	}
}
