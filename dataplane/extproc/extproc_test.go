package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	insecurev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/insecure/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second

// fakeStream is a processing stream the test plays the processor on.
type fakeStream struct {
	sent      chan *Request
	answers   chan answer
	closed    chan struct{}
	halfClose chan struct{}
	once      sync.Once
	hcOnce    sync.Once
}

type answer struct {
	resp *Response
	err  error
}

func newFakeStream() *fakeStream {
	return &fakeStream{sent: make(chan *Request, 16), answers: make(chan answer, 16),
		closed: make(chan struct{}), halfClose: make(chan struct{})}
}

func (s *fakeStream) Send(r *Request) error {
	select {
	case s.sent <- r:
		return nil
	case <-s.closed:
		return errors.New("stream closed")
	}
}

func (s *fakeStream) Recv() (*Response, error) {
	select {
	case a := <-s.answers:
		return a.resp, a.err
	case <-s.closed:
		return nil, errors.New("stream closed")
	}
}

func (s *fakeStream) CloseSend() error { s.hcOnce.Do(func() { close(s.halfClose) }); return nil }
func (s *fakeStream) Close()           { s.once.Do(func() { close(s.closed) }) }

// fakeClient opens one fakeStream per call, or fails with err.
type fakeClient struct {
	streams chan *fakeStream
	err     error
}

func (c *fakeClient) Open(context.Context) (Stream, error) {
	if c.err != nil {
		return nil, c.err
	}
	s := newFakeStream()
	c.streams <- s
	return s, nil
}

func newTest(t *testing.T, cfg *resources.ExtProcConfig) (*Call, *fakeClient) {
	t.Helper()
	fc := &fakeClient{streams: make(chan *fakeStream, 1)}
	c := New(context.Background(), cfg, fc).NewCall(context.Background(), map[string]any{"request.path": "/S/M", "other": "x"})
	t.Cleanup(c.Done)
	return c, fc
}

func config(m resources.ExtProcModes) *resources.ExtProcConfig {
	return &resources.ExtProcConfig{Modes: m, DeferredClose: 5 * time.Second}
}

func recvSent(t *testing.T, s *fakeStream) *Request {
	t.Helper()
	select {
	case r := <-s.sent:
		return r
	case <-time.After(wait):
		t.Fatal("nothing sent to the processor")
		return nil
	}
}

func stream(t *testing.T, fc *fakeClient) *fakeStream {
	t.Helper()
	select {
	case s := <-fc.streams:
		return s
	case <-time.After(wait):
		t.Fatal("no stream opened")
		return nil
	}
}

// async runs f in a goroutine and returns its results' channel.
func async[T any](f func() (T, error)) chan answerOf[T] {
	ch := make(chan answerOf[T], 1)
	go func() { v, err := f(); ch <- answerOf[T]{v, err} }()
	return ch
}

type answerOf[T any] struct {
	v   T
	err error
}

func await[T any](t *testing.T, ch chan answerOf[T]) (T, error) {
	t.Helper()
	select {
	case a := <-ch:
		return a.v, a.err
	case <-time.After(wait):
		t.Fatal("no result")
		var zero T
		return zero, nil
	}
}

func wantCode(t *testing.T, err error, code uint32) {
	t.Helper()
	var st *Status
	if !errors.As(err, &st) || st.Code != code {
		t.Fatalf("error %v, want a status with code %d", err, code)
	}
}

// The client's headers go to the processor (forward_rules applied, the
// configured attributes, protocol_config on the first message) and come
// back changed as its answer says, under the mutation rules.
func TestClientHeadersMutated(t *testing.T) {
	cfg, err := resources.NewExtProcConfig(nil, &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
			TargetUri: "dns:///proc", ChannelCredentialsPlugin: []*anypb.Any{mustAny(t, &insecurev3.InsecureCredentials{})},
		}}},
		ProcessingMode:    &extprocv3.ProcessingMode{},
		RequestAttributes: []string{"request.path", "unknown"},
		ForwardRules: &extprocv3.HeaderForwardingRules{DisallowedHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{
			{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}}},
		MutationRules: &mutationv3.HeaderMutationRules{DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-fixed"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, fc := newTest(t, cfg)
	res := async(func() (map[string][]string, error) {
		return c.ClientHeaders(map[string][]string{"x-secret": {"s"}, "x-keep": {"k"}, "x-remove": {"r"}, "x-fixed": {"f"}})
	})
	s := stream(t, fc)
	r := recvSent(t, s)
	if r.Kind != RequestHeaders || r.EndOfStream || r.Headers["x-secret"] != nil || r.Headers["x-keep"] == nil {
		t.Fatalf("sent %+v", r)
	}
	if len(r.Attributes) != 1 || r.Attributes["request.path"] != "/S/M" || r.ProtocolConfig == nil || r.ProtocolConfig.RequestBodyGRPC {
		t.Fatalf("sent attributes %v, protocol config %+v", r.Attributes, r.ProtocolConfig)
	}
	s.answers <- answer{resp: &Response{Kind: RequestHeaders,
		SetHeaders:    []extauthz.HeaderOption{{Key: "x-added", Value: "a"}, {Key: "x-fixed", Value: "changed"}, {Key: "x-empty"}},
		RemoveHeaders: []string{"x-remove"}}}
	h, err := await(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if h["x-added"][0] != "a" || h["x-remove"] != nil || h["x-fixed"][0] != "f" || h["x-secret"][0] != "s" || len(h["x-empty"]) != 1 || h["x-empty"][0] != "" {
		t.Fatalf("headers = %v", h)
	}
}

// A change gRFC A102 calls invalid (a pseudo-header, host, a grpc- header,
// a name or value gRPC cannot carry) fails the stream: the RPC fails with
// INTERNAL, or with failure_mode_allow goes on with its headers unchanged.
func TestInvalidMutationFailsStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    []extauthz.HeaderOption
		remove []string
	}{
		{name: "pseudo-header", set: []extauthz.HeaderOption{{Key: ":path", Value: "/evil"}}},
		{name: "host", set: []extauthz.HeaderOption{{Key: "host", Value: "evil"}}},
		{name: "grpc-", set: []extauthz.HeaderOption{{Key: "grpc-timeout", Value: "1S"}}},
		{name: "remove grpc-", remove: []string{"grpc-accept-encoding"}},
		{name: "remove host", remove: []string{"host"}},
		{name: "bad name", set: []extauthz.HeaderOption{{Key: "x y", Value: "v"}}},
		{name: "bad value", set: []extauthz.HeaderOption{{Key: "x-v", Value: "a\nb"}}},
	} {
		for _, allow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/failure_mode_allow=%v", tc.name, allow), func(t *testing.T) {
				cfg := config(resources.ExtProcModes{RequestHeaders: true})
				cfg.FailureModeAllow = allow
				c, fc := newTest(t, cfg)
				in := map[string][]string{"x-in": {"1"}}
				res := async(func() (map[string][]string, error) { return c.ClientHeaders(in) })
				s := stream(t, fc)
				recvSent(t, s)
				s.answers <- answer{resp: &Response{Kind: RequestHeaders, SetHeaders: tc.set, RemoveHeaders: tc.remove}}
				h, err := await(t, res)
				if !allow {
					wantCode(t, err, codeInternal)
					return
				}
				if err != nil || len(h) != 1 || h["x-in"][0] != "1" {
					t.Fatalf("headers %v, error %v; want them unchanged", h, err)
				}
			})
		}
	}
}

// In GRPC body mode the processor's answers are the messages sent on, as
// many as it sends, and its end_of_stream the half-close; client
// messages after it are dropped.
func TestClientBodiesGRPCMode(t *testing.T) {
	c, fc := newTest(t, config(resources.ExtProcModes{RequestBody: true}))
	if err := c.ClientMessage([]byte("m1")); err != nil {
		t.Fatal(err)
	}
	s := stream(t, fc)
	if r := recvSent(t, s); r.Kind != RequestBody || string(r.Body) != "m1" || r.EndOfStream || !r.ProtocolConfig.RequestBodyGRPC {
		t.Fatalf("sent %+v", r)
	}
	if err := c.ClientHalfClose(); err != nil {
		t.Fatal(err)
	}
	if r := recvSent(t, s); r.Kind != RequestBody || !r.EndOfStream || !r.EndOfStreamWithoutMessage || r.ProtocolConfig != nil {
		t.Fatalf("sent %+v", r)
	}
	s.answers <- answer{resp: &Response{Kind: RequestBody, Body: &Body{Data: []byte("a")}}}
	s.answers <- answer{resp: &Response{Kind: RequestBody, Body: &Body{Data: []byte("b"), EndOfStream: true}}}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, want := range []string{"a", "b"} {
		m, ok, err := c.NextClientMessage(ctx)
		if err != nil || !ok || string(m) != want {
			t.Fatalf("NextClientMessage = %q, %v, %v; want %q", m, ok, err, want)
		}
	}
	if _, ok, err := c.NextClientMessage(ctx); ok || err != nil {
		t.Fatalf("NextClientMessage after the end: %v, %v", ok, err)
	}
}

// A stream failing before any body was sent: the RPC goes on untouched
// with failure_mode_allow, and fails with INTERNAL without it.
func TestFailureModeAllow(t *testing.T) {
	for _, allow := range []bool{true, false} {
		cfg := config(resources.ExtProcModes{RequestHeaders: true})
		cfg.FailureModeAllow = allow
		c, fc := newTest(t, cfg)
		res := async(func() (map[string][]string, error) { return c.ClientHeaders(map[string][]string{"a": {"1"}}) })
		s := stream(t, fc)
		recvSent(t, s)
		s.answers <- answer{err: errors.New("unavailable")}
		h, err := await(t, res)
		if allow && (err != nil || h["a"][0] != "1") {
			t.Fatalf("allowed: %v, %v", h, err)
		}
		if !allow {
			wantCode(t, err, codeInternal)
		}
	}
	// Opening the stream fails.
	cfg := config(resources.ExtProcModes{RequestHeaders: true})
	c := New(context.Background(), cfg, &fakeClient{err: errors.New("no channel")}).NewCall(context.Background(), nil)
	defer c.Done()
	_, err := c.ClientHeaders(nil)
	wantCode(t, err, codeInternal)
}

// Once a body went to the processor, failure_mode_allow no longer
// applies: the messages it had are lost.
func TestFailureAfterBodyFails(t *testing.T) {
	cfg := config(resources.ExtProcModes{RequestBody: true})
	cfg.FailureModeAllow = true
	c, fc := newTest(t, cfg)
	if err := c.ClientMessage([]byte("m")); err != nil {
		t.Fatal(err)
	}
	s := stream(t, fc)
	recvSent(t, s)
	s.answers <- answer{err: errors.New("reset")}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, _, err := c.NextClientMessage(ctx)
	wantCode(t, err, codeInternal)
}

// An immediate response fails the RPC with its status; with
// disable_immediate_response it is a failure of the stream.
func TestImmediateResponse(t *testing.T) {
	for _, disable := range []bool{false, true} {
		cfg := config(resources.ExtProcModes{RequestHeaders: true})
		cfg.DisableImmediateResponse = disable
		c, fc := newTest(t, cfg)
		res := async(func() (map[string][]string, error) { return c.ClientHeaders(nil) })
		s := stream(t, fc)
		recvSent(t, s)
		s.answers <- answer{resp: &Response{Immediate: &Immediate{Code: 7, Details: "no"}}}
		_, err := await(t, res)
		if disable {
			wantCode(t, err, codeInternal)
		} else if wantCode(t, err, 7); err.(*Status).Message != "no" {
			t.Fatalf("status %v", err)
		}
	}
}

// An immediate response to the server's trailers sets the status and
// changes the trailers.
func TestImmediateResponseToTrailers(t *testing.T) {
	c, fc := newTest(t, config(resources.ExtProcModes{ResponseTrailers: true}))
	res := async(func() (map[string][]string, error) { return c.ServerTrailers(map[string][]string{"t": {"1"}}) })
	s := stream(t, fc)
	if r := recvSent(t, s); r.Kind != ResponseTrailers {
		t.Fatalf("sent %+v", r)
	}
	s.answers <- answer{resp: &Response{Immediate: &Immediate{Code: 5, SetHeaders: []extauthz.HeaderOption{{Key: "x-why", Value: "gone"}}}}}
	_, err := await(t, res)
	wantCode(t, err, 5)
	if tr := err.(*Status).Trailers; tr["x-why"][0] != "gone" || tr["t"][0] != "1" {
		t.Fatalf("trailers %v", tr)
	}
}

// Answers the filter cannot take fail the stream (gRFC A93).
func TestProtocolErrors(t *testing.T) {
	for name, resp := range map[string]*Response{
		"replace":             {Kind: RequestHeaders, Replace: true},
		"unsent event":        {Kind: ResponseHeaders},
		"body not configured": {Kind: RequestBody, Body: &Body{Data: []byte("x")}},
		"empty":               {},
	} {
		t.Run(name, func(t *testing.T) {
			c, fc := newTest(t, config(resources.ExtProcModes{RequestHeaders: true}))
			res := async(func() (map[string][]string, error) { return c.ClientHeaders(nil) })
			s := stream(t, fc)
			recvSent(t, s)
			s.answers <- answer{resp: resp}
			_, err := await(t, res)
			wantCode(t, err, codeInternal)
		})
	}
	t.Run("compressed", func(t *testing.T) {
		c, fc := newTest(t, config(resources.ExtProcModes{RequestBody: true}))
		if err := c.ClientMessage([]byte("m")); err != nil {
			t.Fatal(err)
		}
		s := stream(t, fc)
		recvSent(t, s)
		s.answers <- answer{resp: &Response{Kind: RequestBody, Body: &Body{Data: []byte("m"), Compressed: true}}}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, _, err := c.NextClientMessage(ctx)
		wantCode(t, err, codeInternal)
	})
}

// request_drain: the filter half-closes the stream and holds new
// messages; the processor echoes what it had and ends with OK; then the
// RPC goes on untouched. An OK end without a drain, with bodies
// configured, is a failure.
func TestDrain(t *testing.T) {
	c, fc := newTest(t, config(resources.ExtProcModes{RequestBody: true}))
	if err := c.ClientMessage([]byte("m1")); err != nil {
		t.Fatal(err)
	}
	s := stream(t, fc)
	recvSent(t, s)
	s.answers <- answer{resp: &Response{RequestDrain: true}}
	select {
	case <-s.halfClose:
	case <-time.After(wait):
		t.Fatal("no half-close on request_drain")
	}
	held := async(func() (struct{}, error) { return struct{}{}, c.ClientMessage([]byte("m2")) })
	s.answers <- answer{resp: &Response{Kind: RequestBody, Body: &Body{Data: []byte("m1")}}}
	s.answers <- answer{err: io.EOF}
	if _, err := await(t, held); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, want := range []string{"m1", "m2"} {
		m, ok, err := c.NextClientMessage(ctx)
		if err != nil || !ok || string(m) != want {
			t.Fatalf("NextClientMessage = %q, %v, %v; want %q", m, ok, err, want)
		}
	}

	c2, fc2 := newTest(t, config(resources.ExtProcModes{RequestBody: true}))
	if err := c2.ClientMessage([]byte("m")); err != nil {
		t.Fatal(err)
	}
	s2 := stream(t, fc2)
	recvSent(t, s2)
	s2.answers <- answer{err: io.EOF}
	_, _, err := c2.NextClientMessage(ctx)
	wantCode(t, err, codeInternal)
}

// With headers only, an OK end lets the rest of the RPC through.
func TestOKEndHeadersOnly(t *testing.T) {
	c, fc := newTest(t, config(resources.ExtProcModes{RequestHeaders: true, ResponseHeaders: true}))
	res := async(func() (map[string][]string, error) { return c.ClientHeaders(map[string][]string{"a": {"1"}}) })
	s := stream(t, fc)
	recvSent(t, s)
	s.answers <- answer{err: io.EOF}
	if h, err := await(t, res); err != nil || h["a"][0] != "1" {
		t.Fatalf("%v, %v", h, err)
	}
	if h, err := c.ServerHeaders(map[string][]string{"b": {"2"}}, false); err != nil || h["b"][0] != "2" {
		t.Fatalf("server headers after the end: %v, %v", h, err)
	}
}

// Observability mode: events are sent marked so, nothing waits for an
// answer, messages go on as they are, and the stream is closed
// deferred_close_timeout after the RPC.
func TestObservabilityMode(t *testing.T) {
	cfg := config(resources.ExtProcModes{RequestHeaders: true, RequestBody: true})
	cfg.ObservabilityMode = true
	cfg.DeferredClose = 3 * time.Second
	fc := &fakeClient{streams: make(chan *fakeStream, 1)}
	var delay time.Duration
	var fire func()
	p := New(context.Background(), cfg, fc).WithAfterFunc(func(d time.Duration, f func()) func() bool {
		delay, fire = d, f
		return func() bool { return true }
	})
	c := p.NewCall(context.Background(), nil)
	h, err := c.ClientHeaders(map[string][]string{"a": {"1"}})
	if err != nil || h["a"][0] != "1" {
		t.Fatalf("%v, %v", h, err)
	}
	s := stream(t, fc)
	if r := recvSent(t, s); !r.ObservabilityMode || r.Kind != RequestHeaders {
		t.Fatalf("sent %+v", r)
	}
	if err := c.ClientMessage([]byte("m")); err != nil {
		t.Fatal(err)
	}
	if r := recvSent(t, s); r.Kind != RequestBody || string(r.Body) != "m" {
		t.Fatalf("sent %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if m, ok, err := c.NextClientMessage(ctx); !ok || err != nil || string(m) != "m" {
		t.Fatalf("NextClientMessage = %q, %v, %v", m, ok, err)
	}
	c.Done()
	select {
	case <-s.halfClose:
	default:
		t.Fatal("Done did not half-close the stream")
	}
	select {
	case <-s.closed:
		t.Fatal("closed before deferred_close_timeout")
	default:
	}
	if delay != 3*time.Second || fire == nil {
		t.Fatalf("deferred close after %v", delay)
	}
	fire()
	select {
	case <-s.closed:
	case <-time.After(wait):
		t.Fatal("not closed after deferred_close_timeout")
	}
}

// Server messages in GRPC mode come from the processor's answers; the
// trailers' answer ends them.
func TestServerBodiesAndTrailers(t *testing.T) {
	c, fc := newTest(t, config(resources.ExtProcModes{ResponseBody: true, ResponseTrailers: true}))
	if err := c.ServerMessage([]byte("s1")); err != nil {
		t.Fatal(err)
	}
	s := stream(t, fc)
	if r := recvSent(t, s); r.Kind != ResponseBody || string(r.Body) != "s1" {
		t.Fatalf("sent %+v", r)
	}
	res := async(func() (map[string][]string, error) {
		return c.ServerTrailers(map[string][]string{"grpc-status": {"0"}})
	})
	if r := recvSent(t, s); r.Kind != ResponseTrailers {
		t.Fatalf("sent %+v", r)
	}
	s.answers <- answer{resp: &Response{Kind: ResponseBody, Body: &Body{Data: []byte("S1")}}}
	s.answers <- answer{resp: &Response{Kind: ResponseTrailers, SetHeaders: []extauthz.HeaderOption{{Key: "x-t", Value: "v"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if m, ok, err := c.NextServerMessage(ctx); !ok || err != nil || string(m) != "S1" {
		t.Fatalf("NextServerMessage = %q, %v, %v", m, ok, err)
	}
	tr, err := await(t, res)
	if err != nil || tr["x-t"][0] != "v" {
		t.Fatalf("trailers %v, %v", tr, err)
	}
	if _, ok, err := c.NextServerMessage(ctx); ok || err != nil {
		t.Fatalf("NextServerMessage after the trailers: %v, %v", ok, err)
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The owner's end ends an observability-mode stream that Done left open
// for its deferred close.
func TestOwnerEndsStreams(t *testing.T) {
	cfg := config(resources.ExtProcModes{RequestHeaders: true})
	cfg.ObservabilityMode = true
	owner, end := context.WithCancel(context.Background())
	fc := &fakeClient{streams: make(chan *fakeStream, 1)}
	p := New(owner, cfg, fc).WithAfterFunc(func(time.Duration, func()) func() bool { return func() bool { return true } })
	c := p.NewCall(context.Background(), nil)
	if _, err := c.ClientHeaders(nil); err != nil {
		t.Fatal(err)
	}
	s := stream(t, fc)
	c.Done()
	end()
	select {
	case <-c.sctx.Done():
	case <-time.After(wait):
		t.Fatal("the owner's end did not end the stream")
	}
	s.Close()
}
