package route

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goxds/xds/resources"
)

func always(uint32) uint32 { return 0 }

func headerAbortCfg() *resources.FaultConfig {
	return &resources.FaultConfig{Abort: &resources.FaultAbort{FromHeader: true, Percentage: resources.FaultFraction{Numerator: 100, Denominator: 100}}}
}

// A header-controlled abort gives the status the headers ask for, for the
// adapter to map: the HTTP status header wins over the gRPC one, and an
// HTTP status outside [200, 600), or one that is not a number, is no abort.
func TestFaultAbortFromHeaders(t *testing.T) {
	f := NewFaults(always)
	for _, tc := range []struct {
		name    string
		h       headers
		want    Abort
		aborted bool
	}{
		{"none", headers{}, Abort{}, false},
		{"http", headers{FaultAbortHTTPHeader: "503", FaultAbortGRPCHeader: "5"}, Abort{HTTPStatus: 503}, true},
		{"http out of range", headers{FaultAbortHTTPHeader: "600", FaultAbortGRPCHeader: "5"}, Abort{}, false},
		{"http not a number", headers{FaultAbortHTTPHeader: "x", FaultAbortGRPCHeader: "5"}, Abort{}, false},
		{"grpc", headers{FaultAbortGRPCHeader: "5"}, Abort{GRPCStatus: 5}, true},
		{"grpc undefined", headers{FaultAbortGRPCHeader: "99"}, Abort{GRPCStatus: 99}, true},
		{"percentage 0", headers{FaultAbortGRPCHeader: "5", FaultAbortPercentHeader: "0"}, Abort{}, false},
	} {
		got, aborted, err := f.Inject(context.Background(), headerAbortCfg(), tc.h)
		if err != nil || aborted != tc.aborted || got != tc.want {
			t.Errorf("%s: %+v, %v, %v; want %+v, %v", tc.name, got, aborted, err, tc.want, tc.aborted)
		}
	}
	cfg := &resources.FaultConfig{Abort: &resources.FaultAbort{HTTPStatus: 503, Percentage: resources.FaultFraction{Numerator: 1, Denominator: 100}}}
	if got, aborted, _ := f.Inject(context.Background(), cfg, nil); !aborted || got.Config != cfg.Abort {
		t.Errorf("configured abort: %+v, %v; want the configuration's", got, aborted)
	}
	if f.Active() != 0 {
		t.Errorf("%d faults active after Inject returned", f.Active())
	}
}

// A delay counts as an active fault while it waits; with max_active_faults
// 1 a second request gets no fault then. A request whose context ends
// during its delay fails with the context's error.
func TestFaultDelayIsActiveWhileItWaits(t *testing.T) {
	f := NewFaults(always)
	started, fire := make(chan struct{}, 2), make(chan time.Time)
	f.After = func(time.Duration) (<-chan time.Time, func() bool) {
		started <- struct{}{}
		return fire, func() bool { return true }
	}
	one := uint32(1)
	cfg := &resources.FaultConfig{MaxActiveFaults: &one, Delay: &resources.FaultDelay{Fixed: time.Hour, Percentage: resources.FaultFraction{Numerator: 100, Denominator: 100}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := f.Inject(ctx, cfg, nil)
		done <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("no delay started")
	}
	if f.Active() != 1 {
		t.Errorf("%d faults active during a delay; want 1", f.Active())
	}
	if _, aborted, err := f.Inject(ctx, cfg, nil); aborted || err != nil || len(started) != 0 {
		t.Errorf("a second request past max_active_faults: aborted %v, err %v, delayed %v; want no fault", aborted, err, len(started) != 0)
	}
	fire <- time.Now()
	if err := <-done; err != nil {
		t.Errorf("delayed request: %v", err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		<-started
		ccancel()
	}()
	if _, _, err := f.Inject(cctx, cfg, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("context cancelled during the delay: %v; want context.Canceled", err)
	}
	if f.Active() != 0 {
		t.Errorf("%d faults active after the requests; want 0", f.Active())
	}
}
