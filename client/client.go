package client

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// DefaultWatchExpiry is how long a subscribed resource may take to arrive
// before it is reported as not existing, as the xDS protocol recommends.
const DefaultWatchExpiry = 15 * time.Second

// Client features advertised in the node. Both spellings of the SotW
// wrapper feature are sent: Envoy's documentation uses one, gRPC the other.
var clientFeatures = []string{
	"xds.config.supports-resource-ttl",
	"xds.config.supports-resource-in-sotw",
	"xds.config.resource-in-sotw",
}

// lbEndpointCollectionFeature tells servers that the client takes a
// locality's endpoints from an LbEndpointCollection (gRFC A95); advertised
// only with bootstrap.Config.EndpointFallback, as a server may then send
// assignments that a client without it would read as empty.
const lbEndpointCollectionFeature = "xds.endpoint.supports_lb_endpoint_collection"

// clientFeaturesFor returns the client features a client of cfg advertises.
func clientFeaturesFor(cfg *bootstrap.Config) []string {
	if !cfg.EndpointFallback {
		return clientFeatures
	}
	return append(slices.Clip(clientFeatures), lbEndpointCollectionFeature)
}

// Options tune a Client. The zero value is ready to use.
type Options struct {
	// ResourceTypes are the types the client can watch and decode. Nil:
	// every type of Registry.
	ResourceTypes []resources.AnyType
	// Registry holds the resource types, HTTP filter types and cluster
	// specifier plugins the client decodes with: a Listener's filters and
	// a route configuration's overrides and plugins are validated against
	// it. New takes a copy: changes made to the registry afterwards do
	// not reach the client. Nil: a copy of resources.DefaultRegistry(),
	// which is where packages register from init functions; so that one
	// client accepts a filter another does not, give it
	// resources.DefaultRegistry().Clone() with the filter added.
	Registry *resources.Registry
	// WatchExpiry is the does-not-exist timer: how long after a name was
	// sent to the server the resource may take to arrive. Zero:
	// DefaultWatchExpiry.
	WatchExpiry time.Duration
	// TransportBuilder makes the transport to each server. Nil: gRPC ADS
	// transports from transport.NewBuilder(TransportOptions).
	TransportBuilder transport.Builder
	// TransportOptions configure the default TransportBuilder (backoff,
	// stream pacing, dial options). Ignored with a TransportBuilder.
	TransportOptions transport.Options
	// Logger receives the client's logs and, unless TransportOptions set
	// their own, its transports': warnings when a response is rejected
	// (NACK) or a server becomes unavailable, info when it is reachable
	// again or a resource times out, and at debug level every request and
	// response. Nil: warnings and errors go to the handler of
	// slog.Default() (the standard log package unless the program called
	// slog.SetDefault), looked up as each line is written; nothing else
	// is logged. For silence, pass a logger with a handler that discards,
	// such as slog.New(slog.DiscardHandler). Its handler never runs under
	// the client's lock, and may call back into the client.
	Logger *slog.Logger
	// Metrics receives the client's measurements. Nil: none.
	Metrics Metrics
	// DynamicParameters are the dynamic parameters of every watch
	// (discovery.v3 ResourceLocator), under those of WatchOptions. Nil:
	// watches without WatchOptions.DynamicParameters are plain. The map is
	// copied.
	DynamicParameters map[string]string
	// Clock runs the does-not-exist and TTL timers. Nil: the real clock.
	// Tests of code that depends on those timers can pass a fake one
	// (testutils.FakeClock) and move time on by hand.
	Clock Clock
	// Persist keeps the last accepted version of every watched resource
	// on disk, to serve at start while the servers cannot be reached. The
	// zero value persists nothing.
	Persist PersistOptions
}

// Client is an xDS client: it subscribes to the resources its watchers
// want, caches them, and tells the watchers of every change. A Client is
// safe for concurrent use. Create it with New and release it with Close.
type Client struct {
	// Read-only after New.
	cfg     *bootstrap.Config
	types   map[string]resources.AnyType
	reg     *resources.Registry // Options.Registry, copied
	expiry  time.Duration
	builder transport.Builder
	node    *corev3.Node
	logger  *slog.Logger
	metrics Metrics
	clock   Clock
	params  map[string]string // Options.DynamicParameters
	cbs     *serializer       // runs every watcher callback
	closing chan struct{}     // closed once Close has closed every transport
	persist *persister        // nil unless Options.Persist.Dir is set; its state is guarded by mu

	mu sync.Mutex
	// logq holds the lines logged while mu is held, for unlock to write;
	// guarded by mu.
	logq         lockedLog
	closed       bool                  // guarded by mu
	servers      map[string]*server    // by ServerConfig.Key(), those some authority uses; guarded by mu
	topAuthority *authority            // the top-level servers, for names that are not xdstp, once used; guarded by mu
	authorities  map[string]*authority // those of xdstp names, by name, once used; guarded by mu
	releasing    sync.WaitGroup        // transports released by a switch back, closing (closeReleased)
	caches       map[string]*typeCache // by type URL; guarded by mu
	// lastCache is the typeCache cacheLocked returned last: the watches a
	// tree starts together are of one type, and its URL, some 70 bytes,
	// need not be hashed for each. Guarded by mu.
	lastCache      *typeCache
	pending        map[*server]map[string]*subsChange // subscriptions not yet given to transports; guarded by mu
	flushScheduled bool                               // a flush is queued on cbs; guarded by mu
	// lastChange is the entry of pending changeLocked returned last, so
	// that the 10,000 watches one response's callbacks start for one type
	// find it without two map lookups each; zero when pending has no such
	// entry any more. Guarded by mu.
	lastChange pendingRef

	lrs lrsState // load reporting (ReportLoad), under its own mutex
}

// New returns a client for the servers and node in cfg. It validates cfg
// and starts no stream: a server is contacted when the first resource it
// serves is watched.
func New(cfg *bootstrap.Config, opts Options) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("xds client: nil bootstrap config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("xds client: %w", err)
	}
	reg := opts.Registry
	if reg == nil {
		reg = resources.DefaultRegistry()
	}
	// A copy, so that what the client accepts is settled here: neither a
	// package registering later nor the caller can change it under way.
	reg = reg.Clone()
	types := opts.ResourceTypes
	if types == nil {
		types = reg.Types()
	}
	c := &Client{
		cfg:         cfg,
		types:       make(map[string]resources.AnyType, len(types)),
		reg:         reg,
		expiry:      opts.WatchExpiry,
		builder:     opts.TransportBuilder,
		node:        cfg.Node.Proto(clientFeaturesFor(cfg)),
		logger:      opts.Logger,
		metrics:     opts.Metrics,
		clock:       opts.Clock,
		servers:     make(map[string]*server),
		authorities: make(map[string]*authority),
		caches:      make(map[string]*typeCache),
		pending:     make(map[*server]map[string]*subsChange),
	}
	for _, t := range types {
		c.types[t.TypeURL()] = t
	}
	if len(opts.DynamicParameters) > 0 {
		c.params = make(map[string]string, len(opts.DynamicParameters))
		for k, v := range opts.DynamicParameters {
			c.params[k] = v
		}
	}
	if c.expiry <= 0 {
		c.expiry = DefaultWatchExpiry
	}
	if c.metrics == nil {
		c.metrics = noMetrics{}
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.logger == nil {
		c.logger = DefaultLogger()
	}
	if c.builder == nil {
		topts := opts.TransportOptions
		if topts.Logger == nil {
			topts.Logger = c.logger
		}
		c.builder = transport.NewBuilder(topts)
	}
	c.cbs = newSerializer()
	c.closing = make(chan struct{})
	if opts.Persist.Dir != "" {
		c.persist = c.newPersister(opts.Persist)
		c.startPersistWait()
	}
	return c, nil
}

// Bootstrap returns the bootstrap configuration the client was made with,
// so that code handed only the client (the grpcxds resolver, for one) names
// resources and finds certificate providers as the bootstrap says: listener
// name templates, authorities, the node, certificate_providers. The client
// keeps using it: the caller must not modify it.
func (c *Client) Bootstrap() *bootstrap.Config { return c.cfg }

// Close stops every stream and timer. Close is idempotent, and no watcher
// callback starts after the first Close returns.
//
// Called from outside the client's callbacks, Close returns once no
// goroutine of the client is left and no callback is running.
//
// Called from a watcher callback, Close cannot wait for that callback to
// return. It stops the streams and timers, drops every queued callback, and
// returns; the callback that called it then runs to its end, and the
// client's last goroutine (the one running callbacks) exits as soon as it
// has. Any other Close, or one made later, waits for that too.
//
// A watch started after Close is told so: its watcher's ResourceError gets
// an *Error wrapping ErrClosed.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.unlock()
		// Wait as the first Close does. Transports are closed before
		// closing is closed, and never wait for a callback, so a Close from
		// a callback waiting here cannot hold up the first.
		<-c.closing
		c.cbs.close()
		return
	}
	c.closed = true
	servers := c.servers
	c.servers = nil
	for _, tc := range c.caches {
		for _, e := range tc.entries {
			e.stopTimers()
		}
	}
	c.stopPersistTimerLocked()
	c.unlock()
	c.closeLoadReporting()
	// Safe from a callback: a transport's goroutines wait for the done of
	// a response, which only a callback calls, no longer than the stream's
	// context, which Close cancels.
	for _, s := range servers {
		s.transport.Close()
	}
	// Transports released by a switch back close the same way.
	c.releasing.Wait()
	// No response applies any more: the writer's last round has the last
	// values.
	c.closePersister()
	close(c.closing)
	c.cbs.close()
}

// server is one management server and its transport. It is the
// transport.Handler of that transport, so the client knows which server
// each report comes from.
type server struct {
	c         *Client
	cfg       bootstrap.ServerConfig // read-only
	transport transport.Transport    // read-only after creation
	// dctx is what decoders are told of where the server's resources come
	// from: cfg, the client's bootstrap and registry. Read-only; a renewed
	// server (renewLocked) shares its predecessor's, for the same cfg, so
	// that what it resends byte for byte is recognised (see sameSource).
	dctx *resources.DecodeContext
	// health is what the client knows of the server's reachability
	// (health.go). Guarded by c.mu.
	health
	// controlPlane is the identifier the server last gave in a response
	// (control_plane), "" if none. Guarded by c.mu.
	controlPlane string
	// answered tells whether the server has sent a response since the
	// client started: until then, what was persisted may be served for
	// its resources (Options.Persist). Guarded by c.mu.
	answered bool
	// warnedIstiod is set once the istiod warning has been logged for this
	// server (see istiodDeltaWarning). Guarded by c.mu.
	warnedIstiod bool
	// connected is what Metrics.Connected last said. Guarded by c.mu.
	connected bool
	// refs counts the authorities that use the server, as current or as a
	// higher-priority one they wait for (see authority). Guarded by c.mu.
	refs int
}

func (s *server) OnResponse(r *transport.Response, done func()) error {
	return s.c.handleResponse(s, r, done)
}

func (s *server) OnSubscriptionsSent(typeURL string, names []string) {
	s.c.handleSubscriptionsSent(s, typeURL, names)
}

func (s *server) OnStreamError(se *transport.StreamError) { s.c.handleStreamEnd(s, se) }

func (s *server) OnUnservable(typeURL string, names []string, err error) {
	s.c.handleUnservable(s, typeURL, names, err)
}

func (s *server) ResourceVersions(typeURL string) map[string]string {
	return s.c.resourceVersions(s, typeURL)
}

// serverOfLocked returns the server of cfg, building its transport the
// first time. Authorities that list the same server share it.
func (c *Client) serverOfLocked(cfg bootstrap.ServerConfig) (*server, error) {
	key := cfg.Key()
	if s, ok := c.servers[key]; ok {
		return s, nil
	}
	s := &server{c: c, cfg: cfg}
	s.since = c.clock.Now()
	s.dctx = c.decodeContext(&s.cfg)
	t, err := c.builder.Build(cfg, c.node, s)
	if err != nil {
		return nil, s.unavailable(err)
	}
	s.transport = t
	c.servers[key] = s
	return s, nil
}

// decodeContext is the DecodeContext of resources that cfg's server sent.
func (c *Client) decodeContext(cfg *bootstrap.ServerConfig) *resources.DecodeContext {
	return &resources.DecodeContext{Server: cfg, Bootstrap: c.cfg, Registry: c.reg}
}

// pendingRef names an entry of Client.pending: the change ch of server s
// and type typeURL.
type pendingRef struct {
	s       *server
	typeURL string
	ch      *subsChange
}

// subsChange is a subscription change for one type of one server, not yet
// handed to its transport.
type subsChange struct {
	// add lists the names to subscribe to while each came once and none
	// was withdrawn, which is how a tree's first responses subscribe
	// (10,000 clusters, then their endpoints): a slice, in the order
	// subscribed, with no table to grow. A withdrawal, or a caller that
	// may name a name twice, indexes the names in addSet, which holds them
	// from then on (add is nil).
	add    []string
	addSet map[string]struct{}
	remove map[string]struct{}
}

// indexAdds moves the names to subscribe to from add to addSet, if not
// done yet.
func (ch *subsChange) indexAdds() {
	if ch.addSet != nil {
		return
	}
	ch.addSet = make(map[string]struct{}, len(ch.add))
	for _, n := range ch.add {
		ch.addSet[n] = struct{}{}
	}
	ch.add = nil
}

// adds returns the names to subscribe to.
func (ch *subsChange) adds() []string {
	if ch.addSet != nil {
		return keys(ch.addSet)
	}
	return ch.add
}

// subscribeLocked and unsubscribeLocked record a change for the next flush.
// Flushes run on the callback serializer, after every callback queued before
// them: the names that the callbacks for one response subscribe to go out
// together, as one request per type, however many callbacks there were.
//
// A change and its reverse before the flush cancel out. That is sound only
// because a name whose removal is pending stays cached until the flush (see
// forgetRemovedLocked): a watch that cancels the removal finds the value
// the server believes the client holds. unsubscribeLocked reports whether
// it queued a removal, false when it cancelled a subscription the server
// never heard of.
//
// subscribeLocked is for a name's first watcher, which cannot come twice
// before a flush without a withdrawal in between; a caller that may
// subscribe to a name already pending uses subscribeAgainLocked.
func (c *Client) subscribeLocked(s *server, typeURL, name string) {
	ch := c.changeLocked(s, typeURL)
	if _, ok := ch.remove[name]; ok {
		delete(ch.remove, name)
		return
	}
	if ch.addSet != nil {
		ch.addSet[name] = struct{}{}
		return
	}
	ch.add = append(ch.add, name)
}

// subscribeAgainLocked is subscribeLocked for a name that may be pending
// already (every name of an authority, told to a new server).
func (c *Client) subscribeAgainLocked(s *server, typeURL, name string) {
	c.changeLocked(s, typeURL).indexAdds()
	c.subscribeLocked(s, typeURL, name)
}

func (c *Client) unsubscribeLocked(s *server, typeURL, name string) (queued bool) {
	ch := c.changeLocked(s, typeURL)
	ch.indexAdds()
	if _, ok := ch.addSet[name]; ok {
		delete(ch.addSet, name)
		return false
	}
	ch.remove[name] = struct{}{}
	return true
}

func (c *Client) changeLocked(s *server, typeURL string) *subsChange {
	if l := &c.lastChange; l.s == s && l.typeURL == typeURL {
		return l.ch // found in pending: the flush is scheduled already
	}
	byType := c.pending[s]
	if byType == nil {
		byType = make(map[string]*subsChange)
		c.pending[s] = byType
	}
	ch := byType[typeURL]
	if ch == nil {
		ch = &subsChange{remove: make(map[string]struct{})}
		byType[typeURL] = ch
	}
	if !c.flushScheduled {
		c.flushScheduled = true
		c.cbs.schedule(c.flush)
	}
	c.lastChange = pendingRef{s, typeURL, ch}
	return ch
}

// dropPendingLocked forgets the changes pending for s.
func (c *Client) dropPendingLocked(s *server) {
	delete(c.pending, s)
	if c.lastChange.s == s {
		c.lastChange = pendingRef{}
	}
}

func (c *Client) flush() {
	c.mu.Lock()
	pending := c.pending
	c.pending = make(map[*server]map[string]*subsChange)
	c.lastChange = pendingRef{}
	c.flushScheduled = false
	closed := c.closed
	if !closed {
		for s, byType := range pending {
			for typeURL, ch := range byType {
				c.forgetRemovedLocked(s, typeURL, ch.remove)
			}
		}
	}
	c.unlock()
	if closed {
		return
	}
	for s, byType := range pending {
		for typeURL, ch := range byType {
			if add := ch.adds(); len(add)+len(ch.remove) > 0 {
				s.transport.UpdateSubscriptions(typeURL, add, keys(ch.remove))
			}
		}
	}
}

// forgetRemovedLocked forgets, as their removal goes to the transport, the
// entries nobody watched again since their last cancel, which kept them.
func (c *Client) forgetRemovedLocked(s *server, typeURL string, removed map[string]struct{}) {
	tc := c.caches[typeURL]
	if tc == nil {
		return
	}
	for name := range removed {
		if name == resources.Wildcard {
			if tc.wildcard == nil {
				for _, e := range tc.entries {
					if e.srv == s && e.watchers.len() == 0 {
						c.forgetLocked(tc, e)
					}
				}
			}
			continue
		}
		e := tc.entries[name]
		if e == nil || e.srv != s || e.watchers.len() > 0 || c.keptByWildcardLocked(tc, e) {
			continue
		}
		c.forgetLocked(tc, e)
	}
}

func keys(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
