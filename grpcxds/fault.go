package grpcxds

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/resources"
)

// The request headers that control header_delay and header_abort faults
// (gRFC A33). Percentages are numerators over the configured denominator,
// and can only lower the configured one.
const (
	faultDelayHeader        = "x-envoy-fault-delay-request"            // milliseconds
	faultDelayPercentHeader = "x-envoy-fault-delay-request-percentage" // numerator
	faultAbortHTTPHeader    = "x-envoy-fault-abort-request"            // HTTP status, preferred
	faultAbortGRPCHeader    = "x-envoy-fault-abort-grpc-request"       // gRPC status code
	faultAbortPercentHeader = "x-envoy-fault-abort-request-percentage" // numerator
)

// errFaultAbortOK is what inject returns for an abort whose status is OK.
// gRPC ends such an RPC at once as if the server had closed it with status
// OK and no response (gRFC A33): a streaming RPC sees OK and no messages, a
// unary one an error, since it got no response. The caller must not send
// the RPC.
var errFaultAbortOK = errors.New("goxds: fault injected: RPC ended with status OK")

// faultFilter runs the fault injection filter (gRFC A33) for one instance
// of the filter in a channel's filter chain; the caller picks the config
// in force for each RPC (the most specific override). It is safe for
// concurrent use.
//
// A33 caps active faults for the whole process; here the count is per
// faultFilter, so a caller that wants the process-wide cap shares one
// faultFilter between channels.
type faultFilter struct {
	// Set at construction, read-only after.
	intn  func(n uint32) uint32 // a uniform draw in [0, n)
	after func(time.Duration) (<-chan time.Time, func() bool)

	// active counts the RPCs in a fault now: being delayed, or being
	// aborted.
	active atomic.Int64
}

// newFaultFilter returns a fault filter that draws its chances with intn,
// which returns a uniform number in [0, n); nil means math/rand/v2's
// Uint32N. Each fault (delay, abort) gets a draw of its own, as A33 asks.
func newFaultFilter(intn func(n uint32) uint32) *faultFilter {
	if intn == nil {
		intn = rand.Uint32N
	}
	return &faultFilter{intn: intn, after: realAfter}
}

// realAfter is a timer: its channel fires after d; stop releases it early.
func realAfter(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// inject applies cfg to one RPC before anything of it is sent: it may
// delay the RPC, then may abort it, each with its configured chance, while
// no more than cfg.MaxActiveFaults RPCs are in a fault at once (an RPC
// that would exceed it gets no fault at all). md is the RPC's outgoing
// metadata, read for header-controlled faults; cfg nil means no faults.
//
// A nil error means: go on with the RPC. Otherwise the RPC fails with the
// error, a status error: the abort's status, or DEADLINE_EXCEEDED or
// CANCELLED if ctx ended during the delay; or it is errFaultAbortOK.
//
// release is never nil, and the caller calls it when the RPC ends. A33
// counts a fault as active only while it delays or aborts the RPC, so
// inject has ended the count by the time it returns and release does
// nothing today; it is there so that a fault lasting the whole RPC (A33's
// deferred response rate limit) needs no change in callers.
func (f *faultFilter) inject(ctx context.Context, cfg *resources.FaultConfig, md metadata.MD) (release func(), err error) {
	release = func() {}
	if cfg == nil || (cfg.Delay == nil && cfg.Abort == nil) {
		return release, nil
	}
	if max := cfg.MaxActiveFaults; max != nil && *max == 0 {
		return release, nil
	}
	holding := false
	defer func() {
		if holding {
			f.active.Add(-1)
		}
	}()
	if d := f.drawDelay(cfg.Delay, md); d > 0 {
		if holding = f.acquire(cfg.MaxActiveFaults); !holding {
			return release, nil
		}
		if err := f.wait(ctx, d); err != nil {
			return release, err
		}
	}
	code, ok := f.drawAbort(cfg.Abort, md)
	if !ok {
		return release, nil
	}
	if !holding {
		if holding = f.acquire(cfg.MaxActiveFaults); !holding {
			return release, nil
		}
	}
	if code == codes.OK {
		return release, errFaultAbortOK
	}
	return release, status.Errorf(code, "goxds: fault injected: RPC aborted with status %v", code)
}

// acquire counts one more active fault, unless that would exceed max (nil:
// no cap).
func (f *faultFilter) acquire(max *uint32) bool {
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

// wait sleeps d, or until ctx ends, which fails the RPC as gRPC would.
func (f *faultFilter) wait(ctx context.Context, d time.Duration) error {
	fire, stop := f.after(d)
	select {
	case <-fire:
		return nil
	case <-ctx.Done():
		stop()
		return status.FromContextError(ctx.Err()).Err()
	}
}

// drawDelay returns the delay this RPC gets, 0 for none.
func (f *faultFilter) drawDelay(d *resources.FaultDelay, md metadata.MD) time.Duration {
	if d == nil {
		return 0
	}
	delay, num := d.Fixed, d.Percentage.Numerator
	if d.FromHeader {
		ms, ok := lastInt(md, faultDelayHeader)
		if !ok || ms <= 0 {
			return 0
		}
		delay = time.Duration(ms) * time.Millisecond
		num = headerNumerator(md, faultDelayPercentHeader, num)
	}
	if !f.draw(num, d.Percentage.Denominator) {
		return 0
	}
	return delay
}

// drawAbort returns the status this RPC is aborted with, if it is.
func (f *faultFilter) drawAbort(a *resources.FaultAbort, md metadata.MD) (codes.Code, bool) {
	if a == nil {
		return codes.OK, false
	}
	code, num := a.Code, a.Percentage.Numerator
	if a.FromHeader {
		var ok bool
		if code, ok = headerAbortCode(md); !ok {
			return codes.OK, false
		}
		num = headerNumerator(md, faultAbortPercentHeader, num)
	}
	if !f.draw(num, a.Percentage.Denominator) {
		return codes.OK, false
	}
	return code, true
}

// headerAbortCode reads the status of a header-controlled abort: the HTTP
// status header if present (even if it is not a number, which means no
// abort), else the gRPC one.
func headerAbortCode(md metadata.MD) (codes.Code, bool) {
	if _, present := md[faultAbortHTTPHeader]; present {
		s, ok := lastInt(md, faultAbortHTTPHeader)
		if !ok {
			return codes.OK, false
		}
		return resources.HTTPStatusToCode(s)
	}
	s, ok := lastInt(md, faultAbortGRPCHeader)
	if !ok {
		return codes.OK, false
	}
	if s < 0 || s > int(codes.Unauthenticated) {
		return codes.Unknown, true // not a code gRPC defines
	}
	return resources.GRPCStatusToCode(uint32(s)), true
}

// headerNumerator is the percentage header's numerator when it is a number
// below the configured one; otherwise the configured one stays (A33: the
// header can only lower it).
func headerNumerator(md metadata.MD, key string, configured uint32) uint32 {
	n, ok := lastInt(md, key)
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
func lastInt(md metadata.MD, key string) (int, bool) {
	vs := md[key]
	if len(vs) == 0 {
		return 0, false
	}
	n, err := strconv.Atoi(vs[len(vs)-1])
	return n, err == nil
}

// draw reports whether a fault with chance num/den applies.
func (f *faultFilter) draw(num, den uint32) bool {
	if num == 0 || den == 0 {
		return false
	}
	return f.intn(den) < num
}
