package route

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/resources"
)

// An HTTP client retries as Envoy's router does: the retry_on conditions
// are those of x-envoy-retry-on
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/router_filter#x-envoy-retry-on),
// the rest of the policy is RetryPolicy's
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#envoy-v3-api-msg-config-route-v3-retrypolicy).
// What is decided here needs no transport: the adapter says what an
// attempt gave (an HTTPAttempt) and sends, waits and buffers.

// The bits of Envoy's HTTP retry_on conditions in RetryPolicy.On.
const (
	retry5xx uint = iota
	retryGatewayError
	retryReset
	retryConnectFailure
	retryRetriable4xx
	retryRefusedStream
	retryStatusCodes
	retryHeaders
	retryEnvoyRateLimited
)

// httpRetryOn are the retry_on conditions an HTTP client retries on. As in
// Envoy, a name it does not know is ignored (Envoy's route configuration
// accepts any), which leaves out gRPC's conditions (they test a gRPC
// response's grpc-status, not an HTTP one), reset-before-request (a
// net/http client cannot tell whether its request has left) and
// http3-post-connect-failure.
var httpRetryOn = map[string]uint{
	"5xx":                    retry5xx,
	"gateway-error":          retryGatewayError,
	"reset":                  retryReset,
	"connect-failure":        retryConnectFailure,
	"retriable-4xx":          retryRetriable4xx,
	"refused-stream":         retryRefusedStream,
	"retriable-status-codes": retryStatusCodes,
	"retriable-headers":      retryHeaders,
	"envoy-ratelimited":      retryEnvoyRateLimited,
}

// defaultRateLimitedMax is rate_limited_retry_back_off's max_interval when
// unset: "Defaults to 300 seconds."
const defaultRateLimitedMax = 300 * time.Second

// HTTPRetry is the part of a retry policy only an HTTP client reads.
type HTTPRetry struct {
	// StatusCodes are retriable_status_codes, for the
	// retriable-status-codes condition.
	StatusCodes []uint32
	// Headers are retriable_headers: a response that matches any of them
	// is retried under the retriable-headers condition.
	Headers []resources.HeaderMatcher
	// RequestHeaders are retriable_request_headers: when there are some, a
	// request is retried only if it matches one of them.
	RequestHeaders []resources.HeaderMatcher
	// ResetHeaders are rate_limited_retry_back_off.reset_headers, tried in
	// order, and RateLimitedMax its max_interval (300 s by default).
	ResetHeaders   []ResetHeader
	RateLimitedMax time.Duration
	// PerTryTimeout bounds each attempt until its response headers
	// (per_try_timeout); PerTryIdleTimeout bounds each attempt's silences
	// until its response has ended (per_try_idle_timeout). Zero: none.
	PerTryTimeout, PerTryIdleTimeout time.Duration
	// Err says what of the policy could not be used: a header matcher that
	// does not compile, which then matches nothing (Envoy would have
	// refused the route configuration). The adapter logs it.
	Err error
}

// ResetHeader is one of rate_limited_retry_back_off's reset_headers.
type ResetHeader struct {
	// Name is the header's name, lower case.
	Name string
	// UnixTimestamp: the value is a Unix time in seconds to wait until
	// (format UNIX_TIMESTAMP), else the seconds to wait (SECONDS).
	UnixTimestamp bool
}

// httpPolicy completes p, parsed from in, for an HTTP client: nil if it
// neither retries nor bounds an attempt.
func httpPolicy(p *RetryPolicy, in *routev3.RetryPolicy) *RetryPolicy {
	h := &HTTPRetry{StatusCodes: in.GetRetriableStatusCodes(), RateLimitedMax: defaultRateLimitedMax}
	var errs []string
	h.Headers, errs = headerMatchers(in.GetRetriableHeaders(), "retriable_headers", errs)
	h.RequestHeaders, errs = headerMatchers(in.GetRetriableRequestHeaders(), "retriable_request_headers", errs)
	if rl := in.GetRateLimitedRetryBackOff(); rl != nil {
		for _, rh := range rl.GetResetHeaders() {
			if rh.GetName() != "" {
				h.ResetHeaders = append(h.ResetHeaders, ResetHeader{Name: strings.ToLower(rh.GetName()), UnixTimestamp: rh.GetFormat() == routev3.RetryPolicy_UNIX_TIMESTAMP})
			}
		}
		if m := rl.GetMaxInterval(); m != nil && m.AsDuration() > 0 {
			h.RateLimitedMax = m.AsDuration()
		}
	}
	if d := in.GetPerTryTimeout(); d != nil && d.AsDuration() > 0 {
		h.PerTryTimeout = d.AsDuration()
	}
	if d := in.GetPerTryIdleTimeout(); d != nil && d.AsDuration() > 0 {
		h.PerTryIdleTimeout = d.AsDuration()
	}
	if len(errs) > 0 {
		h.Err = fmt.Errorf("retry_policy: %s", strings.Join(errs, "; "))
	}
	p.HTTP = h
	if p.On == 0 || p.MaxAttempts < 2 {
		if h.PerTryTimeout == 0 && h.PerTryIdleTimeout == 0 {
			return nil
		}
		p.MaxAttempts = 1
	}
	return p
}

// headerMatchers compiles in, field's matchers; one that does not compile
// is left out and its error added to errs.
func headerMatchers(in []*routev3.HeaderMatcher, field string, errs []string) ([]resources.HeaderMatcher, []string) {
	var out []resources.HeaderMatcher
	for i, m := range in {
		hm, err := resources.NewHeaderMatcher(m)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s[%d]: %v (ignored)", field, i, err))
			continue
		}
		out = append(out, hm)
	}
	return out, errs
}

// Failure is why an attempt of an HTTP request got no response.
type Failure uint8

const (
	// NoFailure: the attempt got a response; its status and headers
	// decide.
	NoFailure Failure = iota
	// ConnectFailure: no connection to the endpoint (refused, timed out,
	// its TLS handshake failed).
	ConnectFailure
	// RefusedStream: the endpoint refused the stream before processing it
	// (HTTP/2 REFUSED_STREAM).
	RefusedStream
	// Reset: the connection or stream ended before a response.
	Reset
	// Timeout: per_try_timeout or per_try_idle_timeout ended the attempt
	// before its response. Envoy resets the attempt's stream, and retries
	// it as a reset ("does not respond at all (disconnect/reset/read
	// timeout)").
	Timeout
)

// HTTPAttempt is what one attempt of an HTTP request gave, as its retry
// policy sees it.
type HTTPAttempt struct {
	// Failure is why the attempt got no response, NoFailure if it got
	// one.
	Failure Failure
	// Status and Headers are the response's (Headers nil: none).
	Status  int
	Headers Headers
}

// RetriesHTTP reports whether p retries an HTTP attempt that gave a, by
// the conditions of x-envoy-retry-on: a response by its status (5xx: any
// 5xx; gateway-error: 502, 503, 504; retriable-4xx: 409;
// retriable-status-codes: those of the policy) or headers
// (retriable-headers), unless it carries x-envoy-overloaded (never
// retried) or x-envoy-ratelimited (which only envoy-ratelimited retries); no response under reset, 5xx and
// gateway-error (Envoy counts it as the 5xx it turns into), a connection
// failure under connect-failure too, a refused stream under
// refused-stream too.
func (p *RetryPolicy) RetriesHTTP(a *HTTPAttempt) bool {
	on := func(bit uint) bool { return p.On&(1<<bit) != 0 }
	if a.Failure != NoFailure {
		switch {
		case on(retryReset) || on(retry5xx) || on(retryGatewayError):
			return true
		case a.Failure == RefusedStream:
			return on(retryRefusedStream)
		case a.Failure == ConnectFailure:
			return on(retryConnectFailure)
		}
		return false
	}
	retry := p.retriesResponse(a)
	if a.Headers != nil && (retry || on(retryEnvoyRateLimited)) {
		// Only a response that would be retried, or may be as rate
		// limited, has its headers looked at: a 200 costs nothing.
		if _, ok := a.Headers.Get("x-envoy-overloaded"); ok {
			return false // "If this header is set by upstream, Envoy will not retry."
		}
		if _, ok := a.Headers.Get("x-envoy-ratelimited"); ok {
			return on(retryEnvoyRateLimited)
		}
	}
	return retry
}

// retriesResponse reports whether p retries a response by its status or
// its headers (retriable-headers).
func (p *RetryPolicy) retriesResponse(a *HTTPAttempt) bool {
	on := func(bit uint) bool { return p.On&(1<<bit) != 0 }
	s := a.Status
	switch {
	case on(retry5xx) && s >= 500 && s <= 599,
		on(retryGatewayError) && s >= 502 && s <= 504,
		on(retryRetriable4xx) && s == 409:
		return true
	}
	if p.HTTP == nil {
		return false
	}
	if on(retryStatusCodes) {
		for _, c := range p.HTTP.StatusCodes {
			if int64(c) == int64(s) {
				return true
			}
		}
	}
	return on(retryHeaders) && matchesAny(p.HTTP.Headers, a.Headers)
}

// AllowsRequest reports whether p may retry a request with headers h:
// when the policy has retriable_request_headers, only a request that
// matches one of them ("HTTP headers which must be present in the request
// for retries to be attempted").
func (p *RetryPolicy) AllowsRequest(h Headers) bool {
	return p.HTTP == nil || len(p.HTTP.RequestHeaders) == 0 || matchesAny(p.HTTP.RequestHeaders, h)
}

// matchesAny reports whether headers h match one of ms.
func matchesAny(ms []resources.HeaderMatcher, h Headers) bool {
	for i := range ms {
		v, ok := "", false
		if h != nil {
			v, ok = h.Get(ms[i].Name())
		}
		if ms[i].Match(v, ok) {
			return true
		}
	}
	return false
}

// HTTPBackoff is Envoy's fully jittered exponential back-off before retry
// n+1 (n from 0): uniform in [0, (2^(n+1)-1)·Base), at most Max, for u
// uniform in [0, 1) (x-envoy-max-retries: the first retry waits up to
// 24 ms at the default 25 ms base, the second up to 74 ms, ...).
func (p *RetryPolicy) HTTPBackoff(n int, u float64) time.Duration {
	upper := (math.Pow(2, float64(min(n, 62)+1)) - 1) * float64(p.Base)
	return min(durationOf(u*upper), p.Max)
}

// ResetInterval is the rate-limited back-off's interval that response
// headers h ask for: the first of the policy's reset_headers whose value
// parses (its first value if repeated) to at most RateLimitedMax; false
// if none does (the exponential back-off then applies). now is the time
// a Unix timestamp or HTTP date counts from.
func (p *RetryPolicy) ResetInterval(h Headers, now time.Time) (time.Duration, bool) {
	if p.HTTP == nil || h == nil {
		return 0, false
	}
	for _, rh := range p.HTTP.ResetHeaders {
		v, ok := h.Get(rh.Name)
		if !ok {
			continue
		}
		d, ok := ParseResetHeader(v, rh.UnixTimestamp, now)
		if !ok {
			// Get joins repeated values with ","; Envoy reads the first.
			// (An HTTP date has a comma of its own, so the whole value
			// is tried first.)
			if first, _, cut := strings.Cut(v, ","); cut {
				d, ok = ParseResetHeader(first, rh.UnixTimestamp, now)
			}
		}
		if ok && d <= p.HTTP.RateLimitedMax {
			return d, true
		}
	}
	return 0, false
}

// httpDateLayouts are the forms of an HTTP date (RFC 9110 section 5.6.7):
// IMF-fixdate, then the obsolete RFC 850 and asctime forms a recipient
// must accept.
var httpDateLayouts = []string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	"Monday, 02-Jan-06 15:04:05 GMT",
	"Mon Jan _2 15:04:05 2006",
}

// maxResetSeconds is the most seconds a time.Duration holds.
const maxResetSeconds = math.MaxInt64 / int64(time.Second)

// ParseResetHeader parses the value of a reset header: with unixTimestamp,
// a Unix time in seconds, the interval being from now to it (false if it
// is past, as in Envoy); else a number of seconds, or (as Retry-After
// allows, RFC 9110 section 10.2.3, where Envoy reads only seconds) an
// HTTP date, a past one being no wait. Surrounding spaces are allowed;
// anything else, or an interval no time.Duration holds, gives false.
func ParseResetHeader(v string, unixTimestamp bool, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		if unixTimestamp || len(v) > 64 {
			return 0, false
		}
		for _, layout := range httpDateLayouts {
			if t, err := time.Parse(layout, v); err == nil {
				return max(t.Sub(now), 0), true
			}
		}
		return 0, false
	}
	if unixTimestamp {
		// Envoy counts in whole seconds from now.
		nowS := now.Unix()
		if nowS < 0 || n < uint64(nowS) {
			return 0, false
		}
		n -= uint64(nowS)
	}
	if n > uint64(maxResetSeconds) {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// NextHTTP decides, for an attempt of an HTTP request that gave a (and is
// not committed: the adapter could replay its request), whether it is
// retried and after how long, as Envoy's router decides: a condition of
// the policy (RetriesHTTP), not past num_retries; after the interval a
// reset header of the response asks for (ResetInterval), jittered to
// between it and 1.5 times it, else after the exponential back-off
// (HTTPBackoff). u is uniform in [0, 1); now is the time reset headers
// count from.
func (s *RetryState) NextHTTP(p *RetryPolicy, a *HTTPAttempt, now time.Time, u float64) (time.Duration, bool) {
	if s.Attempts >= p.MaxAttempts || !p.RetriesHTTP(a) {
		return 0, false
	}
	if d, ok := p.ResetInterval(a.Headers, now); ok {
		return durationOf(float64(d) * (1 + u/2)), true
	}
	d := p.HTTPBackoff(s.sincePushback, u)
	s.sincePushback++
	return d, true
}

// durationOf is f nanoseconds, at most the longest time.Duration (a
// float64 that large does not convert).
func durationOf(f float64) time.Duration {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(max(f, 0))
}
