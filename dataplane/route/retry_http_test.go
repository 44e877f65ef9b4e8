package route

import (
	"strconv"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
)

var httpOpts = Options{HTTP: true}

// The conditions of x-envoy-retry-on for HTTP
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/router_filter#x-envoy-retry-on),
// each against what it retries and what it does not.
func TestRetriesHTTP(t *testing.T) {
	resp := func(status int, h headers) *HTTPAttempt { return &HTTPAttempt{Status: status, Headers: h} }
	fail := func(f Failure) *HTTPAttempt { return &HTTPAttempt{Failure: f} }
	in := &routev3.RetryPolicy{
		RetriableStatusCodes: []uint32{429, 418},
		RetriableHeaders: []*routev3.HeaderMatcher{{
			Name:                 "X-Retry-Me",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "yes"}}},
		}},
	}
	for _, tc := range []struct {
		on       string
		retry    []*HTTPAttempt
		notRetry []*HTTPAttempt
	}{
		{"5xx",
			[]*HTTPAttempt{resp(500, nil), resp(503, nil), resp(599, nil), fail(Reset), fail(ConnectFailure), fail(RefusedStream), fail(Timeout)},
			[]*HTTPAttempt{resp(200, nil), resp(409, nil), resp(429, nil), resp(600, nil), resp(503, headers{"x-envoy-ratelimited": "true"}), resp(503, headers{"x-envoy-overloaded": "true"})}},
		{"gateway-error",
			[]*HTTPAttempt{resp(502, nil), resp(503, nil), resp(504, nil), fail(Reset), fail(ConnectFailure), fail(Timeout)},
			[]*HTTPAttempt{resp(500, nil), resp(501, nil), resp(505, nil)}},
		{"reset",
			[]*HTTPAttempt{fail(Reset), fail(Timeout), fail(ConnectFailure), fail(RefusedStream)},
			[]*HTTPAttempt{resp(500, nil), resp(503, nil)}},
		{"connect-failure",
			[]*HTTPAttempt{fail(ConnectFailure)},
			[]*HTTPAttempt{fail(Reset), fail(Timeout), fail(RefusedStream), resp(503, nil)}},
		{"refused-stream",
			[]*HTTPAttempt{fail(RefusedStream)},
			[]*HTTPAttempt{fail(Reset), fail(ConnectFailure), resp(503, nil)}},
		{"retriable-4xx",
			[]*HTTPAttempt{resp(409, nil)},
			[]*HTTPAttempt{resp(400, nil), resp(429, nil), resp(500, nil), fail(Reset)}},
		{"retriable-status-codes",
			[]*HTTPAttempt{resp(429, nil), resp(418, nil)},
			[]*HTTPAttempt{resp(500, nil), resp(409, nil), fail(Reset)}},
		{"retriable-headers",
			[]*HTTPAttempt{resp(200, headers{"x-retry-me": "yes"}), resp(500, headers{"x-retry-me": "yes"})},
			[]*HTTPAttempt{resp(200, headers{"x-retry-me": "no"}), resp(500, nil), fail(Reset)}},
		{"envoy-ratelimited",
			[]*HTTPAttempt{resp(429, headers{"x-envoy-ratelimited": "true"})},
			[]*HTTPAttempt{resp(429, nil), resp(503, nil)}},
		// Unknown names, gRPC's among them, are ignored, as Envoy's
		// route configuration ignores them.
		{"unavailable, no-such-thing ,5XX",
			[]*HTTPAttempt{resp(500, nil)},
			[]*HTTPAttempt{resp(200, nil)}},
	} {
		in.RetryOn = tc.on
		p := parseRetryPolicy(in, httpOpts)
		if p == nil {
			t.Errorf("retry_on %q: no policy", tc.on)
			continue
		}
		for _, a := range tc.retry {
			if !p.RetriesHTTP(a) {
				t.Errorf("retry_on %q does not retry %+v", tc.on, *a)
			}
		}
		for _, a := range tc.notRetry {
			if p.RetriesHTTP(a) {
				t.Errorf("retry_on %q retries %+v", tc.on, *a)
			}
		}
	}
}

// The policy's defaults and bounds for HTTP: num_retries 1, a base of
// 25 ms (at least 1 ms) and a max of ten times it; a policy of no known
// condition, or none of its own retries, is kept only for its
// per_try_timeout, with one attempt.
func TestHTTPRetryPolicy(t *testing.T) {
	in := &routev3.RetryPolicy{RetryOn: "5xx"}
	p := parseRetryPolicy(in, httpOpts)
	if p == nil || p.MaxAttempts != 2 || p.Base != 25*time.Millisecond || p.Max != 250*time.Millisecond || p.HTTP == nil || p.HTTP.RateLimitedMax != 300*time.Second {
		t.Fatalf("defaults: %+v", p)
	}
	in.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Microsecond)}
	if p := parseRetryPolicy(in, httpOpts); p.Base != time.Millisecond || p.Max != 10*time.Millisecond {
		t.Errorf("base_interval 1µs: base %v, max %v; want 1ms and 10ms", p.Base, p.Max)
	}
	for _, in := range []*routev3.RetryPolicy{{RetryOn: "cancelled"}, {RetryOn: "5xx", NumRetries: wrapperspb.UInt32(0)}} {
		if p := parseRetryPolicy(in, httpOpts); p != nil {
			t.Errorf("%v: %+v; want no policy", in, p)
		}
		in.PerTryTimeout = durationpb.New(time.Second)
		if p := parseRetryPolicy(in, httpOpts); p == nil || p.MaxAttempts != 1 || p.HTTP.PerTryTimeout != time.Second {
			t.Errorf("%v: %+v; want one attempt of at most 1s", in, p)
		}
	}
	in = &routev3.RetryPolicy{RetryOn: "retriable-headers", PerTryIdleTimeout: durationpb.New(time.Second), RetriableHeaders: []*routev3.HeaderMatcher{
		{Name: ""},
		{Name: "x-ok"},
	}}
	p = parseRetryPolicy(in, httpOpts)
	if p.HTTP.Err == nil || !strings.Contains(p.HTTP.Err.Error(), "retriable_headers[0]") || len(p.HTTP.Headers) != 1 || p.HTTP.PerTryIdleTimeout != time.Second {
		t.Errorf("a bad retriable_headers matcher: %+v, %v", p.HTTP, p.HTTP.Err)
	}
	// The same policy is gRPC's without Options.HTTP: no HTTP part.
	if p := parseRetryPolicy(&routev3.RetryPolicy{RetryOn: "unavailable", PerTryTimeout: durationpb.New(time.Second)}, Options{RetryOn: testRetryOn}); p == nil || p.HTTP != nil {
		t.Errorf("gRPC's policy: %+v", p)
	}
	// A Table of HTTPOptions parses its routes' policies so.
	r := prefixRoute("/")
	r.RetryPolicy = &routev3.RetryPolicy{RetryOn: "gateway-error", NumRetries: wrapperspb.UInt32(3)}
	var d Decision
	if err := NewTable(&resources.VirtualHost{Routes: []*resources.Route{r}}, nil, httpOpts).Route(&Request{Path: "/x"}, &d); err != nil || d.Retry == nil || d.Retry.MaxAttempts != 4 || !d.Retry.RetriesHTTP(&HTTPAttempt{Status: 502}) {
		t.Errorf("Table's HTTP policy: %+v, %v", d.Retry, err)
	}
}

// retriable_request_headers: a request is retried only if it matches one.
func TestAllowsRequest(t *testing.T) {
	in := &routev3.RetryPolicy{RetryOn: "5xx"}
	if p := parseRetryPolicy(in, httpOpts); !p.AllowsRequest(nil) {
		t.Error("no retriable_request_headers: a request is not allowed")
	}
	in.RetriableRequestHeaders = []*routev3.HeaderMatcher{{Name: "x-idempotent"}, {Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "GET"}}}
	p := parseRetryPolicy(in, httpOpts)
	for h, want := range map[*headers]bool{
		{"x-idempotent": "1"}: true,
		{":method": "GET"}:    true,
		{":method": "POST"}:   false,
		{}:                    false,
	} {
		if got := p.AllowsRequest(*h); got != want {
			t.Errorf("request %v: allowed %t, want %t", *h, got, want)
		}
	}
}

// Envoy's back-off (x-envoy-max-retries): retry N waits uniformly in
// [0, (2^N-1)·base), capped at max_interval.
func TestHTTPBackoff(t *testing.T) {
	p := &RetryPolicy{Base: 25 * time.Millisecond, Max: 250 * time.Millisecond}
	for n, upper := range []time.Duration{25, 75, 175, 250, 250} {
		upper *= time.Millisecond
		if lo := p.HTTPBackoff(n, 0); lo != 0 {
			t.Errorf("retry %d: shortest %v; want 0", n+1, lo)
		}
		if hi := p.HTTPBackoff(n, 0.999999); hi > upper || hi < upper*99/100 {
			t.Errorf("retry %d: longest %v; want just under %v", n+1, hi, upper)
		}
	}
	if d := p.HTTPBackoff(1000, 0.5); d != p.Max {
		t.Errorf("retry 1001: %v; want max %v", d, p.Max)
	}
	huge := &RetryPolicy{Base: time.Hour, Max: 1<<63 - 1}
	if d := huge.HTTPBackoff(100, 0.999); d <= 0 {
		t.Errorf("a back-off past time.Duration's range: %v", d)
	}
}

var resetNow = time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)

// rate_limited_retry_back_off's reset headers: Retry-After in seconds
// (and, as RFC 9110 allows, an HTTP date), X-RateLimit-Reset as a Unix
// time; tried in order, a value past max_interval or unparsable skipped.
func TestResetInterval(t *testing.T) {
	in := &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{429},
		RateLimitedRetryBackOff: &routev3.RetryPolicy_RateLimitedRetryBackOff{
			ResetHeaders: []*routev3.RetryPolicy_ResetHeader{
				{Name: "Retry-After"},
				{Name: "X-RateLimit-Reset", Format: routev3.RetryPolicy_UNIX_TIMESTAMP},
			},
			MaxInterval: durationpb.New(time.Minute),
		}}
	p := parseRetryPolicy(in, httpOpts)
	ts := func(d time.Duration) string { return strconv.FormatInt(resetNow.Add(d).Unix(), 10) }
	for _, tc := range []struct {
		h    headers
		want time.Duration
		ok   bool
	}{
		{headers{"retry-after": "7"}, 7 * time.Second, true},
		{headers{"retry-after": " 7 "}, 7 * time.Second, true},
		{headers{"retry-after": "7,30"}, 7 * time.Second, true},
		{headers{"retry-after": resetNow.Add(20 * time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT")}, 20 * time.Second, true},
		{headers{"retry-after": resetNow.Add(-time.Hour).Format("Mon, 02 Jan 2006 15:04:05 GMT")}, 0, true},
		{headers{"x-ratelimit-reset": ts(12 * time.Second)}, 12 * time.Second, true},
		{headers{"retry-after": "soon", "x-ratelimit-reset": ts(12 * time.Second)}, 12 * time.Second, true},
		{headers{"retry-after": "61", "x-ratelimit-reset": ts(3 * time.Second)}, 3 * time.Second, true},
		{headers{"retry-after": "-1"}, 0, false},
		{headers{"retry-after": "1.5"}, 0, false},
		{headers{"retry-after": "61"}, 0, false},
		{headers{"x-ratelimit-reset": ts(-time.Second)}, 0, false},
		{headers{"x-ratelimit-reset": "Mon, 02 Jan 2006 15:04:05 GMT"}, 0, false},
		{headers{"retry-after": "99999999999999999999"}, 0, false},
		{headers{}, 0, false},
	} {
		got, ok := p.ResetInterval(tc.h, resetNow)
		if got != tc.want || ok != tc.ok {
			t.Errorf("headers %v: %v, %t; want %v, %t", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}

// NextHTTP: a retriable attempt waits the reset header's interval,
// jittered to [1, 1.5) times it, else the exponential back-off, whose
// count the rate-limited waits do not restart; not past num_retries; not
// an attempt the policy does not retry.
func TestNextHTTP(t *testing.T) {
	p := parseRetryPolicy(&routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(3),
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(time.Hour)},
		RateLimitedRetryBackOff: &routev3.RetryPolicy_RateLimitedRetryBackOff{
			ResetHeaders: []*routev3.RetryPolicy_ResetHeader{{Name: "retry-after"}},
		}}, httpOpts)
	s := RetryState{Attempts: 1}
	if _, ok := s.NextHTTP(p, &HTTPAttempt{Status: 404}, resetNow, 0.5); ok {
		t.Error("a 404 retried under 5xx")
	}
	if d, ok := s.NextHTTP(p, &HTTPAttempt{Status: 503}, resetNow, 0.5); !ok || d != 500*time.Millisecond {
		t.Errorf("first retry: %v, %t; want 0.5s (half of [0, 1s))", d, ok)
	}
	s.Attempts++
	for u, want := range map[float64]time.Duration{0: 10 * time.Second, 0.5: 12500 * time.Millisecond} {
		if d, ok := s.NextHTTP(p, &HTTPAttempt{Status: 503, Headers: headers{"retry-after": "10"}}, resetNow, u); !ok || d != want {
			t.Errorf("Retry-After 10 with u=%v: %v, %t; want %v", u, d, ok, want)
		}
	}
	s.Attempts++
	if d, ok := s.NextHTTP(p, &HTTPAttempt{Failure: Reset}, resetNow, 0.5); !ok || d != 1500*time.Millisecond {
		t.Errorf("third retry: %v, %t; want 1.5s (half of [0, 3s))", d, ok)
	}
	s.Attempts++
	if _, ok := s.NextHTTP(p, &HTTPAttempt{Status: 503}, resetNow, 0.5); ok {
		t.Error("retried past num_retries 3")
	}
}

// RetryPolicyOf gives a route's policy, parsed once, to an adapter that
// matched the route itself.
func TestRetryPolicyOf(t *testing.T) {
	own, inherits := prefixRoute("/own"), prefixRoute("/")
	own.RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(4)}
	vh := &resources.VirtualHost{Routes: []*resources.Route{own, inherits}, RetryPolicy: &routev3.RetryPolicy{RetryOn: "reset"}}
	tbl := NewTable(vh, nil, httpOpts)
	p := tbl.RetryPolicyOf(own)
	if p == nil || p.MaxAttempts != 5 || tbl.RetryPolicyOf(own) != p {
		t.Errorf("route's own: %+v, not the same twice", p)
	}
	if p := tbl.RetryPolicyOf(inherits); p == nil || !p.RetriesHTTP(&HTTPAttempt{Failure: Reset}) || p.RetriesHTTP(&HTTPAttempt{Status: 500}) {
		t.Errorf("virtual host's: %+v", p)
	}
	if p := tbl.RetryPolicyOf(prefixRoute("/")); p != nil {
		t.Errorf("a route not of the table: %+v", p)
	}
	if n := testing.AllocsPerRun(100, func() { tbl.RetryPolicyOf(inherits) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
