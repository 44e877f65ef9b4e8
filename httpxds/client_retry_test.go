package httpxds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/testutils"
)

// The retry loop's tests follow Envoy's router
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/router_filter#x-envoy-retry-on)
// and RetryPolicy
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#envoy-v3-api-msg-config-route-v3-retrypolicy),
// with real servers: attempt try goes to backend try (the last one for
// any try past them) through http.DefaultTransport.

const retryTestTimeout = 20 * time.Second

// backend is a test server that counts its requests and keeps their
// bodies and attempt-count headers.
type backend struct {
	srv    *httptest.Server
	hits   atomic.Int32
	mu     sync.Mutex
	bodies []string
	counts []string
	// hit is closed and replaced at each request, for waitHits.
	hit chan struct{}
}

func newBackend(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *backend {
	t.Helper()
	b := &backend{hit: make(chan struct{})}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.bodies = append(b.bodies, string(body))
		b.counts = append(b.counts, r.Header.Get(attemptCountHeader))
		b.hits.Add(1)
		close(b.hit)
		b.hit = make(chan struct{})
		b.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func status(code int, hdr ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	}
}

// resetting closes the connection without a response.
func resetting(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// closedAddr is an address nothing listens on: connecting fails.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// attemptTo sends attempt try to addrs[try] (the last for later tries).
func attemptTo(addrs ...string) attemptFunc {
	return func(ctx context.Context, req *http.Request, try int) (*http.Response, error) {
		r := req.WithContext(ctx)
		u := *req.URL
		u.Host = addrs[min(try, len(addrs)-1)]
		r.URL, r.Host = &u, ""
		return http.DefaultTransport.RoundTrip(r)
	}
}

func host(b *backend) string { return strings.TrimPrefix(b.srv.URL, "http://") }

func httpPolicy(t *testing.T, in *routev3.RetryPolicy) *route.RetryPolicy {
	t.Helper()
	p := route.ParseRetryPolicy(in, route.Options{HTTP: true})
	if p == nil {
		t.Fatalf("no policy of %v", in)
	}
	return p
}

func newRequest(t *testing.T, ctx context.Context, body io.Reader) *http.Request {
	t.Helper()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://svc.example/p", body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// readAll reads and closes a response's body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	return string(b)
}

// Each retry_on condition retries what it names, once (num_retries
// defaults to 1), and returns the last attempt's response; what it does
// not name is returned at once.
func TestRetryOnConditions(t *testing.T) {
	ok := newBackend(t, status(200))
	for _, tc := range []struct {
		on      string
		extra   func(*routev3.RetryPolicy)
		fail    func(http.ResponseWriter, *http.Request) // nil: a closed port
		notFail func(http.ResponseWriter, *http.Request) // what the condition does not retry; nil: none
	}{
		{on: "5xx", fail: status(500), notFail: status(409)},
		{on: "gateway-error", fail: status(503), notFail: status(500)},
		{on: "retriable-4xx", fail: status(409), notFail: status(429)},
		{on: "retriable-status-codes", extra: func(p *routev3.RetryPolicy) { p.RetriableStatusCodes = []uint32{429} }, fail: status(429), notFail: status(503)},
		{on: "retriable-headers", extra: func(p *routev3.RetryPolicy) {
			p.RetriableHeaders = []*routev3.HeaderMatcher{{Name: "x-upstream-busy", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "1"}}}}}
		}, fail: status(200, "X-Upstream-Busy", "1"), notFail: status(200, "X-Upstream-Busy", "0")},
		{on: "reset", fail: resetting, notFail: status(503)},
		{on: "connect-failure", fail: nil, notFail: resetting},
		{on: "envoy-ratelimited", fail: status(429, "X-Envoy-Ratelimited", "true"), notFail: status(429)},
		{on: "5xx", fail: status(502), notFail: status(503, "X-Envoy-Overloaded", "true")},
		{on: "5xx", fail: nil},       // 5xx includes connect-failure
		{on: "5xx", fail: resetting}, // and resets
	} {
		t.Run(tc.on, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
			defer cancel()
			in := &routev3.RetryPolicy{RetryOn: tc.on}
			if tc.extra != nil {
				tc.extra(in)
			}
			p := httpPolicy(t, in)
			r := &retrier{rand: func() float64 { return 0 }}
			first, bad := closedAddr(t), (*backend)(nil)
			if tc.fail != nil {
				bad = newBackend(t, tc.fail)
				first = host(bad)
			}
			before := ok.hits.Load()
			resp, err := r.send(ctx, newRequest(t, ctx, nil), p, false, attemptTo(first, host(ok)))
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			if got := readAll(t, resp); resp.StatusCode != 200 || got != "status 200" {
				t.Errorf("got %d %q; want the retry's 200", resp.StatusCode, got)
			}
			if ok.hits.Load() != before+1 || (bad != nil && bad.hits.Load() != 1) {
				t.Errorf("attempts: failing backend %v, good one %d; want 1 each", bad, ok.hits.Load()-before)
			}
			if tc.notFail == nil {
				return
			}
			other := newBackend(t, tc.notFail)
			before = ok.hits.Load()
			resp, err = r.send(ctx, newRequest(t, ctx, nil), p, false, attemptTo(host(other), host(ok)))
			if err == nil {
				readAll(t, resp)
			}
			if ok.hits.Load() != before || other.hits.Load() != 1 {
				t.Errorf("retry_on %s retried what it does not name: %d attempts", tc.on, other.hits.Load()+ok.hits.Load()-before)
			}
		})
	}
}

// refused-stream: net/http's HTTP/2 transport gives REFUSED_STREAM as an
// error of an unexported type, known by its text (its own retry of it
// failed too).
func TestRetryOnRefusedStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	ok := newBackend(t, status(200))
	real := attemptTo(host(ok))
	attempt := func(ctx context.Context, req *http.Request, try int) (*http.Response, error) {
		if try == 0 {
			return nil, errors.New("http2: stream error: stream ID 3; REFUSED_STREAM")
		}
		return real(ctx, req, try)
	}
	for on, retried := range map[string]bool{"refused-stream": true, "connect-failure": false} {
		before := ok.hits.Load()
		resp, err := (&retrier{}).send(ctx, newRequest(t, ctx, nil), httpPolicy(t, &routev3.RetryPolicy{RetryOn: on}), false, attempt)
		if retried && (err != nil || resp.StatusCode != 200) || !retried && (err == nil || ok.hits.Load() != before) {
			t.Errorf("retry_on %s: %v, %v; want retried %t", on, resp, err, retried)
		}
		if err == nil {
			readAll(t, resp)
		}
	}
}

// A request the client refused to send (a drop, the circuit breaker: an
// error, or a local reply) is not retried, as Envoy's router answers it
// locally; nor is one under a policy of retriable_request_headers it does
// not match.
func TestRetryNotForLocalRefusalsOrUnmatchedRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	p := httpPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx,reset", NumRetries: wrapperspb.UInt32(3)})
	refusals := []error{
		&cluster.DropError{Category: "c"}, &cluster.OverloadError{Cluster: "c", MaxRequests: 1},
		fmt.Errorf("no endpoint: %w", errNotSent), notSent{errors.New("an https request: not sent in plaintext")},
		ErrTransportClosed,
	}
	for _, refusal := range refusals {
		var n int
		_, err := (&retrier{}).send(ctx, newRequest(t, ctx, nil), p, false, func(context.Context, *http.Request, int) (*http.Response, error) {
			n++
			return nil, refusal
		})
		if n != 1 || !errors.Is(err, refusal) {
			t.Errorf("%v: %d attempts, error %v; want 1 and it", refusal, n, err)
		}
	}
	var n int
	resp, err := (&retrier{}).send(ctx, newRequest(t, ctx, nil), p, false, func(_ context.Context, req *http.Request, _ int) (*http.Response, error) {
		n++
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: localBody{strings.NewReader("no healthy upstream")}, Request: req}, nil
	})
	if err != nil || n != 1 || resp.StatusCode != 503 {
		t.Errorf("a local 503: %v, %v after %d attempts; want it after 1", resp, err, n)
	}
	bad := newBackend(t, status(503))
	in := &routev3.RetryPolicy{RetryOn: "5xx", RetriableRequestHeaders: []*routev3.HeaderMatcher{{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "GET"}}}}
	resp, err = (&retrier{}).send(ctx, newRequest(t, ctx, strings.NewReader("x")), httpPolicy(t, in), false, attemptTo(host(bad)))
	if err != nil || resp.StatusCode != 503 || bad.hits.Load() != 1 {
		t.Errorf("a POST under retriable_request_headers :method GET: %v, %v, %d attempts; want one 503", resp, err, bad.hits.Load())
	}
	readAll(t, resp)
	resp, err = (&retrier{rand: func() float64 { return 0 }}).send(ctx, newRequest(t, ctx, nil), httpPolicy(t, in), false, attemptTo(host(bad)))
	if err != nil || bad.hits.Load() != 3 {
		t.Errorf("a GET: %v, %d attempts in all; want 2 more", err, bad.hits.Load())
	}
	readAll(t, resp)
}

// sent runs send in a goroutine; its result arrives on the channel.
type sendResult struct {
	resp *http.Response
	err  error
}

// recv waits for send's result.
func recv(t *testing.T, ctx context.Context, done <-chan sendResult) sendResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
		t.Fatal("send did not return")
	}
	return sendResult{}
}

func sendAsync(ctx context.Context, r *retrier, req *http.Request, p *route.RetryPolicy, attempt attemptFunc) <-chan sendResult {
	ch := make(chan sendResult, 1)
	go func() {
		resp, err := r.send(ctx, req, p, false, attempt)
		ch <- sendResult{resp, err}
	}()
	return ch
}

// The back-off is Envoy's, on the retrier's clock: retry N waits
// uniformly in [0, (2^N-1)·base_interval), and no attempt starts before
// its wait has passed.
func TestRetryBackoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	bad, ok := newBackend(t, status(503)), newBackend(t, status(200))
	clock := testutils.NewFakeClock(time.Unix(1e9, 0))
	r := &retrier{clock: clock, rand: func() float64 { return 0.5 }}
	p := httpPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2),
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(100 * time.Millisecond)}})
	done := sendAsync(ctx, r, newRequest(t, ctx, nil), p, attemptTo(host(bad), host(bad), host(ok)))
	start := clock.Now()
	for i, wait := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond} { // half of 100ms, of 300ms
		if err := clock.WaitForTimerAt(ctx, start.Add(wait)); err != nil {
			t.Fatalf("back-off %d: %v", i+1, err)
		}
		if got := bad.hits.Load() + ok.hits.Load(); got != int32(i+1) {
			t.Fatalf("%d attempts before back-off %d has passed; want %d", got, i+1, i+1)
		}
		clock.Advance(wait - time.Nanosecond)
		if got := bad.hits.Load() + ok.hits.Load(); got != int32(i+1) {
			t.Fatalf("%d attempts before back-off %d has passed; want %d", got, i+1, i+1)
		}
		clock.Advance(time.Nanosecond)
		start = clock.Now()
	}
	res := recv(t, ctx, done)
	if res.err != nil || res.resp.StatusCode != 200 {
		t.Fatalf("send: %v, %v", res.resp, res.err)
	}
	readAll(t, res.resp)
}

// rate_limited_retry_back_off: Retry-After (seconds) sets the wait,
// jittered to [1, 1.5) times it; past max_interval it is ignored and the
// exponential back-off applies.
func TestRetryAfter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	ok := newBackend(t, status(200))
	in := &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{429},
		RateLimitedRetryBackOff: &routev3.RetryPolicy_RateLimitedRetryBackOff{
			ResetHeaders: []*routev3.RetryPolicy_ResetHeader{{Name: "Retry-After"}},
			MaxInterval:  durationpb.New(time.Minute),
		}}
	for after, want := range map[string]time.Duration{"7": 7 * time.Second, "61": 0} {
		limited := newBackend(t, status(429, "Retry-After", after))
		clock := testutils.NewFakeClock(time.Unix(1e9, 0))
		r := &retrier{clock: clock, rand: func() float64 { return 0 }}
		done := sendAsync(ctx, r, newRequest(t, ctx, nil), httpPolicy(t, in), attemptTo(host(limited), host(ok)))
		if want > 0 {
			if err := clock.WaitForTimerAt(ctx, clock.Now().Add(want)); err != nil {
				t.Fatalf("Retry-After %s: %v", after, err)
			}
			clock.Advance(want)
		}
		res := recv(t, ctx, done)
		if res.err != nil || res.resp.StatusCode != 200 {
			t.Fatalf("Retry-After %s: %v, %v", after, res.resp, res.err)
		}
		readAll(t, res.resp)
	}
}

// noGetBody is a request body http.NewRequest cannot give again.
type noGetBody struct{ io.Reader }

// A body without GetBody is buffered for replay up to the retrier's
// bound: within it, the retry sends the whole body again; past it, the
// request is committed to its first attempt and not retried. With no
// buffer, a body is replayed only if no attempt read any of it.
func TestRetryBodyBuffer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	p := httpPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx"})
	body := strings.Repeat("b", 100)
	for _, tc := range []struct {
		limit     int64
		firstDown bool // the first attempt cannot connect: reads nothing
		retried   bool
	}{
		{limit: 100, retried: true},
		{limit: 0, retried: true}, // DefaultRetryBufferLimit
		{limit: 99, retried: false},
		{limit: -1, retried: false},
		{limit: -1, firstDown: true, retried: true},
		{limit: 10, firstDown: true, retried: true},
	} {
		bad, ok := newBackend(t, status(503)), newBackend(t, status(200))
		first := host(bad)
		if tc.firstDown {
			first = closedAddr(t)
		}
		req := newRequest(t, ctx, noGetBody{strings.NewReader(body)})
		req.ContentLength = -1 // unknown: the bound is found by reading
		resp, err := (&retrier{bufferLimit: tc.limit, rand: func() float64 { return 0 }}).send(ctx, req, p, false, attemptTo(first, host(ok)))
		if err != nil {
			t.Fatalf("limit %d: %v", tc.limit, err)
		}
		readAll(t, resp)
		if got := ok.hits.Load() == 1; got != tc.retried {
			t.Errorf("limit %d, first attempt down %t: retried %t, want %t (status %d)", tc.limit, tc.firstDown, got, tc.retried, resp.StatusCode)
		}
		if tc.retried && (len(ok.bodies) != 1 || ok.bodies[0] != body) {
			t.Errorf("limit %d: the retry sent %q; want the whole body", tc.limit, ok.bodies)
		}
		if !tc.firstDown && bad.bodies[0] != body {
			t.Errorf("limit %d: the first attempt sent %q", tc.limit, bad.bodies[0])
		}
	}
	// GetBody gives the body again, whatever its size.
	bad, ok := newBackend(t, status(503)), newBackend(t, status(200))
	resp, err := (&retrier{bufferLimit: -1}).send(ctx, newRequest(t, ctx, strings.NewReader(body)), p, false, attemptTo(host(bad), host(ok)))
	if err != nil || len(ok.bodies) != 1 || ok.bodies[0] != body {
		t.Fatalf("a body with GetBody: %v; retry sent %q", err, ok.bodies)
	}
	readAll(t, resp)
}

// closeCounter counts Close calls of a body.
type closeCounter struct {
	io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

// The request's body is closed once, after the last attempt; a retried
// attempt's response is drained and closed; the user's request is not
// changed; with include_request_attempt_count each attempt says its
// number.
func TestRetryClosesAndCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	bad, ok := newBackend(t, status(503)), newBackend(t, status(200))
	p := httpPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2)})
	body := &closeCounter{Reader: strings.NewReader("payload")}
	req := newRequest(t, ctx, nil)
	req.Method, req.Body, req.ContentLength = http.MethodPost, body, 7
	req.Header.Set("X-Mine", "1")
	var retriedBodies []*trackedBody
	real := attemptTo(host(bad), host(bad), host(ok))
	attempt := func(ctx context.Context, r *http.Request, try int) (*http.Response, error) {
		resp, err := real(ctx, r, try)
		if err == nil && try < 2 {
			tb := &trackedBody{ReadCloser: resp.Body}
			resp.Body = tb
			retriedBodies = append(retriedBodies, tb)
		}
		return resp, err
	}
	resp, err := (&retrier{rand: func() float64 { return 0 }}).send(ctx, req, p, true, attempt)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := body.closes.Load(); n != 1 {
		t.Errorf("request body closed %d times; want once", n)
	}
	for i, tb := range retriedBodies {
		if !tb.closed || !tb.eof {
			t.Errorf("retried response %d: closed %t, drained %t", i, tb.closed, tb.eof)
		}
	}
	got := append(append([]string(nil), bad.counts...), ok.counts...)
	if strings.Join(got, ",") != "1,2,3" || strings.Join(append(bad.bodies, ok.bodies...), ",") != "payload,payload,payload" {
		t.Errorf("attempts sent counts %q and bodies %q", got, append(bad.bodies, ok.bodies...))
	}
	if req.Header.Get(attemptCountHeader) != "" || req.Header.Get("X-Mine") != "1" || req.Body != body {
		t.Errorf("the caller's request was changed: %v", req.Header)
	}
}

type trackedBody struct {
	io.ReadCloser
	closed, eof bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.eof = b.eof || err == io.EOF
	return n, err
}

func (b *trackedBody) Close() error { b.closed = true; return b.ReadCloser.Close() }

// per_try_timeout ends an attempt that has no response in time, which is
// then retried as a reset; the last attempt's timeout is the error, a
// context.DeadlineExceeded. Once the response has come, the timeout no
// longer applies.
func TestPerTryTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	slow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	ok := newBackend(t, status(200))
	in := &routev3.RetryPolicy{RetryOn: "reset", PerTryTimeout: durationpb.New(time.Second)}
	clock := testutils.NewFakeClock(time.Unix(1e9, 0))
	r := &retrier{clock: clock, rand: func() float64 { return 0 }}
	done := sendAsync(ctx, r, newRequest(t, ctx, nil), httpPolicy(t, in), attemptTo(host(slow), host(ok)))
	waitHits(t, ctx, slow, 1)
	clock.Advance(time.Second)
	res := recv(t, ctx, done)
	if res.err != nil || res.resp.StatusCode != 200 {
		t.Fatalf("after a per-try timeout: %v, %v; want the retry's 200", res.resp, res.err)
	}
	clock.Advance(time.Hour) // past the response: no effect on its body
	if got := readAll(t, res.resp); got != "status 200" {
		t.Errorf("body %q", got)
	}

	in.NumRetries = wrapperspb.UInt32(0) // a single attempt, still bounded
	done = sendAsync(ctx, r, newRequest(t, ctx, nil), httpPolicy(t, in), attemptTo(host(slow)))
	waitHits(t, ctx, slow, 2)
	clock.Advance(time.Second)
	res = recv(t, ctx, done)
	if res.err == nil || !errors.Is(res.err, context.DeadlineExceeded) || !strings.Contains(res.err.Error(), "per_try_timeout 1s") {
		t.Errorf("a lone attempt past per_try_timeout: %v; want a deadline error naming per_try_timeout", res.err)
	}
}

// per_try_idle_timeout ends a response whose body stops moving.
func TestPerTryIdleTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	stalls := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	in := &routev3.RetryPolicy{RetryOn: "5xx", PerTryIdleTimeout: durationpb.New(time.Second)}
	clock := testutils.NewFakeClock(time.Unix(1e9, 0))
	r := &retrier{clock: clock}
	resp, err := r.send(ctx, newRequest(t, ctx, nil), httpPolicy(t, in), false, attemptTo(host(stalls)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := resp.Body.Read(buf); read <- err }()
	if err := clock.WaitForTimerAt(ctx, clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	select {
	case err := <-read:
		if err == nil {
			t.Error("a stalled body read on past per_try_idle_timeout")
		}
	case <-ctx.Done():
		t.Fatal("a stalled body was not ended by per_try_idle_timeout")
	}

	// Before the response, the idle timeout ends the attempt as
	// per_try_timeout does: it is retried.
	silent := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	ok := newBackend(t, status(200))
	done := sendAsync(ctx, &retrier{clock: clock, rand: func() float64 { return 0 }}, newRequest(t, ctx, nil), httpPolicy(t, in), attemptTo(host(silent), host(ok)))
	waitHits(t, ctx, silent, 1)
	if err := clock.WaitForTimerAt(ctx, clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	res := recv(t, ctx, done)
	if res.err != nil || res.resp.StatusCode != 200 {
		t.Fatalf("after an idle attempt: %v, %v; want the retry's 200", res.resp, res.err)
	}
	readAll(t, res.resp)
}

// waitHits waits until n requests reached b.
func waitHits(t *testing.T, ctx context.Context, b *backend, n int32) {
	t.Helper()
	for {
		b.mu.Lock()
		hit := b.hit
		b.mu.Unlock()
		if b.hits.Load() >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d requests, waited for %d", b.hits.Load(), n)
		case <-hit:
		}
	}
}

// Cancelling the request's context stops the back-off wait (and with it
// every later attempt) and an attempt under way.
func TestRetryContextCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	bad := newBackend(t, status(503))
	clock := testutils.NewFakeClock(time.Unix(1e9, 0))
	r := &retrier{clock: clock, rand: func() float64 { return 0.5 }}
	p := httpPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(5)})
	rctx, rcancel := context.WithCancel(ctx)
	done := sendAsync(rctx, r, newRequest(t, rctx, nil), p, attemptTo(host(bad)))
	if err := clock.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	rcancel()
	res := recv(t, ctx, done)
	if !errors.Is(res.err, context.Canceled) || bad.hits.Load() != 1 {
		t.Errorf("cancelled in the back-off: %v after %d attempts; want context.Canceled after 1", res.err, bad.hits.Load())
	}
	if clock.Pending() != 0 {
		t.Errorf("%d timers left", clock.Pending())
	}

	release := make(chan struct{})
	defer close(release)
	slow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	rctx, rcancel = context.WithCancel(ctx)
	done = sendAsync(rctx, r, newRequest(t, rctx, nil), httpPolicy(t, &routev3.RetryPolicy{RetryOn: "reset,5xx", NumRetries: wrapperspb.UInt32(5)}), attemptTo(host(slow)))
	waitHits(t, ctx, slow, 1)
	rcancel()
	res = recv(t, ctx, done)
	if !errors.Is(res.err, context.Canceled) || slow.hits.Load() != 1 {
		t.Errorf("cancelled in an attempt: %v after %d attempts; want context.Canceled after 1", res.err, slow.hits.Load())
	}
}

// Without a policy, the one attempt is the caller's request itself.
func TestNoPolicyOneAttempt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), retryTestTimeout)
	defer cancel()
	req := newRequest(t, ctx, nil)
	var got *http.Request
	resp, err := sendWithRetries(ctx, req, nil, func(_ context.Context, r *http.Request, try int) (*http.Response, error) {
		got = r
		return nil, errors.New("down")
	})
	if resp != nil || err == nil || got != req {
		t.Errorf("no policy: %v, %v, request passed on as is: %t", resp, err, got == req)
	}
}

// replayBody: a later attempt reads again what earlier ones read, then
// the rest; an earlier attempt can no longer read; past the bound the
// attempt reading goes on, and one replaying finds the body lost.
func TestReplayBody(t *testing.T) {
	src := &closeCounter{Reader: strings.NewReader("abcdefgh")}
	rb := &replayBody{src: src, limit: 5}
	a1 := rb.attempt()
	buf := make([]byte, 3)
	if n, err := a1.Read(buf); n != 3 || err != nil || string(buf) != "abc" {
		t.Fatalf("first attempt read %q, %v", buf[:n], err)
	}
	a1.Close()
	if !rb.replayable() || src.closes.Load() != 0 {
		t.Fatalf("after 3 of 5 bytes: replayable %t, source closed %d times", rb.replayable(), src.closes.Load())
	}
	a2, err := rb.getBody()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a1.Read(buf); !errors.Is(err, errBodyReplaced) {
		t.Errorf("the replaced attempt read on: %v", err)
	}
	all, err := io.ReadAll(a2)
	if string(all) != "abcdefgh" || err != nil {
		t.Errorf("the retry read %q, %v; want the whole body", all, err)
	}
	if rb.replayable() {
		t.Error("replayable after 8 bytes with a bound of 5")
	}
	if _, err := rb.getBody(); !errors.Is(err, errBodyLost) {
		t.Errorf("GetBody past the bound: %v", err)
	}
	rb.finish()
	if src.closes.Load() != 0 {
		t.Error("the source closed before the last attempt's body")
	}
	a2.Close()
	a2.Close()
	if src.closes.Load() != 1 {
		t.Errorf("the source closed %d times; want once", src.closes.Load())
	}
}

// A request under a retry policy that succeeds at once costs no
// allocation more than one without (the policy's decision on a 200 looks
// at no header).
func TestRetryAllocatesNothingOnSuccess(t *testing.T) {
	ctx := context.Background()
	req := newRequest(t, ctx, nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: http.NoBody}
	attempt := func(context.Context, *http.Request, int) (*http.Response, error) { return resp, nil }
	p := httpPolicy(t, &routev3.RetryPolicy{RetryOn: "5xx,reset,envoy-ratelimited"})
	var r retrier
	if n := testing.AllocsPerRun(100, func() { _, _ = r.send(ctx, req, p, false, attempt) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}
