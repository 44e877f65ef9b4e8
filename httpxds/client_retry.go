package httpxds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/route"
)

// The client's retries follow Envoy's router
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/router_filter#x-envoy-retry-on
// and RetryPolicy in
// https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto):
// which attempt is retried, and after how long, is dataplane/route's
// (route.RetryState.NextHTTP); what is net/http's is here: telling a
// connection failure from a reset, replaying the request's body, the
// per-attempt timers, draining what a retried attempt got.

// DefaultRetryBufferLimit is how much of a request body the client keeps
// to replay it on a retry when the request cannot give it again itself
// (http.Request.GetBody): 1 MiB, Envoy's default
// per_connection_buffer_limit_bytes, which bounds Envoy's own retry buffer
// when a route sets no request_body_buffer_limit. A request whose body
// runs past it is committed to the attempt sending it, and not retried,
// as Envoy abandons its retries then.
const DefaultRetryBufferLimit = 1 << 20

// attemptCountHeader is what Envoy sets on each attempt it sends upstream
// when the virtual host's include_request_attempt_count is true: the
// attempt's number, from 1.
const attemptCountHeader = "X-Envoy-Attempt-Count"

// maxDrain is the most of a retried attempt's response body read so that
// its connection can serve again; a longer or unknown body is closed
// unread.
const maxDrain = 4 << 10

// attemptFunc sends one attempt of req to a freshly picked endpoint (try
// counts from 0).
type attemptFunc func(ctx context.Context, req *http.Request, try int) (*http.Response, error)

// sendWithRetries runs attempts of req under policy (nil: one attempt),
// as a retrier of the defaults does.
func sendWithRetries(ctx context.Context, req *http.Request, policy *route.RetryPolicy, attempt attemptFunc) (*http.Response, error) {
	var r retrier
	return r.send(ctx, req, policy, false, attempt)
}

// errNotSent marks an attempt's error that no retry condition covers: the
// client itself refused to send the attempt (no endpoint to pick, a drop,
// an overflowing circuit breaker), as Envoy's router answers such a
// request locally and does not retry it. An attemptFunc wraps such errors
// in it; cluster's DropError and OverloadError count too.
var errNotSent = errors.New("not sent")

// localBody is the body of a response the client made itself (Envoy's
// local replies: no healthy upstream, a drop, an overflowing circuit
// breaker), which is not retried: Envoy's router retries what an upstream
// answered, or its failure to. An attemptFunc gives its local responses
// such a body.
type localBody struct{ io.Reader }

// Close does nothing: there is no connection behind the body.
func (localBody) Close() error { return nil }

// retrier runs the attempts of requests. Its zero value is ready: the
// real clock, math/rand's jitter and DefaultRetryBufferLimit.
type retrier struct {
	// clock runs back-off waits and per-attempt timeouts; nil: the real
	// clock.
	clock client.Clock
	// rand draws jitter, uniform in [0, 1); nil: math/rand/v2.
	rand func() float64
	// bufferLimit is the most bytes of a body kept for replay; 0:
	// DefaultRetryBufferLimit; negative: none (a body without GetBody is
	// then replayed only if no attempt has read any of it yet).
	bufferLimit int64
}

func (r *retrier) now() time.Time {
	if r.clock == nil {
		return time.Now()
	}
	return r.clock.Now()
}

func (r *retrier) afterFunc(d time.Duration, f func()) client.Timer {
	if r.clock == nil {
		return time.AfterFunc(d, f)
	}
	return r.clock.AfterFunc(d, f)
}

func (r *retrier) jitter() float64 {
	if r.rand == nil {
		return rand.Float64()
	}
	return r.rand()
}

// oneAttempt is the policy of a request whose route has none.
var oneAttempt = route.RetryPolicy{MaxAttempts: 1}

// send runs attempts of req under policy p (nil: one attempt), each with
// x-envoy-attempt-count when attemptCount (the virtual host's
// include_request_attempt_count), and returns the last attempt's response
// or error. An attempt is retried only if the policy retries what it gave
// (route.RetryState.NextHTTP), the request matches the policy's
// retriable_request_headers, and its body can be sent again: it has none,
// GetBody gives it again, or every byte of it read so far is buffered
// (see replayBody). The response of an attempt retried is drained (up to
// maxDrain) and closed. ctx ends everything: the attempt under way and
// the back-off wait.
func (r *retrier) send(ctx context.Context, req *http.Request, p *route.RetryPolicy, attemptCount bool, attempt attemptFunc) (*http.Response, error) {
	if p == nil {
		if !attemptCount {
			return attempt(ctx, req, 0) // nothing to add: no copy, no timer
		}
		p = &oneAttempt
	}
	retries := p.MaxAttempts > 1 && p.AllowsRequest(retryRequestView{req})
	var body *replayBody
	if retries && req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		limit := r.bufferLimit
		if limit == 0 {
			limit = DefaultRetryBufferLimit
		}
		if req.ContentLength > limit {
			limit = 0 // past the bound from the start: keep nothing
		}
		body = &replayBody{src: req.Body, limit: max(limit, 0)}
		defer body.finish()
	}
	var rs route.RetryState
	var next io.ReadCloser // the body of the next attempt, from GetBody
	for try := 0; ; try++ {
		rs.Attempts = try + 1
		areq := req
		tctx, timers := r.tryContext(ctx, p)
		if tctx != ctx || body != nil || try > 0 || attemptCount {
			areq = req.WithContext(tctx)
		}
		switch {
		case body != nil:
			areq.Body, areq.GetBody = body.attempt(), body.getBody
		case next != nil:
			areq.Body, next = next, nil
		}
		if attemptCount {
			areq.Header = req.Header.Clone()
			areq.Header.Set(attemptCountHeader, strconv.Itoa(try+1))
		}
		resp, err := attempt(tctx, areq, try)
		if timers != nil {
			timers.gotHeaders(err)
		}
		if err == nil && ctx.Err() == nil && retries && !isLocal(resp) {
			if d, ok := rs.NextHTTP(p, &route.HTTPAttempt{Status: resp.StatusCode, Headers: retryHeaderView(resp.Header)}, r.now(), r.jitter()); ok {
				if next, ok = r.replayable(req, body); ok {
					drainRetried(resp)
					timers.stop()
					if err := r.wait(ctx, d); err != nil {
						closeIfAny(next)
						return nil, fmt.Errorf("httpxds: waiting to retry a %s response: %w", resp.Status, err)
					}
					continue
				}
			}
		}
		if err != nil {
			timers.stop()
			if cause := context.Cause(tctx); tctx != ctx && ctx.Err() == nil && errors.As(cause, new(*perTryTimeoutError)) {
				err = fmt.Errorf("%w: %w", cause, err)
			}
			if ctx.Err() == nil && retries && !refusedLocally(err) {
				if d, ok := rs.NextHTTP(p, &route.HTTPAttempt{Failure: failureOf(err)}, r.now(), r.jitter()); ok {
					if next, ok = r.replayable(req, body); ok {
						if werr := r.wait(ctx, d); werr != nil {
							closeIfAny(next)
							return nil, fmt.Errorf("httpxds: waiting to retry after %v: %w", err, werr)
						}
						continue
					}
				}
			}
			if try > 0 {
				err = fmt.Errorf("httpxds: attempt %d of at most %d: %w", try+1, p.MaxAttempts, err)
			}
			return nil, err
		}
		if timers != nil {
			resp.Body = &tryBody{ReadCloser: resp.Body, timers: timers}
		}
		return resp, nil
	}
}

// replayable reports whether req can be sent again, and gives the body to
// send it with when GetBody makes it (a failing GetBody: not replayable).
func (r *retrier) replayable(req *http.Request, body *replayBody) (io.ReadCloser, bool) {
	switch {
	case body != nil:
		return nil, body.replayable()
	case req.GetBody != nil:
		b, err := req.GetBody()
		return b, err == nil
	}
	return nil, true // no body
}

// wait waits d, or until ctx ends (its cause then).
func (r *retrier) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	done := make(chan struct{})
	t := r.afterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return context.Cause(ctx)
	}
}

// refusedLocally reports whether err is the client's refusal to send an attempt.
func refusedLocally(err error) bool {
	var drop *cluster.DropError
	var over *cluster.OverloadError
	return errors.Is(err, errNotSent) || errors.Is(err, ErrTransportClosed) || errors.As(err, &drop) || errors.As(err, &over)
}

// notSent is an attempt's error for a request the client refused to send
// (errNotSent), with the error's own text.
type notSent struct{ error }

// Is makes errors.Is(err, errNotSent) true.
func (notSent) Is(target error) bool { return target == errNotSent }

// Unwrap gives the refusal.
func (e notSent) Unwrap() error { return e.error }

// failureOf classifies an attempt's error for the retry conditions: the
// per-attempt timeouts; a connection that could not be made (dial, name
// resolution, TLS handshake: Envoy's connect failures); a stream the
// endpoint refused (HTTP/2 REFUSED_STREAM: net/http's HTTP/2 error types
// are unexported, so it is known by its text); anything else is a reset,
// the connection or stream ending before a response.
func failureOf(err error) route.Failure {
	var op *net.OpError
	var dns *net.DNSError
	var rec tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, new(*perTryTimeoutError)):
		return route.Timeout
	case errors.As(err, &op) && op.Op == "dial", errors.As(err, &dns),
		errors.As(err, &rec), errors.As(err, &alert), errors.As(err, &verify):
		return route.ConnectFailure
	case strings.Contains(err.Error(), "REFUSED_STREAM"):
		return route.RefusedStream
	}
	return route.Reset
}

// drainRetried drains (a little of) and closes the body of a response not
// returned, so that its connection can serve again.
func drainRetried(resp *http.Response) {
	if resp.ContentLength >= 0 && resp.ContentLength <= maxDrain {
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	}
	_ = resp.Body.Close()
}

func closeIfAny(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}

// perTryTimeoutError is the error of an attempt a per-attempt timeout
// ended; it is a timeout (net.Error's Timeout, and errors.Is
// context.DeadlineExceeded).
type perTryTimeoutError struct {
	idle bool
	d    time.Duration
}

func (e *perTryTimeoutError) Error() string {
	if e.idle {
		return "httpxds: no progress for per_try_idle_timeout " + e.d.String()
	}
	return "httpxds: no response within per_try_timeout " + e.d.String()
}

// Timeout reports true, as a net.Error that is a timeout does.
func (e *perTryTimeoutError) Timeout() bool { return true }

// Is makes the error a context.DeadlineExceeded too.
func (e *perTryTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// tryContext is the context of one attempt: ctx itself unless the policy
// bounds attempts (per_try_timeout, per_try_idle_timeout), else a child
// of it that their timers cancel, with the timers.
func (r *retrier) tryContext(ctx context.Context, p *route.RetryPolicy) (context.Context, *tryTimers) {
	h := p.HTTP
	if h == nil || (h.PerTryTimeout <= 0 && h.PerTryIdleTimeout <= 0) {
		return ctx, nil
	}
	tctx, cancel := context.WithCancelCause(ctx)
	t := &tryTimers{r: r, cancel: cancel, idleD: h.PerTryIdleTimeout}
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.PerTryTimeout > 0 {
		d := h.PerTryTimeout
		t.total = r.afterFunc(d, func() { cancel(&perTryTimeoutError{d: d}) })
	}
	t.kickLocked()
	return tctx, t
}

// tryTimers are one attempt's per-attempt timers: per_try_timeout runs
// until the response headers; per_try_idle_timeout restarts whenever the
// response body makes progress, until it ends.
type tryTimers struct {
	r      *retrier
	cancel context.CancelCauseFunc
	idleD  time.Duration

	mu      sync.Mutex
	total   interface{ Stop() bool } // nil: none, or stopped
	idle    interface{ Stop() bool } // nil: none, or stopped
	idleGen uint64                   // counts idle timers: a stale one's firing is ignored
	stopped bool
}

// kickLocked (re)starts the idle timer.
func (t *tryTimers) kickLocked() {
	if t.idleD <= 0 || t.stopped {
		return
	}
	if t.idle != nil {
		t.idle.Stop()
	}
	t.idleGen++
	gen, d := t.idleGen, t.idleD
	t.idle = t.r.afterFunc(d, func() {
		t.mu.Lock()
		stale := t.stopped || gen != t.idleGen
		t.mu.Unlock()
		if !stale {
			t.cancel(&perTryTimeoutError{idle: true, d: d})
		}
	})
}

// gotHeaders ends per_try_timeout: the attempt has its response (or
// failed).
func (t *tryTimers) gotHeaders(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total != nil {
		t.total.Stop()
		t.total = nil
	}
	if err == nil {
		t.kickLocked()
	}
}

// progress restarts the idle timer: the response body moved.
func (t *tryTimers) progress() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kickLocked()
}

// stop stops the timers and releases the attempt's context. Safe on nil.
func (t *tryTimers) stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.stopped = true
	for _, s := range []interface{ Stop() bool }{t.total, t.idle} {
		if s != nil {
			s.Stop()
		}
	}
	t.total, t.idle = nil, nil
	t.mu.Unlock()
	t.cancel(context.Canceled)
}

// tryBody is the body of a response returned from an attempt with
// timers: reading restarts the idle timer; the end or Close stops them.
type tryBody struct {
	io.ReadCloser
	timers *tryTimers
}

func (b *tryBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err != nil:
		if errors.Is(err, io.EOF) {
			b.timers.mu.Lock()
			b.timers.stopped = true // the response has ended; Close releases the rest
			if b.timers.idle != nil {
				b.timers.idle.Stop()
			}
			b.timers.mu.Unlock()
		}
	case n > 0:
		b.timers.progress()
	}
	return n, err
}

func (b *tryBody) Close() error {
	err := b.ReadCloser.Close()
	b.timers.stop()
	return err
}

// retryHeaderView is a response's headers as dataplane/route reads them.
type retryHeaderView http.Header

func (h retryHeaderView) Get(name string) (string, bool) {
	vs := http.Header(h)[canonicalKey(name)]
	return route.JoinValues(vs)
}

func (h retryHeaderView) Last(name string) (string, bool) {
	vs := http.Header(h)[canonicalKey(name)]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// canonicalKey is net/http's key of header name (lower case), without
// the allocation of canonicalizing the names every response is checked
// for.
func canonicalKey(name string) string {
	switch name {
	case "x-envoy-overloaded":
		return "X-Envoy-Overloaded"
	case "x-envoy-ratelimited":
		return "X-Envoy-Ratelimited"
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// retryRequestView is a request's headers, with Envoy's pseudo-headers, as
// retriable_request_headers match them.
type retryRequestView struct{ r *http.Request }

func (v retryRequestView) Get(name string) (string, bool) {
	switch name {
	case ":method":
		if v.r.Method == "" {
			return http.MethodGet, true
		}
		return v.r.Method, true
	case ":authority", "host":
		if v.r.Host != "" {
			return v.r.Host, true
		}
		return v.r.URL.Host, true
	case ":path":
		return v.r.URL.RequestURI(), true
	case ":scheme":
		return v.r.URL.Scheme, true
	}
	return retryHeaderView(v.r.Header).Get(name)
}

func (v retryRequestView) Last(name string) (string, bool) {
	return retryHeaderView(v.r.Header).Last(name)
}
