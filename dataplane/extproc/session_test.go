package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/resources"
)

// The Session's tests drive it as a binding does, with in-memory peers
// and the fake processing stream of extproc_test.go; messages are
// StringValues.

// memPeer is both sides' peer: the messages it gives (in, then end), and
// what the session did to it, in order (log).
type memPeer struct {
	in      chan proto.Message
	end     error               // RecvMsg's once in is drained
	header  map[string][]string // client: the server's; nil: Trailers-Only
	trailer map[string][]string // client: the server's

	mu      sync.Mutex
	log     []string
	headers map[string][]string // server: set or sent on it
	trls    map[string][]string // server: set on it
	logged  chan string
}

func newMemPeer(end error, msgs ...string) *memPeer {
	p := &memPeer{in: make(chan proto.Message, len(msgs)), end: end, logged: make(chan string, 64)}
	for _, m := range msgs {
		p.in <- wrapperspb.String(m)
	}
	close(p.in)
	return p
}

func (p *memPeer) record(s string) {
	p.mu.Lock()
	p.log = append(p.log, s)
	p.mu.Unlock()
	p.logged <- s
}

func (p *memPeer) SendMsg(m any) error {
	p.record("send " + m.(*wrapperspb.StringValue).GetValue())
	return nil
}

func (p *memPeer) RecvMsg(m any) error {
	msg, ok := <-p.in
	if !ok {
		return p.end
	}
	proto.Merge(m.(proto.Message), msg)
	return nil
}

func (p *memPeer) Header() (map[string][]string, error) {
	if p.header == nil {
		return nil, p.end
	}
	return p.header, nil
}
func (p *memPeer) Trailer() map[string][]string { return p.trailer }
func (p *memPeer) CloseSend() error             { p.record("closesend"); return nil }

func (p *memPeer) SetHeader(h map[string][]string) error {
	p.mu.Lock()
	p.headers = join(p.headers, h)
	p.mu.Unlock()
	p.record("setheader")
	return nil
}

func (p *memPeer) SendHeader(h map[string][]string) error {
	p.mu.Lock()
	p.headers = join(p.headers, h)
	p.mu.Unlock()
	p.record("sendheader")
	return nil
}

func (p *memPeer) SetTrailer(t map[string][]string) {
	p.mu.Lock()
	p.trls = join(p.trls, t)
	p.mu.Unlock()
}

// next waits for the session's next action on the peer.
func (p *memPeer) next(t *testing.T) string {
	t.Helper()
	v, err := await(t, async(func() (string, error) { return <-p.logged, nil }))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sessionTest is a Call on cfg with a session on peer, of a client
// (client true) or a server; failed counts the session's Fail calls.
type sessionTest struct {
	c    *Call
	fc   *fakeClient
	s    *Session
	fail chan struct{} // closed at the first Fail
	once sync.Once
}

// waitFailed waits for the session to fail the RPC.
func (st *sessionTest) waitFailed(t *testing.T) {
	t.Helper()
	if _, err := await(t, async(func() (struct{}, error) { <-st.fail; return struct{}{}, nil })); err != nil {
		t.Fatal(err)
	}
}

func newSession(t *testing.T, cfg *resources.ExtProcConfig, peer *memPeer, client, single bool) *sessionTest {
	t.Helper()
	st := &sessionTest{fail: make(chan struct{})}
	st.c, st.fc = newTest(t, cfg)
	o := SessionOptions{Ctx: context.Background(), Fail: func() { st.once.Do(func() { close(st.fail) }) }, Single: single, Prefix: "test: ext_proc",
		Code: func(err error) (uint32, string) { return 2, err.Error() }}
	if client {
		o.Client = peer
	} else {
		o.Server = peer
	}
	st.s = st.c.Session(o)
	t.Cleanup(st.s.Close)
	return st
}

func str(t *testing.T, b []byte) string {
	t.Helper()
	var m wrapperspb.StringValue
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatalf("%q is not a StringValue: %v", b, err)
	}
	return m.GetValue()
}

func body(t *testing.T, s string) []byte {
	t.Helper()
	b, err := proto.Marshal(wrapperspb.String(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func set(k, v string) []extauthz.HeaderOption { return []extauthz.HeaderOption{{Key: k, Value: v}} }

// A client's streaming RPC with every event sent: its messages go to the
// processor and the processor's on to the server, its half-close after
// them; the server's headers, message and end (trailers, with
// grpc-status) go to the processor, and the application gets the
// processor's, with io.EOF at the OK end.
func TestSessionClientStream(t *testing.T) {
	peer := newMemPeer(io.EOF, "r")
	peer.header = map[string][]string{"h": {"1"}}
	peer.trailer = map[string][]string{"t": {"1"}}
	st := newSession(t, config(resources.ExtProcModes{RequestBody: true, ResponseHeaders: true, ResponseBody: true, ResponseTrailers: true}), peer, true, false)
	if err := st.s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	ps := stream(t, st.fc)
	if r := recvSent(t, ps); r.Kind != RequestBody || str(t, r.Body) != "a" {
		t.Fatalf("sent %+v", r)
	}
	ps.answers <- answer{resp: &Response{Kind: RequestBody, Body: &Body{Data: body(t, "A")}}}
	if got := peer.next(t); got != "send A" {
		t.Fatalf("the server got %q, want the processor's A", got)
	}
	if err := st.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if r := recvSent(t, ps); r.Kind != RequestBody || !r.EndOfStream {
		t.Fatalf("sent %+v, want the half-close", r)
	}
	ps.answers <- answer{resp: &Response{Kind: RequestBody, Body: &Body{EndOfStream: true, EndOfStreamWithoutMessage: true}}}
	if got := peer.next(t); got != "closesend" {
		t.Fatalf("the server got %q, want the half-close", got)
	}

	var m wrapperspb.StringValue
	recv := async(func() (struct{}, error) { return struct{}{}, st.s.RecvMsg(&m) })
	if r := recvSent(t, ps); r.Kind != ResponseHeaders || r.EndOfStream || r.Headers["h"][0] != "1" {
		t.Fatalf("sent %+v, want the server's headers", r)
	}
	ps.answers <- answer{resp: &Response{Kind: ResponseHeaders, SetHeaders: set("x-h", "p")}}
	if r := recvSent(t, ps); r.Kind != ResponseBody || str(t, r.Body) != "r" {
		t.Fatalf("sent %+v, want the server's message", r)
	}
	if r := recvSent(t, ps); r.Kind != ResponseTrailers || r.Headers["grpc-status"][0] != "0" || r.Headers["t"][0] != "1" {
		t.Fatalf("sent %+v, want the trailers with grpc-status 0", r)
	}
	ps.answers <- answer{resp: &Response{Kind: ResponseBody, Body: &Body{Data: body(t, "R")}}}
	if _, err := await(t, recv); err != nil || m.GetValue() != "R" {
		t.Fatalf("RecvMsg = %q, %v; want the processor's R", m.GetValue(), err)
	}
	ps.answers <- answer{resp: &Response{Kind: ResponseTrailers, SetHeaders: set("x-t", "p")}}
	if err := st.s.RecvMsg(&m); !errors.Is(err, io.EOF) {
		t.Fatalf("RecvMsg at the end = %v, want io.EOF", err)
	}
	h, err := st.s.Header()
	if err != nil || h["x-h"][0] != "p" {
		t.Fatalf("Header = %v, %v; want the processor's x-h", h, err)
	}
	if tr := st.s.Trailer(); tr["x-t"][0] != "p" || tr["grpc-status"] != nil {
		t.Fatalf("Trailer = %v, want the processor's x-t and no status", tr)
	}
}

// A Trailers-Only response is told to the processor as headers with
// end_of_stream, the trailers and status among them, and no trailers
// event; its answer changes the trailers. So on both sides: a client
// whose server sent no headers, a server whose handler failed before
// sending any.
func TestSessionTrailersOnly(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(fmt.Sprintf("client=%v", client), func(t *testing.T) {
			rpcErr := &Status{Code: 9, Message: "failed precondition"}
			peer := newMemPeer(rpcErr)
			peer.trailer = map[string][]string{"t": {"1"}}
			st := newSession(t, config(resources.ExtProcModes{ResponseHeaders: true, ResponseTrailers: true}), peer, client, false)
			var end chan answerOf[struct{}]
			if client {
				end = async(func() (struct{}, error) { return struct{}{}, st.s.RecvMsg(new(wrapperspb.StringValue)) })
			} else {
				st.s.SetTrailer(map[string][]string{"t": {"1"}})
				end = async(func() (struct{}, error) { return struct{}{}, st.s.End(rpcErr) })
			}
			ps := stream(t, st.fc)
			r := recvSent(t, ps)
			if r.Kind != ResponseHeaders || !r.EndOfStream || r.Headers["grpc-status"][0] != "9" || r.Headers["t"][0] != "1" {
				t.Fatalf("sent %+v, want headers with end_of_stream, grpc-status 9 and the trailers", r)
			}
			ps.answers <- answer{resp: &Response{Kind: ResponseHeaders, SetHeaders: set("x-t", "p")}}
			if _, err := await(t, end); err != rpcErr {
				t.Fatalf("the end = %v, want the RPC's %v", err, rpcErr)
			}
			tr := st.s.Trailer
			if !client {
				tr = func() map[string][]string { peer.mu.Lock(); defer peer.mu.Unlock(); return peer.trls }
			}
			if got := tr(); got["x-t"][0] != "p" || got["grpc-status"] != nil {
				t.Errorf("trailers %v, want the processor's x-t and no status", got)
			}
			select {
			case r := <-ps.sent:
				t.Errorf("sent %+v after a Trailers-Only response", r)
			default:
			}
		})
	}
}

// A server's held headers go to the processor, and on to the client,
// before its first message; the processor's messages follow them.
func TestSessionServerHeadersFirst(t *testing.T) {
	peer := newMemPeer(io.EOF)
	st := newSession(t, config(resources.ExtProcModes{ResponseHeaders: true, ResponseBody: true}), peer, false, false)
	if err := st.s.SetHeader(map[string][]string{"h": {"1"}}); err != nil {
		t.Fatal(err)
	}
	sent := async(func() (struct{}, error) { return struct{}{}, st.s.SendMsg(wrapperspb.String("m")) })
	ps := stream(t, st.fc)
	if r := recvSent(t, ps); r.Kind != ResponseHeaders || r.Headers["h"][0] != "1" {
		t.Fatalf("sent %+v, want the held headers", r)
	}
	ps.answers <- answer{resp: &Response{Kind: ResponseHeaders, SetHeaders: set("x-h", "p")}}
	if r := recvSent(t, ps); r.Kind != ResponseBody || str(t, r.Body) != "m" {
		t.Fatalf("sent %+v, want the message", r)
	}
	if _, err := await(t, sent); err != nil {
		t.Fatal(err)
	}
	if err := st.s.SetHeader(map[string][]string{"late": {"1"}}); err == nil {
		t.Error("SetHeader after the headers went: no error")
	}
	ps.answers <- answer{resp: &Response{Kind: ResponseBody, Body: &Body{Data: body(t, "M")}}}
	if got := peer.next(t); got != "sendheader" {
		t.Fatalf("first on the wire %q, want the headers", got)
	}
	if got := peer.next(t); got != "send M" {
		t.Fatalf("then %q, want the processor's M", got)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if peer.headers["x-h"][0] != "p" {
		t.Errorf("headers sent %v, want the processor's x-h", peer.headers)
	}
}

// A server reads the client's messages through the processor, and its
// half-close as io.EOF.
func TestSessionServerReads(t *testing.T) {
	peer := newMemPeer(io.EOF, "a")
	st := newSession(t, config(resources.ExtProcModes{RequestBody: true}), peer, false, false)
	var m wrapperspb.StringValue
	recv := async(func() (struct{}, error) { return struct{}{}, st.s.RecvMsg(&m) })
	ps := stream(t, st.fc)
	if r := recvSent(t, ps); r.Kind != RequestBody || str(t, r.Body) != "a" {
		t.Fatalf("sent %+v", r)
	}
	if r := recvSent(t, ps); r.Kind != RequestBody || !r.EndOfStream {
		t.Fatalf("sent %+v, want the half-close", r)
	}
	ps.answers <- answer{resp: &Response{Kind: RequestBody, Body: &Body{Data: body(t, "A"), EndOfStream: true}}}
	if _, err := await(t, recv); err != nil || m.GetValue() != "A" {
		t.Fatalf("RecvMsg = %q, %v", m.GetValue(), err)
	}
	if err := st.s.RecvMsg(&m); !errors.Is(err, io.EOF) {
		t.Fatalf("RecvMsg at the end = %v, want io.EOF", err)
	}
}

// With Single, the processor must give exactly one message: none or two
// fail with INTERNAL.
func TestSessionSingle(t *testing.T) {
	for _, n := range []int{0, 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			peer := newMemPeer(io.EOF, "r")
			peer.header = map[string][]string{}
			st := newSession(t, config(resources.ExtProcModes{ResponseBody: true, ResponseTrailers: true}), peer, true, true)
			recv := async(func() (struct{}, error) { return struct{}{}, st.s.RecvMsg(new(wrapperspb.StringValue)) })
			ps := stream(t, st.fc)
			recvSent(t, ps) // the message
			recvSent(t, ps) // the trailers
			for range n {
				ps.answers <- answer{resp: &Response{Kind: ResponseBody, Body: &Body{Data: body(t, "R")}}}
			}
			ps.answers <- answer{resp: &Response{Kind: ResponseTrailers}}
			_, err := await(t, recv)
			wantCode(t, err, codeInternal)
			if !strings.Contains(err.Error(), "want 1") {
				t.Errorf("error %v, want it to say one message was wanted", err)
			}
		})
	}
}

// A processor's message that is not of the RPC's type fails the RPC
// (Fail) with INTERNAL, which the server's next send reports.
func TestSessionBadMessageFails(t *testing.T) {
	peer := newMemPeer(io.EOF)
	st := newSession(t, config(resources.ExtProcModes{ResponseBody: true}), peer, false, false)
	if err := st.s.SendMsg(wrapperspb.String("m")); err != nil {
		t.Fatal(err)
	}
	ps := stream(t, st.fc)
	recvSent(t, ps)
	ps.answers <- answer{resp: &Response{Kind: ResponseBody, Body: &Body{Data: []byte{0xff}}}}
	st.waitFailed(t)
	err, _ := st.s.Failure()
	wantCode(t, err, codeInternal)
	if err := st.s.SendMsg(wrapperspb.String("n")); err == nil {
		t.Error("SendMsg after the failure: no error")
	}
}

// An immediate response fails the RPC (Fail) with its status; to the
// trailers, its headers are the trailers a server sets.
func TestSessionImmediateResponse(t *testing.T) {
	peer := newMemPeer(io.EOF)
	st := newSession(t, config(resources.ExtProcModes{ResponseTrailers: true}), peer, false, false)
	if err := st.s.TakeHeader(); err != nil {
		t.Fatal(err)
	}
	end := async(func() (struct{}, error) { return struct{}{}, st.s.End(nil) })
	ps := stream(t, st.fc)
	if r := recvSent(t, ps); r.Kind != ResponseTrailers {
		t.Fatalf("sent %+v", r)
	}
	ps.answers <- answer{resp: &Response{Immediate: &Immediate{Code: 7, Details: "no", SetHeaders: set("x-why", "policy")}}}
	_, err := await(t, end)
	wantCode(t, err, 7)
	st.waitFailed(t) // the RPC ends at once (gRFC A93)
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if peer.trls["x-why"] == nil {
		t.Errorf("trailers %v, want the immediate response's x-why", peer.trls)
	}
}

// Without body modes the messages go straight between the application
// and the peer, and a client's one response ends the RPC.
func TestSessionPassThrough(t *testing.T) {
	peer := newMemPeer(io.EOF, "r")
	peer.header = map[string][]string{}
	st := newSession(t, config(resources.ExtProcModes{}), peer, true, true)
	if err := st.s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if err := st.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var m wrapperspb.StringValue
	if err := st.s.RecvMsg(&m); err != nil || m.GetValue() != "r" {
		t.Fatalf("RecvMsg = %q, %v", m.GetValue(), err)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if strings.Join(peer.log, ",") != "send a,closesend" {
		t.Errorf("the peer saw %v", peer.log)
	}
}

// A client's processor failing the RPC while the application reads (an
// immediate response to the server's headers): the read returns its
// status, not the server's end, and the RPC is ended (Fail).
func TestSessionClientFailureOverrides(t *testing.T) {
	peer := newMemPeer(io.EOF, "r")
	peer.header = map[string][]string{"h": {"1"}}
	st := newSession(t, config(resources.ExtProcModes{ResponseHeaders: true, ResponseBody: true}), peer, true, false)
	recv := async(func() (struct{}, error) { return struct{}{}, st.s.RecvMsg(new(wrapperspb.StringValue)) })
	ps := stream(t, st.fc)
	if r := recvSent(t, ps); r.Kind != ResponseHeaders {
		t.Fatalf("sent %+v", r)
	}
	ps.answers <- answer{resp: &Response{Immediate: &Immediate{Code: 8, Details: "too much"}}}
	_, err := await(t, recv)
	wantCode(t, err, 8)
	st.waitFailed(t)
	if _, err := st.s.Header(); err == nil {
		t.Error("Header after the failure: no error")
	}
}
