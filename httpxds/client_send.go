package httpxds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
)

// roundTrip routes req by cfg and sends it (see the package
// documentation for the order of the steps).
func (t *Transport) roundTrip(req *http.Request, cfg *hostConfig) (resp *http.Response, err error) {
	s := cfg.snap
	vh, rc := s.VirtualHost, s.RouteConfig
	// One allocation holds the request's routing view, its attempt state
	// and the URL it is sent to.
	a := &attempt{t: t, view: reqView{r: req, path: req.URL.EscapedPath()}, caller: req.Context()}
	view := &a.view
	rt := route.MatchHTTP(vh.Routes, view.path, view, view.query())
	if rt == nil {
		// Envoy's router answers 404 when no route matches
		// (response code detail route_not_found).
		closeBody(req)
		return localResponse(req, http.StatusNotFound, fmt.Sprintf("httpxds: no route for host %q path %q in route configuration %q (virtual host %q) of listener %q\n",
			view.host(), view.path, rc.Name, vh.Name, cfg.h.listener), nil), nil
	}
	cr := cfg.routeOf(rt)
	wc := -1
	clusterName := rt.Cluster
	if rt.Action == resources.RouteActionRoute && clusterName == "" && len(rt.WeightedClusters) > 0 {
		wc = route.PickWeighted(rt.WeightedClusters)
		clusterName = rt.WeightedClusters[wc].Name
	}
	if err := cfg.chain.Err(); err != nil {
		// A filter this client cannot run: a security filter skipped
		// would let requests through, so none goes.
		closeBody(req)
		return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: listener %q: %v\n", cfg.h.listener, err), nil), nil
	}
	if !cfg.chain.Empty() {
		// The listener's HTTP filters, each with its most specific
		// override (weighted cluster, route, virtual host): a denial
		// answers the request; else it goes on, its headers as the
		// filters changed them (view.r), and the response gets what
		// they ask of it (client_filters.go).
		var fv httpfilter.Request = view
		if t.authzM != nil {
			fv = &authzObservedView{reqView: view, m: t.authzM, cluster: clusterName}
		}
		res := cfg.chain.RunRoute(req.Context(), vh, rt, wc, fv)
		if res.Denial != nil {
			closeBody(req)
			return denialResponse(req, res.Denial), nil
		}
		if res.Release != nil || len(res.ResponseHeaders) > 0 {
			defer func() { finishFilters(&res, resp) }()
		}
	}
	switch rt.Action {
	case resources.RouteActionRoute:
	case resources.RouteActionDirectResponse:
		closeBody(req)
		return directResponseOf(req, cr, rt, rc), nil
	case resources.RouteActionRedirect:
		closeBody(req)
		return redirectResponse(req, view, cr, rt, rc), nil
	default:
		// non_forwarding_action is a server's (gRFC A36): a client has no
		// handler to serve it, and gRPC fails such RPCs UNAVAILABLE.
		closeBody(req)
		return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: route %s of route configuration %q: action %v does not forward the request\n",
			route.Describe(rt), rc.Name, rt.Action), nil), nil
	}
	if cr.err != nil || clusterName == "" {
		closeBody(req)
		why := cr.err
		if why == nil {
			why = errors.New("names no cluster (cluster_specifier_plugin is not supported by httpxds's client)")
		}
		return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: route %s of route configuration %q: %v\n", route.Describe(rt), rc.Name, why), nil), nil
	}

	// The request as sent: the user's is not changed (http.RoundTripper's
	// contract), so a copy with its own URL, and its own headers when a
	// mutation changes them.
	ctx := req.Context()
	var cancel context.CancelFunc
	timeout := t.timeout
	if cr.hasTimeout {
		timeout = cr.timeout
	}
	if timeout > 0 {
		ctx, cancel = a.withRouteTimeout(ctx, timeout)
	}
	out := view.r.WithContext(ctx)
	a.u = *req.URL
	out.URL = &a.u
	if path := cr.rewritePath(rt, view.path); path != view.path {
		setPath(&a.u, path)
	}
	if out.Host == "" {
		out.Host = req.URL.Host
	}
	if cr.hostRewrite != "" {
		out.Host = cr.hostRewrite
	}
	if len(cr.mut.request) > 0 {
		out.Header = view.r.Header.Clone()
		if out.Header == nil {
			out.Header = make(http.Header)
		}
		apply(cr.mut.request, out.Header)
	}
	a.cluster, a.hash, a.autoHost = clusterName, cr.requestHash(view), rt.AutoHostRewrite
	a.wantTLS = req.URL.Scheme == "https"
	var idle *idleTimer
	if cr.idle > 0 {
		if cancel == nil {
			ctx, cancel = context.WithCancel(ctx)
			out = out.WithContext(ctx)
		}
		idle = newIdleTimer(t.clock, cr.idle, cancel)
		a.idle = idle
	}
	a.out, a.host = out, out.Host
	resp, err = t.retrier.send(ctx, out, cr.retry, cr.attemptCount, a.do)
	if err != nil {
		var timedOut bool
		if cancel != nil {
			timedOut = req.Context().Err() == nil && ctx.Err() != nil
			cancel()
		}
		if idle != nil {
			idle.stop()
		}
		if timedOut {
			// Envoy's router answers 504 when the route's timeout (or
			// its idle timeout) fires before the response
			// (https://www.envoyproxy.io/docs/envoy/latest/faq/configuration/timeouts#route-timeouts).
			what := fmt.Sprintf("route timeout %v", timeout)
			if idle != nil && idle.fired.Load() {
				what = fmt.Sprintf("route idle_timeout %v", cr.idle)
			}
			return localResponse(req, http.StatusGatewayTimeout, fmt.Sprintf("httpxds: upstream request timeout: %s of route %s (cluster %q): %v\n",
				what, route.Describe(rt), clusterName, err), nil), nil
		}
		return nil, err
	}
	if len(cr.mut.response) > 0 {
		apply(cr.mut.response, resp.Header)
	}
	resp.Request = req
	if cancel != nil {
		// The route's timeout bounds the whole response, its body
		// included, as Envoy's does ("the time until the upstream
		// response has been completely processed"): it ends when the
		// body is read or closed.
		if db, ours := resp.Body.(*doneBody); ours {
			db.cancel = cancel // ends with the pick's
		} else {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel, idle: idle}
		}
	}
	return resp, nil
}

// setPath sets u's path to p, an escaped path.
func setPath(u *url.URL, p string) {
	if unescaped, err := url.PathUnescape(p); err == nil {
		u.Path, u.RawPath = unescaped, p
		if u.EscapedPath() == u.Path {
			u.RawPath = ""
		}
		return
	}
	u.Path, u.RawPath = p, ""
}

// tlsStateHTTPS marks a request copy as https for redirect.target.
var tlsStateHTTPS tls.ConnectionState

// attempt sends attempts of one request to the cluster of its route.
type attempt struct {
	t        *Transport
	view     reqView
	cluster  string
	hash     uint64
	autoHost bool
	// wantTLS: the caller asked for https, which a cluster without TLS
	// must not downgrade.
	wantTLS bool
	idle    *idleTimer
	// out is the request as roundTrip made it, with its URL u and Host
	// host: an attempt of it (with its context) is sent as it is, its URL
	// pointed at the endpoint, rather than copied again.
	out  *http.Request
	u    url.URL
	host string
	// body0 is the first attempt's response body.
	body0 doneBody
	// rctx is the request's context when it carries the route's timeout
	// itself (client_deadline.go).
	rctx routeCtx
	// caller is the caller's own context, without the route's timeouts:
	// once it is done, an attempt's end is the caller's doing, not the
	// endpoint's (callerGone).
	caller context.Context
}

// do is the attemptFunc of the request: it picks an endpoint of the
// cluster (waiting, bounded by ctx, while the cluster is still
// connecting), sends req there, and finishes the pick when the response
// ends. A request the cluster refuses (no healthy endpoint, a drop, the
// circuit breaker) gets Envoy's local 503.
func (a *attempt) do(ctx context.Context, req *http.Request, try int) (*http.Response, error) {
	var res cluster.Result
	for {
		pub := a.t.pickers.Load()
		p := pub.m.Get(a.cluster)
		if p == nil {
			if a.t.isClosed() {
				return nil, ErrTransportClosed
			}
			return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: cluster %q is not configured\n", a.cluster), nil), nil
		}
		var err error
		res, err = p.Pick(req, a.hash)
		if err == nil {
			break
		}
		var drop *cluster.DropError
		var over *cluster.OverloadError
		switch {
		case errors.Is(err, cluster.ErrQueue):
			select {
			case <-pub.next:
				if a.t.isClosed() {
					// Close closes the last publication's channel
					// and publishes no other.
					return nil, ErrTransportClosed
				}
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("httpxds: cluster %q: waiting for an endpoint: %w", a.cluster, ctx.Err())
			}
		case errors.As(err, &drop):
			// EDS drop_overloads: Envoy answers 503 "drop_overload".
			return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: cluster %q: request dropped (drop_overload category %q)\n", a.cluster, drop.Category), nil), nil
		case errors.As(err, &over):
			// max_requests, max_pending_requests: Envoy answers 503 with x-envoy-overloaded
			// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/circuit_breaking).
			h := http.Header{"X-Envoy-Overloaded": {"true"}}
			return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: upstream overflow: %v\n", err), h), nil
		default:
			// Envoy's "no healthy upstream".
			return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: no healthy upstream in cluster %q: %v\n", a.cluster, err), nil), nil
		}
	}
	c, _ := res.Conn.(*httpConn)
	if c == nil { // a ready endpoint always has one
		res.Done.Unsent(nil)
		return localResponse(req, http.StatusServiceUnavailable, fmt.Sprintf("httpxds: no healthy upstream in cluster %q\n", a.cluster), nil), nil
	}
	if a.wantTLS && c.scheme != "https" {
		err := fmt.Errorf("httpxds: an https request to cluster %q, which has no UpstreamTlsContext: not sent in plaintext", a.cluster)
		// Never sent: outlier detection hears nothing of it (an https
		// caller must not get a healthy plaintext endpoint ejected), nor
		// does the load report.
		c.unpick(&res)
		res.Done.Unsent(nil)
		return nil, notSent{err}
	}
	out := req
	if try == 0 && req == a.out && ctx == req.Context() {
		// Ours, and not yet sent: net/http may still read a request it
		// failed or answered early (writing its body), so later attempts
		// get copies.
		a.u.Scheme, a.u.Host = c.scheme, c.host
		out.Host = a.host
	} else {
		out = req.WithContext(ctx)
		u := *req.URL
		u.Scheme, u.Host = c.scheme, c.host
		out.URL = &u
		if out.Host == "" {
			out.Host = req.URL.Host
		}
	}
	if a.autoHost {
		if tag, _ := res.Endpoint.Tag.(*epTag); tag != nil && tag.authority != "" {
			out.Host = tag.authority
		}
	}
	if a.idle != nil {
		a.idle.touch()
	}
	// The request leaves now, as Envoy's load reports count it (issued
	// once it has a connection): a request that found one at the pick
	// has it, a pending one once its GotConn fires (pendingWait).
	var pw *pendingWait
	if res.Pending { // max_pending_requests (client_limits.go)
		out, pw = c.pending(out, res.Limits, res.Done)
	} else {
		res.Done.Started()
	}
	resp, err := c.tr.RoundTrip(out)
	busy := c.claimed(&res, pw)
	if err != nil {
		gone := a.caller.Err() != nil
		switch {
		case pw != nil && !busy:
			// It never had a connection, so never left: not issued.
			res.Done.Unsent(pendingOutcome(ctx, err, gone))
		case gone:
			// The caller went away (its context cancelled or past its
			// own deadline): nothing is known of the endpoint.
			res.Done.Finish(callerGone{err}, nil)
		default:
			// A connection failure or reset counts against the
			// endpoint, as Envoy's outlier detection counts locally
			// originated errors with the 5xx unless
			// split_external_local_origin_errors
			// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier).
			res.Done.Finish(upstreamFailure{err}, nil)
		}
		c.afterUse(busy)
		if gone {
			return nil, fmt.Errorf("httpxds: cluster %q endpoint %s: %w", a.cluster, c.host, err)
		}
		if tag, _ := res.Endpoint.Tag.(*epTag); tag != nil && tag.dns != nil {
			(*setHost)(a.t).Do(tag.dns.ResolveNow)
		}
		return nil, fmt.Errorf("httpxds: cluster %q endpoint %s: %w", a.cluster, c.host, err)
	}
	var outcome error
	switch {
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
		resp.StatusCode == http.StatusGatewayTimeout:
		// Envoy's gateway errors: counted by consecutive_gateway_failure
		// and consecutive_5xx.
		outcome = errGateway
	case resp.StatusCode >= 500:
		// A 5xx is a failure for outlier detection (Envoy's
		// consecutive_5xx and success rate count them).
		outcome = errStatus5xx
	}
	var body *doneBody
	if try == 0 {
		body = &a.body0 // part of the request's one allocation
	} else {
		body = new(doneBody)
	}
	body.ReadCloser, body.done, body.outcome, body.conn, body.idle, body.busy = resp.Body, res.Done, outcome, c, a.idle, busy
	body.caller = a.caller
	resp.Body = body
	return resp, nil
}

// The outcomes a response gives outlier detection (outlier.OutcomeError):
// Envoy's consecutive detectors tell a 5xx from a gateway failure
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier).
var (
	errStatus5xx = outcomeError{outlier.Status5xx, "5xx response"}
	errGateway   = outcomeError{outlier.GatewayFailure, "gateway failure (502, 503 or 504 response)"}
)

// outcomeError is a response's outcome for outlier detection.
type outcomeError struct {
	o   outlier.Outcome
	msg string
}

func (e outcomeError) Error() string            { return e.msg }
func (e outcomeError) Outcome() outlier.Outcome { return e.o }

// upstreamFailure is a request the endpoint never answered (refused,
// reset, timed out): Envoy's locally originated error, a gateway failure
// unless the cluster's split_external_local_origin_errors counts it apart.
type upstreamFailure struct{ err error }

func (e upstreamFailure) Error() string            { return e.err.Error() }
func (e upstreamFailure) Unwrap() error            { return e.err }
func (e upstreamFailure) Outcome() outlier.Outcome { return outlier.LocalOriginFailure }

// callerGone is an attempt that ended because its caller went away: its
// context cancelled, or past its own deadline (not the route's timeout
// nor the per-try timeout, which are the endpoint's slowness). Envoy's
// router records no outlier result for the upstream request it resets
// when the downstream goes away (router.cc, Filter::onDestroy), and
// charges the host no error; so outlier detection records nothing, and
// the load report counts the request as issued only
// (cluster.Done.Finish, outlier.Cancelled).
type callerGone struct{ err error }

func (e callerGone) Error() string            { return e.err.Error() }
func (e callerGone) Unwrap() error            { return e.err }
func (e callerGone) Outcome() outlier.Outcome { return outlier.Cancelled }

// isClosed reports whether Close was called.
func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// doneBody finishes a pick when its response ends: read to the end,
// failed or closed. The circuit breaker counts the request until then.
type doneBody struct {
	io.ReadCloser
	done    cluster.Done
	outcome error
	conn    *httpConn
	idle    *idleTimer
	// cancel, if set, ends the request's timeout context: the response
	// that roundTrip returns is this one's.
	cancel context.CancelFunc
	once   sync.Once
	// busy: the request holds a connection of conn (client_limits.go);
	// after once, in its padding.
	busy bool
	// caller is the caller's own context (attempt.caller): a body that
	// fails once it is done failed by the caller's doing.
	caller context.Context
}

func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.idle != nil && n > 0 {
		b.idle.touch()
	}
	if err != nil {
		outcome := b.outcome
		if err != io.EOF && outcome == nil {
			outcome = err
			if b.caller != nil && b.caller.Err() != nil {
				outcome = callerGone{err}
			}
		}
		b.finish(outcome)
	}
	return n, err
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.finish(b.outcome)
	return err
}

func (b *doneBody) finish(outcome error) {
	b.once.Do(func() {
		b.done.Finish(outcome, nil)
		b.conn.afterUse(b.busy)
		if b.cancel != nil {
			b.cancel()
			if b.idle != nil {
				b.idle.stop()
			}
		}
	})
}

// cancelBody ends a request's timeout context when its response ends.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	idle   *idleTimer
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.end()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *cancelBody) end() {
	b.cancel()
	if b.idle != nil {
		b.idle.stop()
	}
}

// idleTimer is a route's idle_timeout: it cancels the request when
// neither the request nor its response made progress for d. Progress is
// a time stamp, so that a busy stream costs an atomic store, not a timer
// reset, per read.
type idleTimer struct {
	clock  client.Clock
	d      time.Duration
	cancel context.CancelFunc
	last   atomic.Int64
	fired  atomic.Bool
	mu     sync.Mutex
	timer  client.Timer
	done   bool
}

func newIdleTimer(clock client.Clock, d time.Duration, cancel context.CancelFunc) *idleTimer {
	it := &idleTimer{clock: clock, d: d, cancel: cancel}
	it.touch()
	it.mu.Lock()
	it.timer = clock.AfterFunc(d, it.check)
	it.mu.Unlock()
	return it
}

func (it *idleTimer) touch() { it.last.Store(it.clock.Now().UnixNano()) }

// check fires the timeout if nothing happened for d, else waits for the
// rest of d from the last progress.
func (it *idleTimer) check() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.done {
		return
	}
	idle := time.Duration(it.clock.Now().UnixNano() - it.last.Load())
	if idle >= it.d {
		it.done = true
		it.fired.Store(true)
		it.cancel()
		return
	}
	it.timer = it.clock.AfterFunc(it.d-idle, it.check)
}

func (it *idleTimer) stop() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.done = true
	if it.timer != nil {
		it.timer.Stop()
	}
}

// directResponseOf answers a direct_response route as Envoy's router
// does: its status, and its body (text/plain), with the route's response
// header mutations.
func directResponseOf(req *http.Request, cr *clientRoute, rt *resources.Route, rc *resources.RouteConfig) *http.Response {
	d := cr.direct
	if d.err != nil {
		return localResponse(req, http.StatusInternalServerError, fmt.Sprintf("httpxds: route %s of route configuration %q: direct_response: %v\n", route.Describe(rt), rc.Name, d.err), nil)
	}
	resp := localResponse(req, d.status, string(d.body), nil)
	if d.body == nil {
		resp.Header.Del("Content-Type")
	} else {
		resp.Header.Set("Content-Type", "text/plain")
	}
	apply(cr.mut.response, resp.Header)
	return resp
}

// redirectResponse answers a redirect route as Envoy's router does: its
// status and Location, no body. An http.Client follows it as it would a
// server's.
func redirectResponse(req *http.Request, view *reqView, cr *clientRoute, rt *resources.Route, rc *resources.RouteConfig) *http.Response {
	d := cr.redirect
	if d.err != nil {
		return localResponse(req, http.StatusInternalServerError, fmt.Sprintf("httpxds: route %s of route configuration %q: redirect: %v\n", route.Describe(rt), rc.Name, d.err), nil)
	}
	// target reads the scheme from r.TLS and the host from r.Host, as a
	// server sees them: a copy says what the client sends.
	r := &http.Request{Host: view.host(), URL: req.URL}
	if req.URL.Scheme == "https" {
		r.TLS = &tlsStateHTTPS
	}
	resp := localResponse(req, d.status, "", nil)
	resp.Header.Del("Content-Type")
	resp.Header.Set("Location", d.target(r, rt, view.path))
	apply(cr.mut.response, resp.Header)
	return resp
}
