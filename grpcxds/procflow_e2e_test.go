package grpcxds_test

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// gRFC A93's flow control and metrics on a goxds channel, with processors
// of testutils.

// A processor that does flow control with a window of one byte (each
// message waits for the window the processor gives back for the one
// before): every stream's first message carries flow_control_init with
// 64 KiB for each of the four paths, the RPCs go through as without flow
// control, and the filter returns the window of the messages the
// processor sent back, in both directions.
func TestExtProcClientFlowControl(t *testing.T) {
	log := &testutils.ProcFlowLog{}
	p, _ := testutils.StartProcCounting(t, testutils.ProcWindowed(1, log, marking))
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	conn := e.dial()
	if got, err := echo(e.ctx, conn, "hi"); err != nil || got != "<echo:hi-proc/in>" {
		t.Fatalf("Echo = %q, %v; want <echo:hi-proc/in>", got, err)
	}
	desc := &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}
	s, err := conn.NewStream(e.ctx, desc, procStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := s.SendMsg(wrapperspb.String(v)); err != nil {
			t.Fatal(err)
		}
		out := new(wrapperspb.StringValue)
		if err := s.RecvMsg(out); err != nil || out.GetValue() != "<echo:"+v+"-proc/in>" {
			t.Fatalf("stream's reply to %s: %q, %v", v, out.GetValue(), err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatalf("stream's end: %v, want io.EOF", err)
	}
	inits := log.Inits()
	if len(inits) != 2 {
		t.Fatalf("%d streams had flow_control_init, want 2 (one per RPC)", len(inits))
	}
	for _, fi := range inits {
		if w := extproc.InitialWindow; fi.GetInitialWindowDownstreamToSidestream() != w || fi.GetInitialWindowSidestreamToUpstream() != w ||
			fi.GetInitialWindowUpstreamToSidestream() != w || fi.GetInitialWindowSidestreamToDownstream() != w {
			t.Errorf("flow_control_init %v, want %d for each path", fi, w)
		}
	}
	// The unary RPC's request went on before its server headers were
	// sent (their message carries its window); the stream's replies a and
	// b before its half-close.
	if up, down := log.Returned(); up <= 0 || down <= 0 {
		t.Errorf("window returned: %d for client messages, %d for server messages; want both positive", up, down)
	}
}

// A processor that never sends a window update (testutils' marking, as
// every processor before flow control) is held to no window: messages
// far over 64 KiB go to it and come back, each way, in one piece.
func TestExtProcClientNoWindowUpdates(t *testing.T) {
	p, _ := testutils.StartProcCounting(t, marking)
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	big := strings.Repeat("w", 3*int(extproc.InitialWindow))
	if got, err := echo(e.ctx, e.dial(), big); err != nil || got != "<echo:"+big+"-proc/in>" {
		t.Fatalf("Echo of %d bytes = %d bytes, %v; want its marked echo", len(big), len(got), err)
	}
}

// A processor that overruns the window it agreed to (it sent a window
// update, and then more server messages than its window while the
// application reads no more than the first) fails the RPC with INTERNAL.
func TestExtProcClientFlowControlOverrun(t *testing.T) {
	big := strings.Repeat("z", 40<<10)
	log := &testutils.ProcFlowLog{}
	p, _ := testutils.StartProcCounting(t, testutils.ProcWindowed(extproc.InitialWindow, log, func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		if r.GetResponseBody() != nil {
			// 64K, then 24K left, then -16K: the third is one too many.
			return []*procv3.ProcessingResponse{testutils.ProcBody(false, big, false, false),
				testutils.ProcBody(false, big, false, false), testutils.ProcBody(false, big, false, false)}, nil
		}
		return marking(r)
	}))
	e := procEnv(t, p.Target(), nil, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))
	conn := e.dial()
	desc := &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true}
	s, err := conn.NewStream(e.ctx, desc, procStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	// The application reads the first of the processor's messages (its
	// read sends the server's reply to the processor), and no more until
	// the filter has failed the RPC: the window of none comes back. The
	// processor sends all three at once, so the filter may have failed
	// the RPC before that first read, which then returns the failure.
	if err = s.RecvMsg(new(wrapperspb.StringValue)); err == nil {
		select {
		case <-s.Context().Done():
		case <-e.ctx.Done():
			t.Fatal("the overrun did not end the RPC")
		}
		for err == nil {
			err = s.RecvMsg(new(wrapperspb.StringValue))
		}
	}
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "overran flow control") {
		t.Fatalf("RecvMsg: %v, want INTERNAL naming the overrun", err)
	}
}

// procRecorder is a grpcxds.ExtProcMetrics that keeps what it hears.
type procRecorder struct {
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func newProcRecorder() *procRecorder { return &procRecorder{more: make(chan struct{}, 1)} }

func (r *procRecorder) ClientExtProcDuration(target, backendService, e string, d time.Duration) {
	r.mu.Lock()
	r.got = append(r.got, fmt.Sprintf("%s %s %s", target, backendService, e))
	if d < 0 {
		r.got = append(r.got, "negative duration")
	}
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// waitFor waits until r has heard n events, and returns them sorted.
func (r *procRecorder) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		r.mu.Lock()
		got := slices.Clone(r.got)
		r.mu.Unlock()
		if len(got) >= n {
			slices.Sort(got)
			return got
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("heard %q, want %d events", got, n)
		}
	}
}

// gRFC A93's client metrics: each of an RPC's four events is measured
// once, labelled with the channel's target and the route's cluster.
func TestExtProcClientMetrics(t *testing.T) {
	rec := newProcRecorder()
	p, _ := testutils.StartProcCounting(t, marking)
	e := authzEnvWith(t, testutils.AllowGRPCService(p.Target()), grpcxds.Options{ExtProcMetrics: rec})
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", startEcho(t)))
	res.Listeners = []*listenerv3.Listener{listenerWithFilters(t, testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))}
	e.update(res)
	conn := e.dial()
	if got, err := echo(e.ctx, conn, "hi"); err != nil || got != "<echo:hi-proc/in>" {
		t.Fatalf("Echo = %q, %v", got, err)
	}
	target := conn.CanonicalTarget()
	want := []string{target + " A client_half_close", target + " A client_headers", target + " A server_headers", target + " A server_trailers"}
	if got := rec.waitFor(t, 4); !slices.Equal(got, want) {
		t.Fatalf("heard %q, want %q", got, want)
	}
}
