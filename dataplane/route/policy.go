package route

import (
	"math"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/resources"
)

// GRPCTimeout is the bound gRFC A31 puts on a gRPC request routed by r of
// listener l: the route's max_stream_duration.grpc_timeout_header_max,
// else its max_stream_duration.max_stream_duration, else the connection
// manager's max_stream_duration. Zero means none. The route's own timeout
// field is not gRPC's (an HTTP adapter applies it). The application's
// deadline still applies when it is earlier.
func GRPCTimeout(r *resources.Route, l *resources.Listener) time.Duration {
	switch {
	case r.GRPCTimeoutHeaderMax != nil:
		return *r.GRPCTimeoutHeaderMax
	case r.MaxStreamDuration != nil:
		return *r.MaxStreamDuration
	case l != nil:
		return l.MaxStreamDuration
	}
	return 0
}

// Defaults of gRFC A44 for a retry_policy without retry_back_off, which
// are Envoy's too (RetryPolicy.retry_back_off in
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto).
const (
	defaultBaseInterval = 25 * time.Millisecond
	maxIntervalFactor   = 10 // max_interval defaults to 10 times base_interval
)

// RetryPolicy is a route's (or its virtual host's) retry_policy (gRFC
// A44), the part every transport shares. Which failure is retried is the
// adapter's: it names the conditions it knows in Options.RetryOn, and
// tests their bits in On. An HTTP adapter (Options.HTTP) has Envoy's
// conditions decided here instead ([RetryState.NextHTTP]).
type RetryPolicy struct {
	// On has the bit of each retry_on condition of the policy that the
	// adapter knows.
	On uint64
	// MaxAttempts is num_retries+1 (2 by default), at least 2; for HTTP,
	// 1 when the policy retries nothing but bounds each attempt
	// (HTTP.PerTryTimeout), which Envoy applies to the only attempt too.
	MaxAttempts int
	// Base and Max are the backoff's intervals.
	Base, Max time.Duration
	// HTTP is what only an HTTP adapter reads; nil without Options.HTTP.
	HTTP *HTTPRetry
}

// RetriesOn reports whether the policy retries the condition of bit.
func (p *RetryPolicy) RetriesOn(bit uint) bool { return bit < 64 && p.On&(1<<bit) != 0 }

// ParseRetryPolicy is the policy of in for an adapter of opts, as a Table
// works it out; nil for none. It parses: an adapter that routes without a
// Table calls it once per configuration, not per request.
func ParseRetryPolicy(in *routev3.RetryPolicy, opts Options) *RetryPolicy {
	return parseRetryPolicy(in, opts)
}

// parseRetryPolicy is the policy of in for an adapter of opts: nil if in
// is nil, if it names none of the conditions the adapter knows, or if it
// allows a single attempt (for HTTP: and bounds no attempt's time).
func parseRetryPolicy(in *routev3.RetryPolicy, opts Options) *RetryPolicy {
	if in == nil {
		return nil
	}
	retryOn := opts.RetryOn
	if opts.HTTP {
		retryOn = httpRetryOn
	}
	p := &RetryPolicy{MaxAttempts: 2, Base: defaultBaseInterval}
	for _, cond := range strings.Split(in.GetRetryOn(), ",") {
		if bit, ok := retryOn[strings.ToLower(strings.TrimSpace(cond))]; ok && bit < 64 {
			p.On |= 1 << bit
		}
	}
	if p.On == 0 && !opts.HTTP {
		return nil
	}
	if n := in.GetNumRetries(); n != nil {
		// grpc-go rejects num_retries 0; taken here as "no retries". No
		// cap: grpc-go's limit of 5 attempts (grpc.WithMaxCallAttempts)
		// applies to service config policies, not to those of its xds
		// resolver, which makes num_retries+1 attempts (11 for 10, seen
		// at the server by grpcxds's parity test).
		p.MaxAttempts = int(min(uint64(n.GetValue())+1, math.MaxInt32))
	}
	if b := in.GetRetryBackOff().GetBaseInterval(); b != nil && b.AsDuration() > 0 {
		p.Base = b.AsDuration()
		if opts.HTTP {
			// Envoy: "Values less than 1 ms are rounded up to 1 ms."
			p.Base = max(p.Base, time.Millisecond)
		}
	}
	p.Max = maxIntervalFactor * p.Base
	if m := in.GetRetryBackOff().GetMaxInterval(); m != nil && m.AsDuration() > 0 {
		p.Max = m.AsDuration()
	}
	if opts.HTTP {
		return httpPolicy(p, in)
	}
	if p.MaxAttempts < 2 {
		return nil
	}
	return p
}

// Backoff is the wait before retry n+1 counted from the last pushback:
// Base*2^n, at most Max, times a jitter between 0.8 and 1.2 (u is uniform
// in [0, 1)), as gRPC waits.
func (p *RetryPolicy) Backoff(n int, u float64) time.Duration {
	d := min(float64(p.Base)*math.Pow(2, float64(n)), float64(p.Max))
	return time.Duration(d * (0.8 + 0.4*u))
}

// RetryState is the retry bookkeeping of one request.
type RetryState struct {
	// Attempts counts the attempts made so far; the caller counts them.
	Attempts int
	// sincePushback counts the retries since the server last set the
	// backoff (gRPC's pushback): the exponent of the next one. Envoy's
	// rate-limited back-off (NextHTTP) is a strategy of its own, which
	// does not restart the exponential one's count.
	sincePushback int
}

// Next decides, once the adapter has found an attempt's failure retriable
// (a condition of the policy, the attempt not committed), whether it is
// retried and after how long: not past the attempts allowed; after
// pushback if the server set one (hasPushback), else after the policy's
// backoff, jittered by u (uniform in [0, 1)).
func (s *RetryState) Next(p *RetryPolicy, pushback time.Duration, hasPushback bool, u float64) (time.Duration, bool) {
	if s.Attempts >= p.MaxAttempts {
		return 0, false
	}
	if hasPushback {
		s.sincePushback = 0
		return pushback, true
	}
	d := p.Backoff(s.sincePushback, u)
	s.sincePushback++
	return d, true
}
