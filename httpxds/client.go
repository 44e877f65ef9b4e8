package httpxds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/lbpolicy"
	"github.com/goxds/xds/dataplane/outlier"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/sharedclient"
	"github.com/goxds/xds/internal/upstreamtls"
	"github.com/goxds/xds/internal/warnlimit"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// DefaultRouteTimeout is the timeout of a request whose route sets none:
// Envoy's default for route.timeout
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#envoy-v3-api-field-config-route-v3-routeaction-timeout,
// "If not specified, the default is 15s"). goxds follows it so that a
// service moved from an Envoy sidecar to this client keeps the bound its
// mesh was tested with; TransportOptions.DefaultRouteTimeout changes it.
const DefaultRouteTimeout = 15 * time.Second

// DefaultHostIdleTimeout is how long the configuration of a host no
// request has used stays watched.
const DefaultHostIdleTimeout = 5 * time.Minute

// TransportOptions configure NewTransport. The zero value reads the
// bootstrap from the environment and makes a client of its own.
type TransportOptions struct {
	// Client is a shared xDS client to watch through, not closed by the
	// Transport. Nil: the Transport makes one from Bootstrap (with
	// ClientOptions) and closes it in Close.
	Client *client.Client
	// Bootstrap names the management servers, the
	// client_default_listener_resource_name_template and the certificate
	// providers. Nil: Client's, else bootstrap.FromEnv().
	Bootstrap *bootstrap.Config
	// ClientOptions tune the client the Transport makes; unused with
	// Client.
	ClientOptions client.Options
	// Logger gets what the Transport decides (debug) and what fails
	// (warnings). At most 10 warnings of one kind are written in 10
	// seconds (a zone going down fails thousands of clusters at once): the
	// tenth says that more are held back, and the first after the pause
	// carries held_back, how many were. Nil: client.DefaultLogger().
	Logger *slog.Logger
	// DefaultRouteTimeout is the timeout of a request whose route sets no
	// timeout. Zero: DefaultRouteTimeout (Envoy's 15 s); negative: none.
	DefaultRouteTimeout time.Duration
	// HostIdleTimeout is how long the configuration watch of a host stays
	// after its last request; the next request starts it again (and waits
	// for the configuration). Zero: DefaultHostIdleTimeout.
	HostIdleTimeout time.Duration
	// FailoverTimeout is the clusters' priority failover timeout (gRFC
	// A56). Zero: 10 s.
	FailoverTimeout time.Duration
	// RetryBufferLimit is how many bytes of a request body without
	// GetBody are kept to send it again on a retry; a longer body commits
	// its request to the first attempt. Zero: DefaultRetryBufferLimit;
	// negative: none are kept (such a body is sent again only when no
	// attempt has read any of it).
	RetryBufferLimit int64
	// DialContext dials endpoints. Nil: a net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Clock runs the Transport's timers (host idleness, route idle
	// timeouts, the clusters' failover and outlier detection). Nil: the
	// real clock. Tests pass a testutils.FakeClock.
	Clock client.Clock
	// OutlierMetrics, if not nil, hears of each outlier the clusters'
	// outlier detection finds, ejected or not (gRFC A91's counters; see
	// OutlierMetrics for the labels). Nil: nothing is measured.
	OutlierMetrics OutlierMetrics
	// ConnectionMetrics, if not nil, hears of the connections the
	// Transport makes to its endpoints: attempts, disconnections and the
	// connections open (gRFC A94's; see ConnectionMetrics). Nil: nothing
	// is measured, and connections are net/http's as dialled.
	ConnectionMetrics ConnectionMetrics
	// ExtAuthzMetrics, if not nil, counts the outcomes of the listeners'
	// external authorization checks (gRFC A92's, see ExtAuthzMetrics).
	// Nil: nothing is counted.
	ExtAuthzMetrics ExtAuthzMetrics
	// SourceAddress is what a route's source_ip hash policy
	// (connection_properties) hashes for ring_hash: the address a sidecar
	// would have seen this client connect from, its pod or host IP
	// typically, so that the client's requests land on the endpoint they
	// would through Envoy (which hashes the address's text, as
	// netip.Addr.String gives it, its zone left out). The zero value: a
	// random value drawn at NewTransport, as gRPC's channel ID is, so the
	// requests of one Transport still hash alike; two Transports of one
	// process then go to endpoints of their own.
	SourceAddress netip.Addr
	// SideChannelDialOptions are given to the gRPC channels the Transport
	// makes to the authorization services its ext_authz filters name
	// (gRFC A92), before the credentials gRFC A102 gives them, which they
	// cannot replace. Each check has the request's context as its
	// parent, so a tracing stats handler here (grpc.WithStatsHandler)
	// makes it a child span of the request's trace.
	SideChannelDialOptions []grpc.DialOption
}

// Transport is an http.RoundTripper that sends each request where goxds's
// data plane says, by the xDS configuration of the request's host: the
// URL's host (with its port, if it has one) names a Listener through the
// bootstrap's client_default_listener_resource_name_template, whose route
// configuration is followed live. See the package documentation for the
// rules each request goes by. A Transport is safe for concurrent use; Close
// it when done.
type Transport struct {
	// Read-only after NewTransport.
	b      *bootstrap.Config
	xc     *client.Client
	ownsXC bool
	transportSettings

	// pickers are the clusters' pickers in force; published is closed and
	// replaced at each publication, for requests waiting on a cluster
	// still connecting.
	pickers atomic.Pointer[published]
	// authz are the channels to the authorization services the
	// listeners' ext_authz filters call (client_filters.go), with a lock of
	// their own; each host names those its configuration names (the
	// others close once their calls end), and Close closes them all.
	authz extauthzgrpc.Channels

	// mu guards what follows, the Set's state included (cluster.Host's
	// lock).
	mu     sync.Mutex
	closed bool
	set    *cluster.Set
	hosts  map[hostKey]*hostWatch
	merged *mergedState
	// pending are connections that asked to connect: HTTP endpoints are
	// ready at once (connections are made per request), reported before
	// the Set settles.
	pending []*httpConn
	// closing are connections shut down, whose idle connections close
	// once mu is released.
	closing []*httpConn
	// leafConns are the leaves' connection settings by key, tls their
	// HandshakeInfos (client_tls.go).
	leafConns map[string]*leafConn
	tls       upstreamtls.Cache
	logs      []logLine
	// warnings keeps a burst of like warnings (every cluster of a zone
	// failing at once) from flooding the log.
	warnings warnlimit.Limiter
	sweep    client.Timer // the host idle sweep; nil when not armed
	// applied, if set (tests, through export_test.go), hears of each
	// configuration a host takes, or its error, once requests route by
	// it: called on the client's callback goroutine, with mu released.
	applied func(host, authority string, s *watchers.Snapshot, err error)
	// wg counts the DNS lookups in flight.
	wg sync.WaitGroup
}

// transportSettings are what a Transport's requests go by, fixed by
// NewTransport.
type transportSettings struct {
	logger   *slog.Logger
	clock    client.Clock
	lbClock  lbpolicy.Clock
	timeout  time.Duration // the default route timeout; <= 0: none
	idleHost time.Duration
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	faults   *route.Faults
	retrier  retrier
	conns    *endpoint.ConnSink // nil: connections are not measured
	authzM   ExtAuthzMetrics    // nil: ext_authz checks are not counted
	// srcHash is what a source_ip hash policy hashes to: the hash of
	// SourceAddress, else random, fixed for the Transport's life.
	srcHash uint64
}

// published is the pickers of one publication and a channel closed at
// the next.
type published struct {
	m    cluster.PickerMap
	next chan struct{}
}

// logLine is a line to log once mu is released: a handler is the user's
// code.
type logLine struct {
	level slog.Level
	msg   string
	args  []any
}

// NewTransport returns a Transport for opts. It fails when no bootstrap
// can be had or the client cannot be made.
func NewTransport(opts TransportOptions) (*Transport, error) {
	t := &Transport{xc: opts.Client, hosts: make(map[hostKey]*hostWatch), leafConns: make(map[string]*leafConn)}
	t.transportSettings = transportSettings{logger: opts.Logger, clock: opts.Clock, dial: opts.DialContext,
		timeout: opts.DefaultRouteTimeout, idleHost: opts.HostIdleTimeout, faults: route.NewFaults(nil), authzM: opts.ExtAuthzMetrics}
	if t.logger == nil {
		t.logger = client.DefaultLogger()
	}
	if t.clock == nil {
		t.clock = realClock{}
	}
	t.lbClock = lbClock{t.clock}
	t.retrier = retrier{clock: t.clock, bufferLimit: opts.RetryBufferLimit}
	t.conns = endpoint.NewConnSink(opts.ConnectionMetrics, "")
	t.srcHash = rand.Uint64()
	t.authz.DialOptions = slices.Clone(opts.SideChannelDialOptions)
	if a := opts.SourceAddress; a.IsValid() {
		t.srcHash = xxhash.Sum64String(a.WithZone("").String())
	}
	switch {
	case t.timeout == 0:
		t.timeout = DefaultRouteTimeout
	case t.timeout < 0:
		t.timeout = 0
	}
	if t.idleHost <= 0 {
		t.idleHost = DefaultHostIdleTimeout
	}
	if t.dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		t.dial = d.DialContext
	}
	if opts.FailoverTimeout < 0 {
		return nil, fmt.Errorf("httpxds: FailoverTimeout %v is negative", opts.FailoverTimeout)
	}
	failover := opts.FailoverTimeout
	if failover == 0 {
		failover = 10 * time.Second
	}
	if opts.Bootstrap != nil {
		if err := opts.Bootstrap.Validate(); err != nil {
			return nil, fmt.Errorf("httpxds: %w", err)
		}
	}
	var err error
	if t.b, err = sharedclient.Bootstrap(opts.Bootstrap, opts.Client); err != nil {
		return nil, fmt.Errorf("httpxds: %w", err)
	}
	if t.xc == nil {
		xc, err := client.New(t.b, opts.ClientOptions)
		if err != nil {
			return nil, fmt.Errorf("httpxds: creating the xDS client: %w", err)
		}
		t.xc, t.ownsXC = xc, true
	}
	ccfg := cluster.Config{FailoverTimeout: failover,
		// Envoy's outlier detection, with its consecutive_5xx and
		// consecutive_gateway_failure (client_send.go says which failure
		// a response was).
		HTTPOutlierDetection: true,
		// max_pending_requests and max_connections over the
		// endpoints' pools (client_limits.go).
		ConnectionLimits: true,
		// LRS counts a request issued once it leaves, not at the pick
		// (client_send.go's attempt.do).
		StartOnSend: true}
	if opts.OutlierMetrics != nil {
		ccfg.OutlierMetrics = outlier.WithTarget(opts.OutlierMetrics, "")
	}
	t.set = cluster.NewSet((*setHost)(t), t.lbClock, ccfg)
	t.set.SetClient(t.xc)
	t.pickers.Store(&published{next: make(chan struct{})})
	return t, nil
}

// NewClient returns an http.Client whose Transport is a new Transport for
// opts, and that Transport, for Close.
func NewClient(opts TransportOptions) (*http.Client, *Transport, error) {
	t, err := NewTransport(opts)
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Transport: t}, t, nil
}

// ErrTransportClosed is what requests fail with once the Transport is
// closed.
var ErrTransportClosed = errors.New("httpxds: the Transport is closed")

// Close stops every configuration watch, closes every connection and the
// client the Transport made, and fails the requests that wait for a
// configuration. It is safe to call more than once.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	hosts := t.hosts
	t.hosts = nil
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	after := t.set.Close()
	t.tls.Close()
	t.pending = nil
	closing := t.closing
	t.closing = nil
	t.mu.Unlock()
	closeIdle(closing)
	for _, h := range hosts {
		if h.cancel != nil {
			h.cancel()
		}
		// Wakes the requests waiting for a first configuration: they
		// find none, and fail with ErrTransportClosed.
		h.firstOnce.Do(func() { close(h.first) })
	}
	after.Run()
	t.set.StopWaking()
	t.wg.Wait()
	t.authz.Close()
	close(t.pickers.Load().next)
	if t.ownsXC {
		t.xc.Close()
	}
	return nil
}

// RoundTrip implements http.RoundTripper: it routes req by the
// configuration of its URL's host and sends it to the endpoint its
// cluster picks (see the package documentation).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Host == "" {
		closeBody(req)
		return nil, errors.New("httpxds: request has no URL host to name a Listener by")
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		closeBody(req)
		return nil, fmt.Errorf("httpxds: unsupported scheme %q (want http or https)", req.URL.Scheme)
	}
	authority := req.Host
	if authority == "" {
		authority = req.URL.Host
	}
	h, err := t.acquireHost(strings.ToLower(req.URL.Host), authority)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	// The watch counts as used until the request is sent: the idle sweep
	// spares it.
	defer t.releaseHost(h)
	cfg, err := h.wait(req.Context())
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if l := cfg.snap.Listener; l != nil && (l.StripHostPort != resources.HostPortKeep || l.StripTrailingHostDot) {
		// The routes and the endpoint see the host the virtual host was
		// chosen by, as Envoy forwards it.
		if a := h.vhAuthority(l, authority); a != authority {
			r2 := *req
			r2.Host = a
			req = &r2
		}
	}
	return t.roundTrip(req, cfg)
}

// closeBody closes a request's body, as a RoundTripper must even when it
// fails.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// logLocked queues a line for when mu is released, unless it is one
// warning too many of a burst (warnings).
func (t *Transport) logLocked(level slog.Level, msg string, args ...any) {
	if ok, args := t.warnings.Limit(level, msg, args, t.clock.Now()); ok {
		t.logs = append(t.logs, logLine{level, msg, args})
	}
}

// realClock is time's.
type realClock struct{}

func (realClock) Now() time.Time                                   { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) client.Timer { return time.AfterFunc(d, f) }

// lbClock is a client.Clock as the data plane's timers take it.
type lbClock struct{ c client.Clock }

func (c lbClock) Now() time.Time                                     { return c.c.Now() }
func (c lbClock) AfterFunc(d time.Duration, f func()) lbpolicy.Timer { return c.c.AfterFunc(d, f) }

// localResponse is a response the Transport makes itself, as Envoy's
// router answers locally: status, and a text body starting "httpxds:".
func localResponse(req *http.Request, status int, body string, hdr http.Header) *http.Response {
	if hdr == nil {
		hdr = make(http.Header)
	}
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		Body:          localBody{strings.NewReader(body)},
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// isLocal reports whether resp is one the Transport made itself (no
// healthy upstream, a drop, the circuit breaker, a fault, a direct
// response), not an endpoint's: the retry loop does not retry those as
// an upstream's 5xx, as Envoy's router does not.
func isLocal(resp *http.Response) bool {
	_, ok := resp.Body.(localBody)
	return ok
}
