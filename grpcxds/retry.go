package grpcxds

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/resources"
)

// Defaults of gRFC A44 for a retry_policy without retry_back_off.
const (
	defaultBaseInterval = 25 * time.Millisecond
	maxIntervalFactor   = 10 // max_interval defaults to 10 times base_interval
)

// pushbackHeader is the trailer in which a server tells a client how long
// to wait before the next attempt, or (a negative or malformed value) not
// to retry at all (gRFC A6).
const pushbackHeader = "grpc-retry-pushback-ms"

// retryPolicy is a route's (or its virtual host's) retry_policy as gRPC
// applies it (gRFC A44).
type retryPolicy struct {
	on          [codes.Unauthenticated + 1]bool // the status codes retried
	maxAttempts int                             // num_retries+1
	base, max   time.Duration                   // backoff intervals
}

// retryPolicyOf returns the policy that applies to RPCs of route r: the
// route's own if it has one, else the virtual host's; nil if neither, or
// if the policy retries none of the codes gRPC retries (cancelled,
// deadline-exceeded, internal, resource-exhausted, unavailable; Envoy's
// HTTP conditions do not apply to gRPC). A route's policy replaces the
// virtual host's even when it retries nothing.
//
// The policy is parsed once per configuration (channelConfig.retries), not
// on each RPC: the parse splits retry_on and allocates.
func (c *channelConfig) retryPolicyOf(r *resources.Route, vh *resources.VirtualHost) *retryPolicy {
	in := r.RetryPolicy
	if in == nil && vh != nil {
		in = vh.RetryPolicy
	}
	if in == nil {
		return nil
	}
	if p, ok := c.retries.Load(in); ok {
		return p.(*retryPolicy)
	}
	p := parseRetryPolicy(in)
	c.retries.Store(in, p)
	return p
}

// parseRetryPolicy is retryPolicyOf's policy for in.
func parseRetryPolicy(in *routev3.RetryPolicy) *retryPolicy {
	p := &retryPolicy{maxAttempts: 2, base: defaultBaseInterval}
	some := false
	for _, cond := range strings.Split(in.GetRetryOn(), ",") {
		var c codes.Code
		switch strings.ToLower(strings.TrimSpace(cond)) {
		case "cancelled":
			c = codes.Canceled
		case "deadline-exceeded":
			c = codes.DeadlineExceeded
		case "internal":
			c = codes.Internal
		case "resource-exhausted":
			c = codes.ResourceExhausted
		case "unavailable":
			c = codes.Unavailable
		default:
			continue
		}
		p.on[c], some = true, true
	}
	if !some {
		return nil
	}
	if n := in.GetNumRetries(); n != nil {
		// grpc-go rejects num_retries 0; taken here as "no retries". No
		// cap: grpc-go's limit of 5 attempts (grpc.WithMaxCallAttempts)
		// applies to service config policies, not to those of its xds
		// resolver, which makes num_retries+1 attempts (11 for 10, seen
		// at the server by the parity test).
		p.maxAttempts = int(min(uint64(n.GetValue())+1, math.MaxInt32))
	}
	if b := in.GetRetryBackOff().GetBaseInterval(); b != nil && b.AsDuration() > 0 {
		p.base = b.AsDuration()
	}
	p.max = maxIntervalFactor * p.base
	if m := in.GetRetryBackOff().GetMaxInterval(); m != nil && m.AsDuration() > 0 {
		p.max = m.AsDuration()
	}
	if p.maxAttempts < 2 {
		return nil
	}
	return p
}

// retryState is the retry bookkeeping of one RPC.
type retryState struct {
	attempts int // made so far
	// sincePushback counts the retries since the server last set the
	// backoff: the exponent of the next one.
	sincePushback int
}

// next decides whether an attempt that failed with err is retried, and
// after how long, as grpc-go decides: only a status the policy names, only
// if the server sent no response headers (the attempt is not committed),
// not a failure the picker chose (a drop), not past the attempts allowed;
// the server's pushback wins over the backoff, and a malformed pushback
// ends the retries.
func (p *retryPolicy) next(rs *retryState, err error, committed bool, trailer metadata.MD, sel *selection) (time.Duration, bool) {
	if committed || sel.statusPick.Load() {
		return 0, false
	}
	code := status.Code(err)
	if int(code) >= len(p.on) || !p.on[code] {
		return 0, false
	}
	pushback, hasPushback := time.Duration(0), false
	switch vs := trailer[pushbackHeader]; len(vs) {
	case 0:
	case 1:
		ms, perr := strconv.Atoi(vs[0])
		if perr != nil || ms < 0 {
			return 0, false
		}
		pushback, hasPushback = time.Duration(ms)*time.Millisecond, true
	default:
		return 0, false
	}
	if rs.attempts >= p.maxAttempts {
		return 0, false
	}
	if hasPushback {
		rs.sincePushback = 0
		return pushback, true
	}
	d := p.backoff(rs.sincePushback, rand.Float64())
	rs.sincePushback++
	return d, true
}

// backoff is the wait before retry n+1 counted from the last pushback:
// base*2^n, at most max, times a jitter between 0.8 and 1.2 (u is uniform
// in [0, 1)), as grpc-go waits.
func (p *retryPolicy) backoff(n int, u float64) time.Duration {
	d := min(float64(p.base)*math.Pow(2, float64(n)), float64(p.max))
	return time.Duration(d * (0.8 + 0.4*u))
}
