package extproc

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/resources"
)

// answerT plays one answer of the processor, failing the test when the
// filter does not read it in time.
func answerT(t *testing.T, s *fakeStream, r *Response) {
	t.Helper()
	select {
	case s.answers <- answer{resp: r}:
	case <-time.After(wait):
		t.Fatalf("the filter reads no more of the processor's answers (%v)", r.Kind)
	}
}

// startFlow runs the client's headers through a processor that answers
// them with grant, turning flow control on (nil: a processor that never
// sends a window update), and returns the call and its stream.
func startFlow(t *testing.T, m resources.ExtProcModes, grant *ServerWindowUpdate) (*Call, *fakeStream) {
	t.Helper()
	m.RequestHeaders = true
	c, fc := newTest(t, config(m))
	res := async(func() (map[string][]string, error) { return c.ClientHeaders(map[string][]string{"k": {"v"}}) })
	s := stream(t, fc)
	if r := recvSent(t, s); r.Kind != RequestHeaders || r.FlowControl == nil || *r.FlowControl != *flowInit() {
		t.Fatalf("first message %+v, want flow_control_init of %d each", r, InitialWindow)
	}
	answerT(t, s, &Response{Kind: RequestHeaders, WindowUpdate: grant})
	if _, err := await(t, res); err != nil {
		t.Fatal(err)
	}
	return c, s
}

// notYet fails the test if ch delivers within a short while: what a
// window holds back must not go.
func notYet[T any](t *testing.T, ch chan T, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s went without window", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// A processor that grants window in small steps: a client message waits
// while the window is not positive, and one message may take it below
// zero (GRPC body mode); each grant lets the next go.
func TestFlowControlSendWindowInSmallSteps(t *testing.T) {
	// The processor cuts its window to 10 bytes at once.
	c, s := startFlow(t, resources.ExtProcModes{RequestBody: true}, &ServerWindowUpdate{DownstreamToSidestream: 10 - InitialWindow})
	msg := bytes.Repeat([]byte("x"), 8)
	for i := range 2 { // 10 → 2 → -6
		if err := c.ClientMessage(msg); err != nil {
			t.Fatal(err)
		}
		if r := recvSent(t, s); r.Kind != RequestBody || len(r.Body) != 8 {
			t.Fatalf("message %d: sent %+v", i, r)
		}
	}
	third := async(func() (struct{}, error) { return struct{}{}, c.ClientMessage(msg) })
	notYet(t, third, "a client message")
	// +5: -1, still not positive; then +5: 4.
	answerT(t, s, &Response{WindowUpdate: &ServerWindowUpdate{DownstreamToSidestream: 5}})
	notYet(t, third, "a client message")
	answerT(t, s, &Response{WindowUpdate: &ServerWindowUpdate{DownstreamToSidestream: 5}})
	if _, err := await(t, third); err != nil {
		t.Fatal(err)
	}
	if r := recvSent(t, s); r.Kind != RequestBody || len(r.Body) != 8 {
		t.Fatalf("third message: sent %+v", r)
	}
	// The server's messages have a window of their own, untouched.
	c2, s2 := startFlow(t, resources.ExtProcModes{ResponseBody: true}, &ServerWindowUpdate{DownstreamToSidestream: -InitialWindow})
	if err := c2.ServerMessage(msg); err != nil {
		t.Fatal(err)
	}
	if r := recvSent(t, s2); r.Kind != ResponseBody {
		t.Fatalf("server message: sent %+v", r)
	}
}

// A processor that sends more than its window (it did flow control, by
// its update) cancels the stream, and the RPC fails with INTERNAL.
func TestFlowControlProcessorOverrun(t *testing.T) {
	c, s := startFlow(t, resources.ExtProcModes{RequestBody: true}, &ServerWindowUpdate{})
	big := bytes.Repeat([]byte("y"), 40<<10)
	// 64K → 24K → -16K: the second may go, its window being positive;
	// the data plane takes neither, so nothing is returned.
	answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: big}})
	answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: big}})
	answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: []byte("z")}})
	select {
	case <-c.Context().Done():
	case <-time.After(wait):
		t.Fatal("the overrun did not fail the call")
	}
	wantCode(t, c.Err(), codeInternal)
	if !strings.Contains(c.Err().Error(), "overran flow control") {
		t.Fatalf("error %v, want it to name the overrun", c.Err())
	}
	select {
	case <-s.closed:
	case <-time.After(wait):
		t.Fatal("the stream was not cancelled")
	}
}

// The window of the processor's messages comes back once the data plane
// has taken them and come back for more: on its own message once half a
// window has gathered, else with the next message the filter sends.
func TestFlowControlReturnsWindow(t *testing.T) {
	c, s := startFlow(t, resources.ExtProcModes{RequestBody: true}, &ServerWindowUpdate{})
	chunk := bytes.Repeat([]byte("r"), 20<<10)
	for range 4 {
		answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: chunk}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	next := func() {
		t.Helper()
		if m, ok, err := c.NextClientMessage(ctx); err != nil || !ok || len(m) != len(chunk) {
			t.Fatalf("NextClientMessage = %d bytes, %v, %v", len(m), ok, err)
		}
	}
	next()
	next() // releases the first: 20K, less than half a window
	next() // releases the second: 40K goes back on its own
	r := recvSent(t, s)
	if r.Kind != 0 || r.WindowUpdate == nil || *r.WindowUpdate != (ClientWindowUpdate{SidestreamToUpstream: 40 << 10}) {
		t.Fatalf("sent %+v, want a window update of %d alone", r, 40<<10)
	}
	next() // releases the third: 20K, held for the next message
	if err := c.ClientMessage([]byte("m")); err != nil {
		t.Fatal(err)
	}
	r = recvSent(t, s)
	if r.Kind != RequestBody || r.WindowUpdate == nil || *r.WindowUpdate != (ClientWindowUpdate{SidestreamToUpstream: 20 << 10}) {
		t.Fatalf("sent %+v, want a client message with a window update of %d", r, 20<<10)
	}
}

// The deadlock gRFC A93's flow control is for: the application writes
// before it reads, and the processor has many server messages for it.
// With flow control on, those wait for the application without holding
// up the processor's stream, and the client's messages still come back.
func TestFlowControlServerMessagesDoNotBlockClientMessages(t *testing.T) {
	c, s := startFlow(t, resources.ExtProcModes{RequestBody: true, ResponseBody: true}, &ServerWindowUpdate{})
	for range 3 * outDepth {
		answerT(t, s, &Response{Kind: ResponseBody, Body: &Body{Data: []byte("server")}})
	}
	answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: []byte("client")}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if m, ok, err := c.NextClientMessage(ctx); err != nil || !ok || string(m) != "client" {
		t.Fatalf("NextClientMessage = %q, %v, %v", m, ok, err)
	}
	for i := range 3 * outDepth {
		if m, ok, err := c.NextServerMessage(ctx); err != nil || !ok || string(m) != "server" {
			t.Fatalf("NextServerMessage %d = %q, %v, %v", i, m, ok, err)
		}
	}
}

// A processor that never sends a window update (every one before flow
// control) gets flow_control_init and nothing else: no window holds the
// filter's messages back, none is returned, and an answer of any size is
// taken.
func TestFlowControlOffWithoutWindowUpdate(t *testing.T) {
	c, s := startFlow(t, resources.ExtProcModes{RequestBody: true}, nil)
	big := bytes.Repeat([]byte("b"), int(InitialWindow))
	for i := range 3 {
		if err := c.ClientMessage(big); err != nil {
			t.Fatal(err)
		}
		if r := recvSent(t, s); r.Kind != RequestBody || r.WindowUpdate != nil || r.FlowControl != nil {
			t.Fatalf("message %d: sent %+v", i, r)
		}
		answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: big}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for i := range 3 {
		if m, ok, err := c.NextClientMessage(ctx); err != nil || !ok || len(m) != len(big) {
			t.Fatalf("NextClientMessage %d = %d bytes, %v, %v", i, len(m), ok, err)
		}
	}
	if err := c.ClientHalfClose(); err != nil {
		t.Fatal(err)
	}
	if r := recvSent(t, s); !r.EndOfStream || r.WindowUpdate != nil {
		t.Fatalf("half-close: sent %+v", r)
	}
}

// Observability mode has no flow control: no flow_control_init.
func TestFlowControlNotInObservabilityMode(t *testing.T) {
	cfg := config(resources.ExtProcModes{RequestHeaders: true})
	cfg.ObservabilityMode = true
	cfg.DeferredClose = 0 // the stream closes as the test ends
	c, fc := newTest(t, cfg)
	if _, err := c.ClientHeaders(map[string][]string{"k": {"v"}}); err != nil {
		t.Fatal(err)
	}
	if r := recvSent(t, stream(t, fc)); r.FlowControl != nil {
		t.Fatalf("observability mode sent flow_control_init %+v", r.FlowControl)
	}
}

// A window update that overflows the window fails the stream.
func TestFlowControlWindowOverflow(t *testing.T) {
	c, s := startFlow(t, resources.ExtProcModes{RequestBody: true}, &ServerWindowUpdate{})
	answerT(t, s, &Response{WindowUpdate: &ServerWindowUpdate{UpstreamToSidestream: 1 << 62}})
	answerT(t, s, &Response{WindowUpdate: &ServerWindowUpdate{UpstreamToSidestream: 1 << 62}})
	select {
	case <-c.Context().Done():
	case <-time.After(wait):
		t.Fatal("the overflow did not fail the call")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "server_window_update") {
		t.Fatalf("error %v, want it to name server_window_update", err)
	}
}

// A processor message that takes the window below zero comes back when
// the data plane comes back for the next, even with none there yet: the
// processor, whose window is spent, sends nothing until it has it.
func TestFlowControlReturnsWindowWhileWaiting(t *testing.T) {
	c, s := startFlow(t, resources.ExtProcModes{RequestBody: true}, &ServerWindowUpdate{})
	big := int(InitialWindow) + 10
	answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: bytes.Repeat([]byte("o"), big)}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if m, ok, err := c.NextClientMessage(ctx); err != nil || !ok || len(m) != big {
		t.Fatalf("NextClientMessage = %d bytes, %v, %v", len(m), ok, err)
	}
	res := async(func() ([]byte, error) { m, _, err := c.NextClientMessage(ctx); return m, err })
	r := recvSent(t, s)
	if r.Kind != 0 || r.WindowUpdate == nil || r.WindowUpdate.SidestreamToUpstream != int64(big) {
		t.Fatalf("sent %+v, want a window update of %d alone", r, big)
	}
	answerT(t, s, &Response{Kind: RequestBody, Body: &Body{Data: []byte("next")}})
	if m, err := await(t, res); err != nil || string(m) != "next" {
		t.Fatalf("NextClientMessage = %q, %v", m, err)
	}
}
