package httpfilter

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// The fault filter's runtime, moved here with it from grpcxds: each
// abort is checked by the gRPC code it gives (TestFaultAbortHTTP checks
// the HTTP side).

// The request headers that control header_delay and header_abort faults.
const (
	faultDelayHeader        = route.FaultDelayHeader
	faultDelayPercentHeader = route.FaultDelayPercentHeader
	faultAbortHTTPHeader    = route.FaultAbortHTTPHeader
	faultAbortGRPCHeader    = route.FaultAbortGRPCHeader
	faultAbortPercentHeader = route.FaultAbortPercentHeader
)

// newFaultFilter is a fault runtime of its own count of active faults,
// drawing with intn (nil: math/rand/v2).
func newFaultFilter(intn func(n uint32) uint32) faultRuntime {
	return faultRuntime{name: "fault", faults: route.NewFaults(intn)}
}

// faultTestTimeout bounds every wait of these tests.
const faultTestTimeout = 10 * time.Second

// fixedDraw is a random source that always draws v (or n-1 if v >= n), and
// records the bounds it was asked for.
type fixedDraw struct {
	v    uint32
	asks []uint32
}

func (d *fixedDraw) intn(n uint32) uint32 {
	d.asks = append(d.asks, n)
	return min(d.v, n-1)
}

// fakeTimers replaces the filter's timer: each timer started is reported
// on started with its duration, and fires when the test sends on fire.
type fakeTimers struct {
	started chan time.Duration
	fire    chan time.Time
}

func newFakeTimers(f faultRuntime) *fakeTimers {
	ft := &fakeTimers{started: make(chan time.Duration, 16), fire: make(chan time.Time)}
	f.faults.After = func(d time.Duration) (<-chan time.Time, func() bool) {
		ft.started <- d
		return ft.fire, func() bool { return true }
	}
	return ft
}

func frac(n, d uint32) resources.FaultFraction {
	return resources.FaultFraction{Numerator: n, Denominator: d}
}

func abortCfg(code codes.Code, p resources.FaultFraction) *resources.FaultConfig {
	return &resources.FaultConfig{Abort: &resources.FaultAbort{Code: code, Percentage: p}}
}

func u32(v uint32) *uint32 { return &v }

// noFault is what wantCode is told when the request goes on.
const noFault codes.Code = 1 << 20

// wantCode fails t unless d denies with gRPC code want (noFault: d is
// nil).
func wantCode(t *testing.T, d *Denial, want codes.Code) {
	t.Helper()
	if want == noFault {
		if d != nil {
			t.Fatalf("inject = %+v, want no fault", d)
		}
		return
	}
	if d == nil || codes.Code(d.Code) != want {
		t.Fatalf("inject = %+v, want code %v", d, want)
	}
}

// inject starts f with a context bounded by the test timeout. It may run
// on any goroutine.
func inject(f faultRuntime, cfg *resources.FaultConfig, h testRequest) *Denial {
	ctx, cancel := context.WithTimeout(context.Background(), faultTestTimeout)
	defer cancel()
	release, rh, d := f.Start(ctx, cfg, h)
	if release != nil || rh != nil {
		panic("the fault filter started something that lasts the request")
	}
	return d
}

// Each denominator is drawn over as configured: num/den applies when the
// draw is below num.
func TestFaultPercentages(t *testing.T) {
	for _, den := range []uint32{100, 10000, 1000000} {
		for _, tt := range []struct {
			draw uint32
			want codes.Code
		}{{0, codes.Unavailable}, {4, codes.Unavailable}, {5, noFault}, {den - 1, noFault}} {
			d := &fixedDraw{v: tt.draw}
			f := newFaultFilter(d.intn)
			wantCode(t, inject(f, abortCfg(codes.Unavailable, frac(5, den)), nil), tt.want)
			if len(d.asks) != 1 || d.asks[0] != den {
				t.Errorf("5/%d, draw %d: asked for draws in %v, want one in [0, %d)", den, tt.draw, d.asks, den)
			}
		}
	}
	// 0% never draws nor fires; 100% always fires.
	d := &fixedDraw{v: 0}
	wantCode(t, inject(newFaultFilter(d.intn), abortCfg(codes.Internal, frac(0, 100)), nil), noFault)
	if len(d.asks) != 0 {
		t.Errorf("0%% drew %v", d.asks)
	}
	wantCode(t, inject(newFaultFilter((&fixedDraw{v: 99}).intn), abortCfg(codes.Internal, frac(100, 100)), nil), codes.Internal)
}

func TestFaultAbortStatus(t *testing.T) {
	always := frac(100, 100)
	f := newFaultFilter(nil) // the real source: 100% is certain
	wantCode(t, inject(f, abortCfg(codes.InvalidArgument, always), nil), codes.InvalidArgument)
	wantCode(t, inject(f, abortCfg(codes.OK, always), nil), codes.OK)
	wantCode(t, inject(f, nil, nil), noFault)
	wantCode(t, inject(f, &resources.FaultConfig{}, nil), noFault)
	// An HTTP status arrives already mapped; the message names the code.
	code, _ := resources.HTTPStatusToCode(429)
	httpCfg := &resources.FaultConfig{Abort: &resources.FaultAbort{Code: code, HTTPStatus: 429, Percentage: always}}
	d := inject(f, httpCfg, nil)
	wantCode(t, d, codes.Unavailable)
	if d.Message != "fault injected: RPC aborted with status Unavailable" || d.HTTPStatus != 429 || d.Body != FaultAbortBody {
		t.Errorf("denial = %+v, want the message naming Unavailable, HTTP status 429 and Envoy's body", d)
	}
}

func TestFaultHeaderAbort(t *testing.T) {
	cfg := &resources.FaultConfig{Abort: &resources.FaultAbort{FromHeader: true, Percentage: frac(10, 100)}}
	tests := []struct {
		name string
		md   testRequest
		draw uint32
		want codes.Code
	}{
		{"no headers", nil, 0, noFault},
		{"grpc status", pairs(faultAbortGRPCHeader, "3"), 0, codes.InvalidArgument},
		{"grpc status above 16", pairs(faultAbortGRPCHeader, "99"), 0, codes.Unknown},
		{"negative grpc status", pairs(faultAbortGRPCHeader, "-1"), 0, codes.Unknown},
		{"grpc status not a number", pairs(faultAbortGRPCHeader, "x"), 0, noFault},
		{"http status mapped", pairs(faultAbortHTTPHeader, "503"), 0, codes.Unavailable},
		{"http 404", pairs(faultAbortHTTPHeader, "404"), 0, codes.Unimplemented},
		{"http 200", pairs(faultAbortHTTPHeader, "200"), 0, codes.Unknown},
		{"http out of range", pairs(faultAbortHTTPHeader, "700"), 0, noFault},
		{"http preferred", pairs(faultAbortHTTPHeader, "401", faultAbortGRPCHeader, "3"), 0, codes.Unauthenticated},
		{"bad http hides grpc", pairs(faultAbortHTTPHeader, "x", faultAbortGRPCHeader, "3"), 0, noFault},
		{"last value counts", pairs(faultAbortGRPCHeader, "3", faultAbortGRPCHeader, "5"), 0, codes.NotFound},
		{"configured percentage: draw 9", pairs(faultAbortGRPCHeader, "3"), 9, codes.InvalidArgument},
		{"configured percentage: draw 10", pairs(faultAbortGRPCHeader, "3"), 10, noFault},
		{"percentage lowered: draw 4", pairs(faultAbortGRPCHeader, "3", faultAbortPercentHeader, "5"), 4, codes.InvalidArgument},
		{"percentage lowered: draw 5", pairs(faultAbortGRPCHeader, "3", faultAbortPercentHeader, "5"), 5, noFault},
		{"percentage not raised", pairs(faultAbortGRPCHeader, "3", faultAbortPercentHeader, "50"), 10, noFault},
		{"negative percentage", pairs(faultAbortGRPCHeader, "3", faultAbortPercentHeader, "-5"), 0, noFault},
		{"bad percentage ignored", pairs(faultAbortGRPCHeader, "3", faultAbortPercentHeader, "x"), 9, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &fixedDraw{v: tt.draw}
			wantCode(t, inject(newFaultFilter(d.intn), cfg, tt.md), tt.want)
		})
	}
}

func TestFaultDelay(t *testing.T) {
	f := newFaultFilter((&fixedDraw{v: 0}).intn)
	ft := newFakeTimers(f)
	cfg := &resources.FaultConfig{
		Delay: &resources.FaultDelay{Fixed: 3 * time.Second, Percentage: frac(1, 1000000)},
		Abort: &resources.FaultAbort{Code: codes.Aborted, Percentage: frac(1, 100)},
	}
	done := make(chan *Denial, 1)
	go func() { done <- inject(f, cfg, nil) }()
	select {
	case d := <-ft.started:
		if d != 3*time.Second {
			t.Errorf("delay %v, want 3s", d)
		}
	case err := <-done:
		t.Fatalf("inject returned %v before any delay", err)
	}
	select {
	case err := <-done:
		t.Fatalf("inject returned %v during the delay", err)
	case ft.fire <- time.Now():
	}
	// Then the abort, after the delay.
	wantCode(t, <-done, codes.Aborted)
}

func TestFaultHeaderDelay(t *testing.T) {
	cfg := &resources.FaultConfig{Delay: &resources.FaultDelay{FromHeader: true, Percentage: frac(50, 100)}}
	tests := []struct {
		name string
		md   testRequest
		draw uint32
		want time.Duration // 0: no delay
	}{
		{"no header", nil, 0, 0},
		{"delay", pairs(faultDelayHeader, "25"), 49, 25 * time.Millisecond},
		{"configured percentage", pairs(faultDelayHeader, "25"), 50, 0},
		{"percentage lowered", pairs(faultDelayHeader, "25", faultDelayPercentHeader, "10"), 10, 0},
		{"percentage lowered, drawn in", pairs(faultDelayHeader, "25", faultDelayPercentHeader, "10"), 9, 25 * time.Millisecond},
		{"not a number", pairs(faultDelayHeader, "soon"), 0, 0},
		{"negative", pairs(faultDelayHeader, "-5"), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFaultFilter((&fixedDraw{v: tt.draw}).intn)
			ft := newFakeTimers(f)
			done := make(chan *Denial, 1)
			go func() { done <- inject(f, cfg, tt.md) }()
			if tt.want == 0 {
				wantCode(t, <-done, noFault)
				if len(ft.started) != 0 {
					t.Errorf("a delay of %v started", <-ft.started)
				}
				return
			}
			if d := <-ft.started; d != tt.want {
				t.Errorf("delay %v, want %v", d, tt.want)
			}
			ft.fire <- time.Now()
			wantCode(t, <-done, noFault)
		})
	}
}

// A deadline or cancellation during the delay ends the RPC as gRPC would:
// DEADLINE_EXCEEDED or CANCELLED. The real timer runs here.
func TestFaultDelayContextEnds(t *testing.T) {
	f := newFaultFilter(nil)
	cfg := &resources.FaultConfig{
		Delay: &resources.FaultDelay{Fixed: time.Hour, Percentage: frac(100, 100)},
		Abort: &resources.FaultAbort{Code: codes.Internal, Percentage: frac(100, 100)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, _, d := f.Start(ctx, cfg, nil)
	wantCode(t, d, codes.DeadlineExceeded)
	if d.Err != context.DeadlineExceeded || d.HTTPStatus != 504 {
		t.Errorf("denial = %+v, want the context's error and HTTP 504", d)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, _, d = f.Start(ctx, cfg, nil)
	wantCode(t, d, codes.Canceled)
	if n := f.faults.Active(); n != 0 {
		t.Errorf("%d faults still active", n)
	}
}

// max_active_faults: an RPC that would exceed the cap gets no fault, and
// a fault ends when its delay or abort does.
func TestFaultMaxActiveFaults(t *testing.T) {
	f := newFaultFilter(nil)
	ft := newFakeTimers(f)
	cfg := &resources.FaultConfig{
		Delay:           &resources.FaultDelay{Fixed: time.Second, Percentage: frac(100, 100)},
		Abort:           &resources.FaultAbort{Code: codes.Internal, Percentage: frac(100, 100)},
		MaxActiveFaults: u32(1),
	}
	done := make(chan *Denial, 1)
	go func() { done <- inject(f, cfg, nil) }()
	select {
	case <-ft.started:
	case <-time.After(faultTestTimeout):
		t.Fatal("the first RPC was not delayed")
	}
	// The cap is reached: no delay, no abort.
	wantCode(t, inject(f, cfg, nil), noFault)
	if len(ft.started) != 0 {
		t.Fatal("a second delay started over the cap")
	}
	ft.fire <- time.Now()
	wantCode(t, <-done, codes.Internal)
	// The first fault has ended: the next RPC gets one again (an abort
	// only, so that no timer is needed).
	abortOnly := &resources.FaultConfig{Abort: cfg.Abort, MaxActiveFaults: u32(1)}
	wantCode(t, inject(f, abortOnly, nil), codes.Internal)
	if n := f.faults.Active(); n != 0 {
		t.Errorf("%d faults still active", n)
	}
	// 0 turns the filter off.
	abortOnly.MaxActiveFaults = u32(0)
	wantCode(t, inject(f, abortOnly, nil), noFault)
}
