package parity_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// The pieces of extproc_parity_test.go: a processor that writes down
// what it is sent, a backend that writes down what it gets, and what the
// application got, each as lines to compare.

const (
	procEcho = "/goxds.test.Proc/Echo"
	procChat = "/goxds.test.Proc/Chat"
)

// procLog is a processor's record: each request of each stream as a line,
// and each stream's end.
type procLog struct {
	answer func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error)
	// raw keeps the headers' known differences, rawEnd how the streams
	// end: procLine and process normalize them.
	raw, rawEnd bool

	mu      sync.Mutex
	lines   []string
	streams int // opened since the last take
	open    int
	changed chan struct{} // a stream ended
}

func startProcLog(t *testing.T, answer func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error), raw, rawEnd bool) (*procLog, *testutils.ProcServer) {
	t.Helper()
	l := &procLog{answer: answer, raw: raw, rawEnd: rawEnd, changed: make(chan struct{}, 1)}
	s, err := testutils.StartProcServer(l.process)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return l, s
}

func (l *procLog) process(s procv3.ExternalProcessor_ProcessServer) error {
	l.mu.Lock()
	l.streams++
	l.open++
	n := l.streams
	l.mu.Unlock()
	end := func(how string) {
		if !l.rawEnd && (how == "half-closed" || how == codes.Canceled.String() || how == "send: "+codes.Canceled.String()) {
			how = "half-closed or cancelled" // normalize
		}
		l.mu.Lock()
		l.lines = append(l.lines, fmt.Sprintf("s%d ends: %s", n, how))
		l.open--
		l.mu.Unlock()
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
	// After an immediate response the filter "may cancel the ext_proc
	// stream" (gRFC A93): whether later events still come is timing, and
	// they are not written down.
	immediate := false
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			end("half-closed")
			return nil
		}
		if err != nil {
			end(status.Code(err).String())
			return err
		}
		if !immediate {
			l.mu.Lock()
			l.lines = append(l.lines, fmt.Sprintf("s%d %s", n, procLine(req, l.raw)))
			l.mu.Unlock()
		}
		answers, err := l.answer(req)
		if err != nil {
			end("the processor fails it: " + status.Code(err).String())
			return err
		}
		for _, r := range answers {
			immediate = immediate || r.GetImmediateResponse() != nil
			if err := s.Send(r); err != nil {
				end("send: " + status.Code(err).String())
				return err
			}
		}
	}
}

// take waits until n streams have ended and none is open, and returns
// the lines since the last take, each stream's together (in the order
// the streams opened: a stream may still be told of its RPC's end after
// the next has opened).
func (l *procLog) take(ctx context.Context, t *testing.T, n int) []string {
	t.Helper()
	for {
		l.mu.Lock()
		ended := l.streams - l.open
		if ended >= n && l.open == 0 {
			out := l.lines
			l.lines, l.streams = nil, 0
			l.mu.Unlock()
			slices.SortStableFunc(out, func(a, b string) int {
				var na, nb int
				fmt.Sscanf(a, "s%d", &na)
				fmt.Sscanf(b, "s%d", &nb)
				return na - nb
			})
			return out
		}
		l.mu.Unlock()
		select {
		case <-l.changed:
		case <-ctx.Done():
			t.Fatalf("the processor saw %d streams end, want %d", ended, n)
		}
	}
}

// procLine is what the processor is told, in one line: the event, its
// flags, headers (sorted; grpc-timeout's value, which is the time left,
// left out), body, attributes and protocol configuration. Unless raw, it
// is normalized: the known differences of the headers, which a case of
// their own shows, left out (pseudo-headers, grpc-status and
// grpc-message).
func procLine(r *procv3.ProcessingRequest, raw bool) string {
	var b strings.Builder
	headers := func(kind string, h []string, eos bool) {
		fmt.Fprintf(&b, "%s eos=%v %v", kind, eos, h)
	}
	switch {
	case r.GetRequestHeaders() != nil:
		headers("request_headers", headerLines(r.GetRequestHeaders().GetHeaders().GetHeaders(), raw), r.GetRequestHeaders().GetEndOfStream())
	case r.GetResponseHeaders() != nil:
		headers("response_headers", headerLines(r.GetResponseHeaders().GetHeaders().GetHeaders(), raw), r.GetResponseHeaders().GetEndOfStream())
	case r.GetResponseTrailers() != nil:
		fmt.Fprintf(&b, "response_trailers %v", headerLines(r.GetResponseTrailers().GetTrailers().GetHeaders(), raw))
	case r.GetRequestBody() != nil, r.GetResponseBody() != nil:
		kind, body := "request_body", r.GetRequestBody()
		if body == nil {
			kind, body = "response_body", r.GetResponseBody()
		}
		fmt.Fprintf(&b, "%s eos=%v eos_without_message=%v %q", kind, body.GetEndOfStream(), body.GetEndOfStreamWithoutMessage(), testutils.ProcString(body.GetBody()))
	default:
		b.WriteString("no event")
	}
	if a := r.GetAttributes(); len(a) > 0 {
		keys := make([]string, 0, len(a))
		for k, s := range a {
			keys = append(keys, fmt.Sprintf("%s=%v", k, s.AsMap()))
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, " attributes=%v", keys)
	}
	if pc := r.GetProtocolConfig(); pc != nil {
		fmt.Fprintf(&b, " protocol_config=%v/%v", pc.GetRequestBodyMode(), pc.GetResponseBodyMode())
	}
	if r.GetObservabilityMode() {
		b.WriteString(" observability_mode")
	}
	return b.String()
}

func headerLines(hs []*corev3.HeaderValue, raw bool) []string {
	var out []string
	for _, h := range hs {
		k := h.GetKey()
		if !raw && (strings.HasPrefix(k, ":") || k == "grpc-status" || k == "grpc-message") {
			continue
		}
		v := string(h.GetRawValue())
		if h.GetKey() == "grpc-timeout" {
			v = "(time left)"
		}
		out = append(out, h.GetKey()+": "+v)
	}
	sort.Strings(out)
	return out
}

// procBackend serves goxds.test.Proc: Echo answers "echo:" + its request
// with header x-srv-h: 1 and trailer x-srv-t: 1 (a request "fail" fails
// with FAILED_PRECONDITION in a Trailers-Only response); Chat answers each
// message the same way (a first message "fail" fails it so). It writes down the x- metadata and the messages
// of each RPC.
type procBackend struct {
	port    uint32
	mu      sync.Mutex
	lines   []string
	running int           // handlers running
	changed chan struct{} // a handler returned
}

var procDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.Proc",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			b := srv.(*procBackend)
			defer b.start()()
			b.note(ctx, "Echo", in.GetValue())
			if in.GetValue() == "fail" {
				return nil, status.Error(codes.FailedPrecondition, "asked to fail")
			}
			_ = grpc.SetHeader(ctx, metadata.Pairs("x-srv-h", "1"))
			_ = grpc.SetTrailer(ctx, metadata.Pairs("x-srv-t", "1"))
			return wrapperspb.String("echo:" + in.GetValue()), nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Chat", ServerStreams: true, ClientStreams: true,
		Handler: func(srv any, s grpc.ServerStream) error {
			b := srv.(*procBackend)
			defer b.start()()
			var got []string
			defer func() { b.note(s.Context(), "Chat", got...) }()
			for {
				in := new(wrapperspb.StringValue)
				err := s.RecvMsg(in)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				got = append(got, in.GetValue())
				if len(got) == 1 && in.GetValue() == "fail" {
					return status.Error(codes.FailedPrecondition, "asked to fail") // Trailers-Only
				}
				if len(got) == 1 {
					_ = s.SetHeader(metadata.Pairs("x-srv-h", "1"))
					s.SetTrailer(metadata.Pairs("x-srv-t", "1"))
				}
				if err := s.SendMsg(wrapperspb.String("echo:" + in.GetValue())); err != nil {
					return err
				}
			}
		},
	}},
}

func (b *procBackend) note(ctx context.Context, method string, msgs ...string) {
	md, _ := metadata.FromIncomingContext(ctx)
	b.mu.Lock()
	b.lines = append(b.lines, fmt.Sprintf("%s %v %q", method, xMetadata(md), msgs))
	b.mu.Unlock()
}

// start counts a handler running until the function it returns is
// called.
func (b *procBackend) start() func() {
	b.mu.Lock()
	b.running++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.running--
		b.mu.Unlock()
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
}

// take waits until no handler runs (a stream's handler writes its line
// when it returns, which for a cancelled RPC can be after the client has
// its end) and returns the lines since the last take.
func (b *procBackend) take(ctx context.Context, t *testing.T) []string {
	t.Helper()
	for {
		b.mu.Lock()
		if b.running == 0 {
			out := b.lines
			b.lines = nil
			b.mu.Unlock()
			return out
		}
		b.mu.Unlock()
		select {
		case <-b.changed:
		case <-ctx.Done():
			t.Fatal("the backend's handlers did not return")
		}
	}
}

func startProcBackend(t *testing.T) *procBackend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &procBackend{port: uint32(lis.Addr().(*net.TCPAddr).Port), changed: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	srv.RegisterService(&procDesc, b)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return b
}

// xMetadata is md's x- keys, sorted, as "key: values".
func xMetadata(md metadata.MD) []string {
	var out []string
	for k, vs := range md {
		if strings.HasPrefix(k, "x-") {
			out = append(out, k+": "+strings.Join(vs, ","))
		}
	}
	sort.Strings(out)
	return out
}

// appEcho makes one Echo RPC of v and says what the application got.
func appEcho(ctx context.Context, conn *grpc.ClientConn, v string) string {
	var header, trailer metadata.MD
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, procEcho, wrapperspb.String(v), out, grpc.Header(&header), grpc.Trailer(&trailer), grpc.WaitForReady(true))
	return fmt.Sprintf("Echo(%q): %q %v; header %v; trailer %v", v, out.GetValue(), statusLine(err), xMetadata(header), xMetadata(trailer))
}

// appChat sends vs on a Chat stream, reading the answer to each, then
// half-closes and reads to the end; it says what the application got.
func appChat(ctx context.Context, conn *grpc.ClientConn, vs ...string) string {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, procChat, grpc.WaitForReady(true))
	if err != nil {
		// goxds waits in NewStream for the processor's answer to the
		// client's headers, as it does for a unary RPC, and a stream the
		// filter fails there fails at NewStream; grpc-go's fails at its
		// first RecvMsg. Both are how gRPC fails a stream before it is
		// sent, and the same to an application that checks both.
		return fmt.Sprintf("Chat(%q): [] %v; header []; trailer []", vs, statusLine(err))
	}
	var got []string
	for _, v := range vs {
		if err := s.SendMsg(wrapperspb.String(v)); err != nil {
			break // RecvMsg says why
		}
		out := new(wrapperspb.StringValue)
		if err := s.RecvMsg(out); err != nil {
			break
		}
		got = append(got, out.GetValue())
	}
	_ = s.CloseSend()
	for {
		out := new(wrapperspb.StringValue)
		if err = s.RecvMsg(out); err != nil {
			break
		}
		got = append(got, out.GetValue())
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	header, _ := s.Header()
	return fmt.Sprintf("Chat(%q): %q %v; header %v; trailer %v", vs, got, statusLine(err), xMetadata(header), xMetadata(s.Trailer()))
}

// statusLine is err's code and message; the message of an INTERNAL
// failure (the filter's), or one that carries another error's (the
// processor's channel's), is each client's own words, and only its code
// is kept.
func statusLine(err error) string {
	st := status.Convert(err)
	if st.Code() == codes.OK {
		return "OK"
	}
	if st.Code() == codes.Internal || strings.Contains(st.Message(), "rpc error:") {
		return st.Code().String() + ": (a side-channel error)"
	}
	return st.Code().String() + ": " + st.Message()
}

// procPair is a management server, and a channel to the listener through
// each resolver, the bootstraps marking the server trusted_xds_server
// (so that the GrpcService's own credentials are used, gRFC A102).
func procPair(t *testing.T) *pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	p := &pair{t: t, ctx: ctx, ms: ms, conns: make(map[string]*grpc.ClientConn)}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "goxds",
		ServerFeatures: []string{bootstrap.FeatureTrustedXDSServer}}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, Logger: quietLogger, ClientOptions: client.Options{Logger: quietLogger}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p.dial("goxds", grpcxds.DefaultScheme, b.DialOptions()...)
	rb, err := xds.NewXDSResolverWithConfigForTesting(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(), NodeID: "grpc-go", ServerFeatures: []string{"xds_v3", bootstrap.FeatureTrustedXDSServer},
	}))
	if err != nil {
		t.Fatal(err)
	}
	p.dial("grpc-go", "xds", grpc.WithResolvers(rb))
	return p
}

// procTree is the listener with filter before its router, every RPC
// routed to cluster C of backend b; an RPC with header x-route: special
// takes a route whose typed_per_filter_config for "proc" is special.
func procTree(t *testing.T, b *procBackend, filter *hcmv3.HttpFilter, special *anypb.Any) testutils.Resources {
	t.Helper()
	rs := []*routev3.Route{toCluster("C")}
	if special != nil {
		r := toCluster("C")
		r.Match.Headers = []*routev3.HeaderMatcher{{Name: "x-route", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "special"}}}
		r.TypedPerFilterConfig = map[string]*anypb.Any{"proc": special}
		rs = append([]*routev3.Route{r}, rs...)
	}
	l := testutils.Listener(listener, routeName)
	hcm := new(hcmv3.HttpConnectionManager)
	if err := l.ApiListener.ApiListener.UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{filter}, hcm.HttpFilters...)
	l.ApiListener.ApiListener = testutils.MarshalAny(hcm)
	return testutils.Resources{Listeners: []*listenerv3.Listener{l}, Routes: []*routev3.RouteConfiguration{vhost(rs...)},
		Clusters: clusters("C"), Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.Endpoints("C", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: b.port}})}}
}
