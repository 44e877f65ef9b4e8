package route

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/resources"
)

// The request headers that control header_delay and header_abort faults
// (gRFC A33). Percentages are numerators over the configured denominator,
// and can only lower the configured one.
const (
	FaultDelayHeader        = "x-envoy-fault-delay-request"            // milliseconds
	FaultDelayPercentHeader = "x-envoy-fault-delay-request-percentage" // numerator
	FaultAbortHTTPHeader    = "x-envoy-fault-abort-request"            // HTTP status, preferred
	FaultAbortGRPCHeader    = "x-envoy-fault-abort-grpc-request"       // gRPC status code
	FaultAbortPercentHeader = "x-envoy-fault-abort-request-percentage" // numerator
)

// Faults runs the fault injection filter (gRFC A33): the caller gives the
// configuration in force for each request (the most specific override). It
// is safe for concurrent use.
//
// A33 caps active faults for the whole process; the count is per Faults,
// so an adapter that wants the process-wide cap shares one between its
// channels.
type Faults struct {
	// Intn draws uniformly in [0, n); set before use. NewFaults sets
	// math/rand/v2's Uint32N.
	Intn func(n uint32) uint32
	// After is a timer: its channel fires after d; stop releases it
	// early. Set before use; NewFaults sets a real timer. Tests replace it
	// so as not to sleep.
	After func(d time.Duration) (fire <-chan time.Time, stop func() bool)

	// active counts the requests in a fault now: being delayed, or being
	// aborted.
	active atomic.Int64
}

// NewFaults returns Faults that draw their chances with intn, a uniform
// number in [0, n); nil means math/rand/v2's Uint32N. Each fault (delay,
// abort) gets a draw of its own, as A33 asks.
func NewFaults(intn func(n uint32) uint32) *Faults {
	if intn == nil {
		intn = rand.Uint32N
	}
	return &Faults{Intn: intn, After: realAfter}
}

func realAfter(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Active is how many requests are in a fault now.
func (f *Faults) Active() int64 { return f.active.Load() }

// Abort is a fault injection's abort of one request: the status it ends
// with, for the adapter to give in its own terms.
type Abort struct {
	// Config is the configured abort when the status is configured (not
	// from a header): its Code or HTTPStatus.
	Config *resources.FaultAbort
	// HTTPStatus is the status of the x-envoy-fault-abort-request header,
	// in [200, 600); 0 if the status is not from it.
	HTTPStatus int
	// GRPCStatus is the status of the x-envoy-fault-abort-grpc-request
	// header when there is no HTTP one; it may be a code gRPC does not
	// define.
	GRPCStatus int
}

// Inject applies cfg (nil: no faults) to one request before anything of it
// is sent: it may delay the request, then may abort it, each with its
// configured chance, while no more than cfg.MaxActiveFaults requests are in
// a fault at once (a request that would exceed the cap gets no fault). h
// is read for header-controlled faults.
//
// It returns whether the request is aborted, and how; err is ctx's error
// if ctx ended during the delay, which fails the request. A33 counts a
// fault as active only while it delays or aborts the request, so the
// count has ended by the time Inject returns.
func (f *Faults) Inject(ctx context.Context, cfg *resources.FaultConfig, h Headers) (abort Abort, aborted bool, err error) {
	if cfg == nil || (cfg.Delay == nil && cfg.Abort == nil) {
		return Abort{}, false, nil
	}
	if max := cfg.MaxActiveFaults; max != nil && *max == 0 {
		return Abort{}, false, nil
	}
	holding := false
	defer func() {
		if holding {
			f.active.Add(-1)
		}
	}()
	if d := f.drawDelay(cfg.Delay, h); d > 0 {
		if holding = f.acquire(cfg.MaxActiveFaults); !holding {
			return Abort{}, false, nil
		}
		if err := f.wait(ctx, d); err != nil {
			return Abort{}, false, err
		}
	}
	abort, ok := f.drawAbort(cfg.Abort, h)
	if !ok {
		return Abort{}, false, nil
	}
	if !holding {
		if holding = f.acquire(cfg.MaxActiveFaults); !holding {
			return Abort{}, false, nil
		}
	}
	return abort, true, nil
}

// acquire counts one more active fault, unless that would exceed max (nil:
// no cap).
func (f *Faults) acquire(max *uint32) bool {
	if max == nil {
		f.active.Add(1)
		return true
	}
	for {
		n := f.active.Load()
		if n >= int64(*max) {
			return false
		}
		if f.active.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// wait sleeps d, or until ctx ends.
func (f *Faults) wait(ctx context.Context, d time.Duration) error {
	fire, stop := f.After(d)
	select {
	case <-fire:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}

// drawDelay returns the delay this request gets, 0 for none.
func (f *Faults) drawDelay(d *resources.FaultDelay, h Headers) time.Duration {
	if d == nil {
		return 0
	}
	delay, num := d.Fixed, d.Percentage.Numerator
	if d.FromHeader {
		ms, ok := lastInt(h, FaultDelayHeader)
		if !ok || ms <= 0 {
			return 0
		}
		delay = time.Duration(ms) * time.Millisecond
		num = headerNumerator(h, FaultDelayPercentHeader, num)
	}
	if !f.draw(num, d.Percentage.Denominator) {
		return 0
	}
	return delay
}

// drawAbort returns the abort this request gets, if it does.
func (f *Faults) drawAbort(a *resources.FaultAbort, h Headers) (Abort, bool) {
	if a == nil {
		return Abort{}, false
	}
	abort, num := Abort{Config: a}, a.Percentage.Numerator
	if a.FromHeader {
		var ok bool
		if abort, ok = headerAbort(h); !ok {
			return Abort{}, false
		}
		num = headerNumerator(h, FaultAbortPercentHeader, num)
	}
	if !f.draw(num, a.Percentage.Denominator) {
		return Abort{}, false
	}
	return abort, true
}

// headerAbort reads the status of a header-controlled abort: the HTTP
// status header if present (even if it is not a number or not a status in
// [200, 600), which means no abort), else the gRPC one.
func headerAbort(h Headers) (Abort, bool) {
	if h == nil {
		return Abort{}, false
	}
	if v, present := h.Last(FaultAbortHTTPHeader); present {
		s, err := strconv.Atoi(v)
		if err != nil || s < 200 || s >= 600 {
			return Abort{}, false
		}
		return Abort{HTTPStatus: s}, true
	}
	s, ok := lastInt(h, FaultAbortGRPCHeader)
	if !ok {
		return Abort{}, false
	}
	return Abort{GRPCStatus: s}, true
}

// headerNumerator is the percentage header's numerator when it is a number
// below the configured one; otherwise the configured one stays (A33: the
// header can only lower it).
func headerNumerator(h Headers, key string, configured uint32) uint32 {
	n, ok := lastInt(h, key)
	switch {
	case !ok || n >= int(configured):
		return configured
	case n < 0:
		return 0
	}
	return uint32(n)
}

// lastInt parses the last value of header key as a decimal integer.
// Invalid headers are ignored, as A33 says.
func lastInt(h Headers, key string) (int, bool) {
	if h == nil {
		return 0, false
	}
	v, ok := h.Last(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// draw reports whether a fault with chance num/den applies.
func (f *Faults) draw(num, den uint32) bool {
	if num == 0 || den == 0 {
		return false
	}
	return f.Intn(den) < num
}
