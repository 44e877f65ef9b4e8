package xdsserver_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// gRFC A93's flow control and metrics on an xDS server, with processors
// of testutils.

// A processor that does flow control with a window of one byte (each
// message waits for the window the processor gives back for the one
// before): the stream's first message carries flow_control_init with
// 64 KiB for each of the four paths, the stream's messages go through as
// without flow control, and the filter returns the window of the client
// messages the processor sent back once the handler has read them.
func TestExtProcFlowControl(t *testing.T) {
	log := &testutils.ProcFlowLog{}
	p, _ := testutils.StartProcCounting(t, testutils.ProcWindowed(1, log, marking))
	e := procEnv(t, p.Target(), testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies), procRoutes(nil))
	st, err := e.dial().NewStream(e.ctx, &greeterDesc.Streams[0], chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "bc", "def"} {
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
	inits := log.Inits()
	if len(inits) != 1 {
		t.Fatalf("%d streams had flow_control_init, want 1", len(inits))
	}
	if w, fi := extproc.InitialWindow, inits[0]; fi.GetInitialWindowDownstreamToSidestream() != w || fi.GetInitialWindowSidestreamToUpstream() != w ||
		fi.GetInitialWindowUpstreamToSidestream() != w || fi.GetInitialWindowSidestreamToDownstream() != w {
		t.Errorf("flow_control_init %v, want %d for each path", fi, w)
	}
	// The handler read "a" before its reply to "bc" went to the processor,
	// which carries a's window.
	if up, _ := log.Returned(); up <= 0 {
		t.Errorf("window returned for client messages: %d, want it positive", up)
	}
}

// serverProcRecorder is an xdsserver.ExtProcMetrics that keeps what it
// hears.
type serverProcRecorder struct {
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func (r *serverProcRecorder) ServerExtProcDuration(e string, d time.Duration) {
	r.mu.Lock()
	r.got = append(r.got, e)
	if d < 0 {
		r.got = append(r.got, fmt.Sprintf("negative duration %v", d))
	}
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// gRFC A93's server metrics: each of an RPC's four events is measured
// once.
func TestExtProcMetrics(t *testing.T) {
	rec := &serverProcRecorder{more: make(chan struct{}, 1)}
	p, _ := testutils.StartProcCounting(t, marking)
	e := newEnvOpts(t, envOptions{edit: testutils.AllowGRPCService(p.Target()),
		server: func(e *env, cfg *bootstrap.Config) []grpc.ServerOption {
			return append(e.defaultOptions(cfg), xdsserver.WithExtProcMetrics(rec))
		}})
	e.srv.RegisterService(&echoDesc, struct{}{})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, procRoutes(nil),
		testutils.ExtProcFilter(p.Target(), testutils.ProcGRPCBodies))}})
	e.waitMode(xdsserver.ServingModeServing)
	if _, err := echo(e.ctx, e.dial(), "x-up"); err != nil {
		t.Fatal(err)
	}
	want := []string{"client_half_close", "client_headers", "server_headers", "server_trailers"}
	deadline := time.After(testTimeout)
	for {
		rec.mu.Lock()
		got := slices.Clone(rec.got)
		rec.mu.Unlock()
		slices.Sort(got)
		if len(got) >= len(want) {
			if !slices.Equal(got, want) {
				t.Fatalf("heard %q, want %q", got, want)
			}
			return
		}
		select {
		case <-rec.more:
		case <-deadline:
			t.Fatalf("heard %q, want %q", got, want)
		}
	}
}
