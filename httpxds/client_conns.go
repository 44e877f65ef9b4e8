package httpxds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/internal/httpconnect"
	"github.com/goxds/xds/internal/upstreamtls"

	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// The Transport is the cluster.Set's Host, through setHost (so that the
// Host's methods are not the Transport's API). An endpoint's "connection" is
// an *http.Transport of its own, dialling the endpoint's addresses in
// turn, with the TLS and HTTP version of the leaf cluster that lists it:
// net/http keeps its connections alive and multiplexes HTTP/2 streams, and
// an endpoint the configuration drops has its transport's connections
// closed (at once when idle, else as their requests end). An HTTP
// endpoint counts as ready as soon as it is listed, as Envoy treats a
// host healthy unless EDS health or outlier detection says otherwise
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/overview):
// its connections are made by requests, and its failures reach outlier
// detection through each request's outcome.

// setHost is the Transport as the cluster.Set's Host.
type setHost Transport

// upstreamProto is the HTTP version a leaf cluster's endpoints are
// spoken to in, from its
// envoy.extensions.upstreams.http.v3.HttpProtocolOptions
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/upstreams/http/v3/http_protocol_options.proto).
type upstreamProto uint8

const (
	// protoHTTP1: no options, or explicit http_protocol_options, as Envoy
	// defaults to HTTP/1.1 upstream.
	protoHTTP1 upstreamProto = iota
	// protoHTTP2: explicit http2_protocol_options: HTTP/2 over TLS, or
	// h2c with prior knowledge without TLS.
	protoHTTP2
	// protoAuto: auto_config: ALPN over TLS (h2, else HTTP/1.1); HTTP/1.1
	// without TLS.
	protoAuto
)

// protocolOptionsKey is the typed_extension_protocol_options key of the
// HTTP protocol options.
const protocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// protoOf reads a leaf cluster's upstream HTTP version.
func protoOf(c *resources.Cluster) (upstreamProto, error) {
	raw := c.Raw()
	a := raw.GetTypedExtensionProtocolOptions()[protocolOptionsKey]
	if a == nil {
		return protoHTTP1, nil
	}
	var o httpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&o); err != nil {
		return 0, fmt.Errorf("typed_extension_protocol_options[%q]: %w", protocolOptionsKey, err)
	}
	switch {
	case o.GetExplicitHttpConfig() != nil:
		e := o.GetExplicitHttpConfig()
		switch {
		case e.GetHttp2ProtocolOptions() != nil:
			return protoHTTP2, nil
		case e.GetHttp3ProtocolOptions() != nil:
			return 0, errors.New("explicit_http_config: HTTP/3 is not supported by httpxds")
		}
		return protoHTTP1, nil
	case o.GetAutoConfig() != nil:
		return protoAuto, nil
	}
	// use_downstream_protocol_config: a client has no downstream; the
	// request's own version is net/http's choice, HTTP/1.1 here.
	return protoHTTP1, nil
}

// leafConn is what sets a leaf's connections apart (cluster.Host's
// Security): its TLS and its HTTP version. Shared by the leaves that
// agree; guarded by Transport.mu.
type leafConn struct {
	key   string
	proto upstreamProto
	tls   *upstreamtls.Shared // nil: plaintext
	refs  int                 // endpoints holding it
}

// epTag is what the Transport keeps on an endpoint (Endpoint.Tag).
type epTag struct {
	lc       *leafConn
	hostname string // the EDS hostname, for auto_host_sni
	// authority is the Host of a request on a route with
	// auto_host_rewrite: the EDS hostname, a LOGICAL_DNS cluster's DNS
	// name; "" for none.
	authority string
	proxy     string // HTTP CONNECT proxy host:port, "" for none
	dns       *cluster.Resolution
	labels    *endpoint.ConnLabels // of its connections' metrics, nil for none
}

// Security implements cluster.Host: the leaf's TLS and HTTP version. A
// TLS context that cannot be honoured is an error, so that the leaf gets
// no endpoints and its requests fail rather than go out in plaintext.
func (h *setHost) Security(leaf *watchers.ClusterConfig) (any, error) {
	t := (*Transport)(h)
	proto, err := protoOf(leaf.Cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", leaf.Name, err)
	}
	key := fmt.Sprint(proto)
	var sec *upstreamtls.Shared
	if sc := leaf.Cluster.Security; sc != nil {
		if sec, err = t.tls.Get(t.b, sc); err != nil {
			return nil, fmt.Errorf("cluster %q: TLS cannot be set up: %w", leaf.Name, err)
		}
		key += "|" + sec.Key
	}
	if lc := t.leafConns[key]; lc != nil {
		return lc, nil
	}
	lc := &leafConn{key: key, proto: proto, tls: sec}
	if sec != nil {
		sec.Hold()
	}
	t.leafConns[key] = lc
	return lc, nil
}

// Endpoint implements cluster.Host: the pool's endpoint of spec's
// addresses, through its proxy, with its leaf's TLS and HTTP version. An
// endpoint with an authority (auto_host_rewrite's Host) is one of its own
// (cluster.AuthorityKey): a request learns its Host from the endpoint it
// picks.
func (h *setHost) Endpoint(pool *endpoint.Pool, spec cluster.EndpointSpec) *endpoint.Endpoint {
	lc, _ := spec.Security.(*leafConn)
	hostname := spec.Hostname
	if lc == nil || lc.tls == nil || !lc.tls.Info.UsesHostname() {
		hostname = "" // the handshake does not send it: share the endpoint
	}
	authority := spec.Authority()
	if spec.DNS != nil {
		// Envoy names a LOGICAL_DNS cluster's host by its DNS name alone:
		// auto_host_rewrite's Host carries no port.
		if host, _, err := net.SplitHostPort(authority); err == nil {
			authority = host
		}
	}
	extra := ""
	if lc != nil {
		extra = lc.key
	}
	extra = cluster.AuthorityKey(authority, extra+"|"+hostname+"|"+spec.Proxy)
	ep, isNew := pool.Get(spec.Addrs, extra)
	if isNew {
		ep.Tag = &epTag{lc: lc, hostname: hostname, authority: authority, proxy: spec.Proxy, dns: spec.DNS, labels: h.connLabels(spec)}
		if lc != nil {
			lc.refs++
		}
	}
	return ep
}

// Dropped implements endpoint.Dialer: the endpoint lets go of its leaf's
// connection settings.
func (*setHost) Dropped(ep *endpoint.Endpoint) {
	if tag, _ := ep.Tag.(*epTag); tag != nil && tag.lc != nil {
		tag.lc.refs--
		tag.lc = nil
	}
}

// pruneLeafConnsLocked forgets the settings no endpoint holds, and
// releases their TLS.
func (t *Transport) pruneLeafConnsLocked() {
	for key, lc := range t.leafConns {
		if lc.refs == 0 {
			delete(t.leafConns, key)
			if lc.tls != nil {
				lc.tls.Release()
			}
		}
	}
	t.tls.Prune()
}

// httpConn is an endpoint's connection: an http.Transport of its own.
type httpConn struct {
	t      *Transport
	ep     *endpoint.Endpoint
	tr     *http.Transport
	scheme string
	host   string // the URL host requests are sent to: the first address
	// shut: the pool let it go; its connections close as their requests
	// end. gone is closed then: dials waiting for max_connections give
	// up.
	shut atomic.Bool
	gone chan struct{}
	// The counts behind the circuit breakers (client_limits.go):
	// connections open, open or being dialled, and requests holding
	// one; multiplexed once it speaks HTTP/2; limits, the leaf of its
	// last pending request.
	conns, open, busy atomic.Int64
	multiplexed       atomic.Bool
	limits            atomic.Pointer[cluster.Limits]
}

// NewConn implements endpoint.Dialer.
func (h *setHost) NewConn(ep *endpoint.Endpoint) (endpoint.Conn, error) {
	t := (*Transport)(h)
	tag, _ := ep.Tag.(*epTag)
	addrs := ep.Addrs()
	if len(addrs) == 0 {
		return nil, errors.New("endpoint has no address")
	}
	c := &httpConn{t: t, ep: ep, scheme: "http", host: addrs[0], gone: make(chan struct{})}
	tr := &http.Transport{
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
		// Each request's own: a route's headers may ask for gzip.
		DisableCompression: true,
		Protocols:          new(http.Protocols),
	}
	tr.Protocols.SetHTTP1(true)
	dial := t.dial
	if tag != nil && tag.proxy != "" {
		// gRFC A86's http_11_proxy: every connection is a CONNECT tunnel
		// through the proxy, plaintext HTTP included (net/http's own
		// proxying would send plaintext requests to the proxy in absolute
		// form instead).
		proxy, direct := tag.proxy, t.dial
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return httpconnect.DialThrough(ctx, func(ctx context.Context, a string) (net.Conn, error) {
				return direct(ctx, network, a)
			}, proxy, addr)
		}
	}
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return c.dialLimited(ctx, func() (net.Conn, error) {
			// Every address of the endpoint, in order (gRFC A61's
			// endpoints with several addresses).
			var first error
			for _, a := range addrs {
				conn, err := dial(ctx, network, a)
				if err == nil {
					return conn, nil
				}
				if first == nil {
					first = err
				}
				if ctx.Err() != nil {
					break
				}
			}
			return nil, first
		})
	}
	var lc *leafConn
	if tag != nil {
		lc = tag.lc
	}
	proto := protoHTTP1
	if lc != nil {
		proto = lc.proto
	}
	switch {
	case lc != nil && lc.tls != nil:
		c.scheme = "https"
		hostname := ""
		if tag != nil {
			hostname = tag.hostname
		}
		sec := lc.tls
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := tr.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			conn, err := handshake(ctx, sec.Info, raw, hostname, proto)
			if tc, ok := conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
				c.multiplexed.Store(true) // auto_config's ALPN chose it
			}
			return conn, err
		}
		switch proto {
		case protoHTTP2:
			tr.Protocols.SetHTTP1(false)
			tr.Protocols.SetHTTP2(true)
			c.multiplexed.Store(true)
		case protoAuto:
			tr.Protocols.SetHTTP2(true)
		}
	case proto == protoHTTP2:
		tr.Protocols.SetHTTP1(false)
		tr.Protocols.SetUnencryptedHTTP2(true)
		c.multiplexed.Store(true)
	}
	c.tr = tr
	t.meterConnsLocked(c, tr)
	return c, nil
}

// Connect implements endpoint.Conn: the endpoint is ready, reported
// before the Set next settles (the pool calls Connect under mu, inside
// its own work).
func (c *httpConn) Connect() { c.t.pending = append(c.t.pending, c) }

// Shutdown implements endpoint.Conn: idle connections close once mu is
// released (closing a net.Conn may run the user's DialContext's code, and
// reports its metrics), the others as their requests end.
func (c *httpConn) Shutdown() {
	if c.shut.CompareAndSwap(false, true) {
		close(c.gone)
		c.t.closing = append(c.t.closing, c)
	}
}

// closeIdle closes the idle connections of the endpoints shut down, with
// mu not held.
func closeIdle(cs []*httpConn) {
	for _, c := range cs {
		c.tr.CloseIdleConnections()
	}
}

// afterUse ends a request's use of the endpoint: it no longer holds a
// connection if it was busy (client_limits.go), and the connection it
// left idle is closed if the endpoint was let go meanwhile.
func (c *httpConn) afterUse(busy bool) {
	if busy {
		c.busy.Add(-1)
	}
	if c.shut.Load() {
		c.tr.CloseIdleConnections()
	}
}

// Do implements cluster.Host.
func (h *setHost) Do(f func()) {
	t := (*Transport)(h)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	f()
	t.finishAndUnlock()
}

// Log implements cluster.Host.
func (h *setHost) Log(level slog.Level, msg string, args ...any) {
	(*Transport)(h).logLocked(level, msg, args...)
}

// Pinned implements cluster.Host: no cluster is kept awake besides the
// routes' (the Transport's clusters never sleep).
func (*setHost) Pinned(string) bool { return false }

// HeaderHash implements cluster.Host: ring_hash's request_hash_header of
// an HTTP request.
func (*setHost) HeaderHash(req any, name string) uint64 {
	r, _ := req.(*http.Request)
	if r == nil {
		return route.HeaderHash(nil, name)
	}
	return route.HeaderHash(&reqView{r: r, path: r.URL.EscapedPath()}, name)
}

// finishAndUnlock reports the endpoints that asked to connect as ready,
// has the Set settle, publishes the pickers if any changed, closes what
// no cluster uses, and unlocks mu; then it logs and runs what the Set
// deferred.
func (t *Transport) finishAndUnlock() {
	if t.closed {
		t.logs = nil
		t.mu.Unlock()
		return
	}
	changed := false
	for {
		for len(t.pending) > 0 {
			p := t.pending
			t.pending = nil
			for _, c := range p {
				t.set.Pool().SetState(c.ep, c, endpoint.Ready, nil)
			}
		}
		if t.set.Settle() {
			changed = true
		}
		if len(t.pending) == 0 {
			break
		}
	}
	if changed {
		old := t.pickers.Load()
		t.pickers.Store(&published{m: t.set.Pickers(), next: make(chan struct{})})
		close(old.next)
	}
	after := t.set.Finish()
	t.pruneLeafConnsLocked()
	logs, closing := t.logs, t.closing
	t.logs, t.closing = nil, nil
	t.mu.Unlock()
	closeIdle(closing)
	for _, l := range logs {
		t.logger.Log(context.Background(), l.level, l.msg, l.args...)
	}
	after.Run()
}

// StartDNS implements cluster.Host: LOGICAL_DNS names are looked up with
// the net package's resolver, again whenever an endpoint of theirs fails
// a request (Resolution.ResolveNow).
func (h *setHost) StartDNS(res *cluster.Resolution) {
	t := (*Transport)(h)
	ctx, cancel := context.WithCancel(context.Background())
	r := &dnsLookup{t: t, res: res, ctx: ctx, cancel: cancel}
	t.mu.Lock()
	if t.closed || !t.set.Attach(res, r) {
		t.mu.Unlock()
		cancel()
		return
	}
	r.ResolveNow()
	t.mu.Unlock()
}

// dnsLookup is the resolver of one LOGICAL_DNS host:port.
type dnsLookup struct {
	t       *Transport
	res     *cluster.Resolution
	ctx     context.Context
	cancel  context.CancelFunc
	running atomic.Bool
	once    sync.Once
}

// ResolveNow implements cluster.Resolver, under Transport.mu: a lookup,
// unless one is running.
func (r *dnsLookup) ResolveNow() {
	if r.ctx.Err() != nil || !r.running.CompareAndSwap(false, true) {
		return
	}
	r.t.wg.Add(1)
	go r.lookup()
}

func (r *dnsLookup) lookup() {
	defer r.t.wg.Done()
	var addrs []string
	host, port, err := net.SplitHostPort(r.res.Target())
	if err == nil {
		var ips []string
		ips, err = net.DefaultResolver.LookupHost(r.ctx, host)
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
		if err == nil && len(addrs) == 0 {
			err = errors.New("resolved to no addresses")
		}
	}
	if err != nil {
		err = fmt.Errorf("DNS lookup of %s: %w", r.res.Target(), err)
	}
	r.running.Store(false)
	if r.ctx.Err() != nil {
		return
	}
	(*setHost)(r.t).Do(func() { r.t.set.Resolved(r.res, addrs, err) })
}

// Close implements cluster.Resolver.
func (r *dnsLookup) Close() { r.cancel() }
