package grpcxds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/sharedclient"
	"github.com/goxds/xds/internal/treeerr"
	"github.com/goxds/xds/watchers"
)

// DefaultScheme is the target scheme of a Builder whose Options leave
// Scheme empty: targets read "goxds:///my-listener". It is not gRPC's own
// "xds", so that both resolvers can serve one program.
const DefaultScheme = "goxds"

// Options configure NewBuilder. The zero value reads the bootstrap from the
// environment (GRPC_XDS_BOOTSTRAP or GRPC_XDS_BOOTSTRAP_CONFIG) and serves
// DefaultScheme.
type Options struct {
	// Scheme is the target scheme the Builder serves, in lower case. "":
	// DefaultScheme.
	Scheme string
	// Client, if set, is the xDS client every channel of the Builder
	// watches through. It is shared, not owned: the caller closes it after
	// the channels. Nil: the Builder creates a client from Bootstrap when
	// the first channel starts and shares it between its channels; once
	// the last one has closed (or gone idle), the client stays open for
	// ClientLinger, for the next channel to find its configuration at
	// once, and then closes. Builder.Close closes it without waiting.
	// A given Client validates with its own registry: it routes by RLS
	// only if that registry has the plugin (RegisterRLS).
	Client *client.Client
	// ClientLinger is how long a client the Builder created stays open
	// after its last channel released it. A channel going idle (gRPC's
	// idle timeout) releases it too, so without a linger every
	// idle-to-active cycle of a lone channel would redial the management
	// server and fetch the whole configuration again. Zero:
	// DefaultClientLinger; negative: closed at once.
	ClientLinger time.Duration
	// Bootstrap names the management servers for a client the Builder
	// creates, and holds the listener name templates (gRFC A47) used with
	// Client too. Nil: the bootstrap Client was made with
	// ((*client.Client).Bootstrap), or without Client bootstrap.FromEnv.
	Bootstrap *bootstrap.Config
	// ClientOptions tune a client the Builder creates; unused with Client.
	// The Builder gives that client a copy of ClientOptions.Registry (nil:
	// of resources.DefaultRegistry()) with the RLS cluster specifier
	// plugin added; the caller's registry is left as it is.
	ClientOptions client.Options
	// Logger receives what the resolver and balancer decide, at debug
	// level: each configuration a channel applies, each failover of a
	// cluster from a priority that did not connect in time, each switch of
	// a cluster's priority, the clusters woken by their first RPC or put to
	// sleep by ClusterIdleTimeout; and what fails, at warning level: a channel
	// left without a usable configuration, a cluster with no usable
	// endpoint, an update the channel refused. Nil: ClientOptions.Logger
	// when the Builder creates its client and it is set; otherwise
	// warnings to slog.Default(), as a client given no logger does.
	//
	// These lines go to a slog.Logger, not to grpc-go's grpclog: they are
	// the second half of the story the client's log tells (the client says
	// what the server sent, these what the channel did with it), so they
	// belong with the client's lines, in one handler, with the same
	// structured attributes (listener, cluster); and grpclog shows them
	// only with all of gRPC's own logging turned up.
	Logger *slog.Logger
	// FailoverTimeout is how long the balancer waits for a priority that is
	// still connecting before it tries the next one (gRFC A56's failover
	// timer). Zero: DefaultFailoverTimeout.
	FailoverTimeout time.Duration
	// ConnectOnFirstRPC leaves each cluster the routes name unconnected
	// until the first RPC routed to it: its endpoints are dialled then,
	// and that RPC waits for them as it would for a cluster still
	// connecting. By default, as in gRPC, every cluster's endpoints are
	// connected as soon as the configuration names them, which with a
	// route configuration of thousands of clusters means thousands of
	// connections the service may never use (grpc-go spends tens of KiB
	// and two goroutines on each, and redials those that do not answer).
	//
	// A cluster once used stays connected while the routes name it, or
	// until ClusterIdleTimeout. The channel reports IDLE while no cluster
	// is ready or connecting, and ClientConn.Connect does not wake idle
	// clusters. Clusters an RLS policy routes to connect at once: the
	// lookup was made for an RPC.
	ConnectOnFirstRPC bool
	// ClusterIdleTimeout, with ConnectOnFirstRPC, puts a cluster back to
	// sleep when no RPC has been routed to it for between one and two
	// timeouts and none is still running on it (a stream counts until it
	// ends): its connections that no other cluster uses are closed,
	// and its next RPC connects it again, as the first did. Zero: a
	// cluster once used stays connected while the routes name it.
	ClusterIdleTimeout time.Duration

	// RetryMetrics, if set, hears of every call the channels' retry
	// policies retried (gRFC A96's grpc.client.call.retries and
	// grpc.client.call.retry_delay); metrics/otelxds and metrics/promxds
	// implement it. Nil: nothing is measured, at no cost per RPC.
	RetryMetrics RetryMetrics
	// OutlierMetrics, if set, hears of each outlier the channels' outlier
	// detection finds, ejected or not (gRFC A91); SubchannelMetrics of
	// their connections' attempts, disconnections and count (gRFC A94).
	// Both are labelled with the channel's target and the leaf cluster
	// (gRFC A89's backend service), connections with their locality too;
	// metrics/otelxds and metrics/promxds implement them. Nil: nothing is
	// measured; neither is on the per-RPC path.
	OutlierMetrics    OutlierMetrics
	SubchannelMetrics SubchannelMetrics
	// ExtAuthzMetrics, if set, counts the outcomes of the channels'
	// external authorization checks (gRFC A92); metrics/otelxds and
	// metrics/promxds implement it. Nil: nothing is counted.
	ExtAuthzMetrics ExtAuthzMetrics
	// ExtProcMetrics, if set, hears how long each event of an RPC spent
	// in the channels' external processing filters (gRFC A93's
	// grpc.client_ext_proc.* histograms); metrics/otelxds and
	// metrics/promxds implement it. Nil: nothing is measured.
	ExtProcMetrics ExtProcMetrics
	// MaxConnectionsPerEndpoint caps the connections a channel makes to
	// one endpoint under gRFC A105's connection scaling: a cluster's
	// per-host circuit breaker (max_connections, gRPC's
	// max_connections_per_subchannel) lets a channel open another
	// connection to an endpoint when every one it has carries as many
	// RPCs as the server's MAX_CONCURRENT_STREAMS allows, and a setting
	// above this cap counts as the cap. Zero:
	// DefaultMaxConnectionsPerEndpoint; 1 turns scaling off for the
	// Builder's channels. Scaling is read from xDS only when
	// resources.EnvConnectionScaling is "true", as the gRFC says.
	MaxConnectionsPerEndpoint int

	// SideChannelDialOptions are given to the channels a channel makes to
	// the external authorization and processing services its filters
	// name (gRFC A92, A93), before the credentials gRFC A102 gives them,
	// which they cannot replace. Each check or processing stream has the
	// data-plane RPC's context as its parent, so a tracing stats handler
	// put here (grpc.WithStatsHandler) makes it a child span of the RPC's
	// trace. That is the trace of the RPC's context as the filters get
	// it: a span the application started, or a tracing interceptor
	// chained before DialOptions(); one chained after them (as
	// NewClient's opts are) runs inside the filters, and its span is not
	// yet there.
	SideChannelDialOptions []grpc.DialOption
}

// DefaultMaxConnectionsPerEndpoint is Options.MaxConnectionsPerEndpoint
// when unset: gRFC A105's default channel limit.
const DefaultMaxConnectionsPerEndpoint = 10

// Builder is a resolver.Builder for targets that name an xDS listener:
// "goxds:///my-listener", or "goxds://authority/name" for a listener of a
// bootstrap authority. Each channel built with it watches the listener's
// config tree and routes with the goxds balancer. Make each channel with
// NewClient, or with grpc.NewClient and b.DialOptions(): they add the
// interceptors that apply each RPC's route timeout, retry policy and HTTP
// filters. A channel that finds the Builder through grpc.WithResolvers(b)
// alone, or through gRPC's registry (Register) with no dial options, routes
// by the configuration but applies none of that, and the balancer logs a
// warning at its first RPC. A Builder is safe for concurrent use.
type Builder struct {
	// Read-only after NewBuilder.
	scheme string
	cfg    *bootstrap.Config // Options.Bootstrap, or the client's
	shared *client.Client    // the Options.Client, or nil
	// lender lends the client the Builder makes to its channels, and
	// keeps it for Options.ClientLinger after the last has released it;
	// nil with shared.
	lender *sharedclient.Lender
	scJSON string       // the service config every channel gets
	logger *slog.Logger // Options.Logger, or its default
	// retryWait replaces the timer retries wait on, in tests; nil: the
	// real one. Set before the first channel.
	retryWait func(ctx context.Context, d time.Duration) error
	// retryMetrics, outlierMetrics and subchannelMetrics are Options'.
	retryMetrics      RetryMetrics
	outlierMetrics    OutlierMetrics
	subchannelMetrics SubchannelMetrics
	extAuthzMetrics   ExtAuthzMetrics
	extProcMetrics    ExtProcMetrics
	// maxConns is Options.MaxConnectionsPerEndpoint, defaulted.
	maxConns int
	// sideOpts are Options.SideChannelDialOptions.
	sideOpts []grpc.DialOption
}

// DefaultClientLinger is how long a client a Builder created stays open
// after its last channel released it, unless Options.ClientLinger says
// otherwise.
const DefaultClientLinger = 5 * time.Minute

// NewBuilder returns a Builder for opts. It fails if the scheme is not a
// valid lower-case URI scheme, or if no client is given and no valid
// bootstrap can be had.
func NewBuilder(opts Options) (*Builder, error) {
	b := &Builder{scheme: opts.Scheme, cfg: opts.Bootstrap, shared: opts.Client, retryMetrics: opts.RetryMetrics,
		outlierMetrics: opts.OutlierMetrics, subchannelMetrics: opts.SubchannelMetrics, extAuthzMetrics: opts.ExtAuthzMetrics,
		extProcMetrics: opts.ExtProcMetrics, sideOpts: slices.Clone(opts.SideChannelDialOptions)}
	if b.scheme == "" {
		b.scheme = DefaultScheme
	}
	switch {
	case opts.Logger != nil:
		b.logger = opts.Logger
	case opts.Client == nil && opts.ClientOptions.Logger != nil:
		b.logger = opts.ClientOptions.Logger
	default:
		b.logger = client.DefaultLogger()
	}
	if !validScheme(b.scheme) {
		return nil, fmt.Errorf("grpcxds: scheme %q: want a letter, then lower-case letters, digits, '+', '-' or '.'", b.scheme)
	}
	switch b.maxConns = opts.MaxConnectionsPerEndpoint; {
	case b.maxConns < 0:
		return nil, fmt.Errorf("grpcxds: MaxConnectionsPerEndpoint %d is negative (want 1 or more, or 0 for the default %d)", b.maxConns, DefaultMaxConnectionsPerEndpoint)
	case b.maxConns == 0:
		b.maxConns = DefaultMaxConnectionsPerEndpoint
	}
	if opts.FailoverTimeout < 0 {
		return nil, fmt.Errorf("grpcxds: FailoverTimeout %v is negative", opts.FailoverTimeout)
	}
	if opts.ClusterIdleTimeout < 0 || (opts.ClusterIdleTimeout > 0 && !opts.ConnectOnFirstRPC) {
		return nil, fmt.Errorf("grpcxds: ClusterIdleTimeout %v: want a positive duration, with ConnectOnFirstRPC (a cluster that sleeps must wake on its next RPC)", opts.ClusterIdleTimeout)
	}
	if b.cfg != nil {
		if err := b.cfg.Validate(); err != nil {
			return nil, fmt.Errorf("grpcxds: %w", err)
		}
	}
	// The Client's own, when given: its listener name template and
	// authorities are what its user configured, and its node ID names it
	// in errors.
	cfg, err := sharedclient.Bootstrap(b.cfg, b.shared)
	if err != nil {
		return nil, fmt.Errorf("grpcxds: %w", err)
	}
	b.cfg = cfg
	if b.shared == nil {
		// The client the Builder makes routes by RLS; the caller's
		// registry, and the default, stay as they are.
		copts := opts.ClientOptions
		copts.Registry = withRLS(copts.Registry)
		linger := opts.ClientLinger
		if linger == 0 {
			linger = DefaultClientLinger
		}
		b.lender = sharedclient.New(b.cfg, copts, linger)
	}
	var lb lbConfigJSON
	if opts.FailoverTimeout > 0 {
		lb.FailoverTimeout = opts.FailoverTimeout.String()
	}
	lb.ConnectOnFirstRPC = opts.ConnectOnFirstRPC
	if opts.ClusterIdleTimeout > 0 {
		lb.ClusterIdleTimeout = opts.ClusterIdleTimeout.String()
	}
	sc, err := json.Marshal(map[string]any{"loadBalancingConfig": []map[string]lbConfigJSON{{BalancerName: lb}}})
	if err != nil { // only strings: cannot happen
		return nil, fmt.Errorf("grpcxds: service config: %v", err)
	}
	b.scJSON = string(sc)
	return b, nil
}

func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// Scheme implements resolver.Builder.
func (b *Builder) Scheme() string { return b.scheme }

// Build implements resolver.Builder: it starts watching the config tree of
// the listener target names, and returns at once. The listener is the
// target's path with the bootstrap's client_default_listener_resource_name_template
// applied, or, for a target with an authority, that authority's template.
// The virtual host is chosen for the channel's authority (the target's
// path unless grpc.WithAuthority says otherwise).
//
// A channel made with only grpc.WithResolvers(b) routes by the
// configuration but applies none of its per-RPC parts; see DialOptions.
func (b *Builder) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	cs := newChannelState(b)
	// A channel finds b in gRPC's registry, or in its grpc.WithResolvers:
	// the warning says which, so that the user knows what to change.
	cs.noInterceptors = noInterceptorsWarning(b.scheme, resolver.Get(b.scheme) == b)
	return b.build(target, cc, opts, cs)
}

// build is Build for a channel whose state (shared with its interceptors,
// if it has them) is cs.
func (b *Builder) build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions, cs *channelState) (resolver.Resolver, error) {
	name, err := b.listenerName(target)
	if err != nil {
		return nil, err
	}
	sc := cc.ParseServiceConfig(b.scJSON)
	if sc.Err != nil {
		return nil, fmt.Errorf("grpcxds: the goxds service config: %v", sc.Err)
	}
	c, release, err := b.acquireClient()
	if err != nil {
		return nil, err
	}
	authority := opts.Authority
	if authority == "" {
		authority = target.Endpoint()
	}
	r := &xdsResolver{cc: cc, listener: name, target: target.String(), nodeID: b.cfg.Node.ID, sc: sc, release: release,
		source: source{cs: cs, epoch: cs.epochNow(), logger: b.logger.With("listener", name), bootstrap: b.cfg, client: c}}
	r.clusters = new(watchers.ClusterSet)
	r.authz.DialOptions = b.sideOpts
	// The target as gRPC's CanonicalTarget spells it (the parsed URL).
	r.procMetrics = procMetricsFor(b.extProcMetrics, target.String())
	r.cancel = watchers.WatchConfigTree(c, name, watchers.TreeOptions{Authority: authority, Clusters: r.clusters}, r)
	return r, nil
}

// listenerName maps a target to the Listener to watch.
func (b *Builder) listenerName(target resolver.Target) (string, error) {
	endpoint := target.Endpoint()
	if endpoint == "" {
		return "", fmt.Errorf("grpcxds: target %q names no listener (want %s:///listener-name)", target.String(), b.scheme)
	}
	if authority := target.URL.Host; authority != "" {
		name, ok := b.cfg.AuthorityListenerResourceName(authority, endpoint)
		if !ok {
			// gRPC's words, for what was written against them.
			return "", fmt.Errorf("grpcxds: authority %q specified in dial target %q is not found in the bootstrap file (xDS node ID %q)", authority, target.String(), b.cfg.Node.ID)
		}
		return name, nil
	}
	return b.cfg.ListenerResourceName(endpoint), nil
}

// acquireClient returns the client for a new resolver and what the
// resolver calls when it is done with it.
func (b *Builder) acquireClient() (*client.Client, func(), error) {
	if b.shared != nil {
		return b.shared, func() {}, nil
	}
	c, release, err := b.lender.Acquire()
	switch {
	case errors.Is(err, sharedclient.ErrClosed):
		return nil, nil, errors.New("grpcxds: the Builder is closed")
	case err != nil:
		return nil, nil, fmt.Errorf("grpcxds: %w", err)
	}
	return c, release, nil
}

// Close releases what the Builder holds: a client it created is closed
// now if no channel uses it, else when the last one closes, without
// lingering. Channels built afterwards fail. Close does not close a
// client given in Options.Client. It is safe to call more than once.
func (b *Builder) Close() {
	if b.lender != nil {
		b.lender.Close()
	}
}

// xdsResolver is one channel's resolver: a config tree watch whose events
// become the channel's resolver state. The tree calls it on the client's
// callback goroutine, one event at a time.
type xdsResolver struct {
	// Read-only after Build.
	source   // what its configurations carry to the balancer
	cc       resolver.ClientConn
	listener string
	target   string // the channel's, for metrics labels
	nodeID   string // the bootstrap's, for errors
	sc       *serviceconfig.ParseResult
	cancel   func() // of the tree watch; set right after the watch starts
	release  func()
	// clusters are those the balancer's RLS policies route to besides the
	// routes' (rlsplugin.go): the tree follows them too.
	clusters *watchers.ClusterSet
	// authz are the channels to external authorization services that the
	// channel's ext_authz filters use (extauthz.go): each Update names
	// those its configuration names, the others close once their calls
	// end; all close with it.
	authz extauthzgrpc.Channels
	// procMetrics labels the measures of the channel's external
	// processing filters (extprocmetrics.go); nil: none.
	procMetrics procMetricsFunc
}

// pendingScope names, for a resolver's side channels (extauthzgrpc.Channels.Name),
// the services of the configuration it is putting in force.
type pendingScope struct{ r *xdsResolver }

// Update implements watchers.TreeWatcher: the snapshot becomes the
// channel's state. The goxds balancer, taking it, hands the interceptors
// their part (channelConfig) before it publishes the picker made from it;
// until it has, they keep the configuration before, and the first RPCs
// wait, so that a channel that ignores the service config sends nothing
// anywhere.
func (r *xdsResolver) Update(s *watchers.Snapshot) {
	cfg := &channelConfig{gen: r.cs.nextGen(), src: &r.source, snap: s, chain: newFilterChain(s.Listener, r.filterEnv()), nodeID: r.nodeID}
	st := configState(r.sc, cfg)
	st.Attributes = st.Attributes.WithValue(clusterSetKey{}, r.clusters)
	// The new configuration's side services are named before UpdateState
	// puts it in force, alongside those of the one before: an RPC under it
	// in the meantime would otherwise make a channel no configuration
	// names yet, closed as its call ended and made again by the next one
	// (gRFC A92 keeps a channel across an update that keeps its service).
	services := extauthzgrpc.ClientServices(s.Listener, s.VirtualHost)
	r.authz.Name(pendingScope{r}, services)
	err := r.cc.UpdateState(st)
	if err == nil {
		// The side channels the configuration before named and this one
		// does not close once their calls end (gRFC A92 keeps only those
		// an update keeps); the chain's RPCs take them from now on.
		r.authz.Name(r, services)
	}
	r.authz.Name(pendingScope{r}, nil)
	if err != nil {
		r.notTaken(cfg.gen, err)
		return
	}
	if r.logger.Enabled(context.Background(), slog.LevelDebug) {
		r.logger.Debug("xDS configuration applied", "route_config", s.RouteConfig.Name,
			"virtual_host", s.VirtualHost.Name, "clusters", s.Clusters.Len())
	}
}

// ResourceError implements watchers.TreeWatcher: the tree is unusable
// (the listener or its route configuration missing or rejected, or no
// virtual host), so the channel fails its RPCs with err until the next
// Update. The error goes to the balancer in the resolver state rather than
// as a resolver error (ReportError): gRPC would hold wait-for-ready RPCs on
// a resolver error until their deadline, and before the first snapshot it
// would not even run the goxds balancer.
func (r *xdsResolver) ResourceError(err error) {
	r.logger.Warn("no usable xDS configuration: RPCs fail until there is one", "err", err)
	cerr := &ConfigError{Listener: r.listener, NodeID: r.nodeID, Err: err}
	cfg := &channelConfig{gen: r.cs.nextGen(), src: &r.source, err: status.Error(codes.Unavailable, cerr.Error()), cerr: cerr, nodeID: r.nodeID}
	if err := r.cc.UpdateState(configState(r.sc, cfg)); err != nil {
		r.notTaken(cfg.gen, err)
	}
}

// notTaken handles a state of generation gen that the channel's policy
// refused (UpdateState's error is the policy's verdict). The goxds
// balancer takes every state this resolver makes, so the channel runs
// another policy: it was made with grpc.WithDisableServiceConfig, which
// ignores the resolver's service config, and that policy, handed no
// addresses, refuses the state. Its RPCs would go wherever that policy
// sends them, so the interceptors fail them instead, and the log says so.
func (r *xdsResolver) notTaken(gen uint64, err error) {
	ignored := errNotOurBalancer(r.listener)
	// A resolver closed since (its Update ran on as Close returned) sets
	// nothing, and has nothing to say: no balancer hears a closed one.
	if r.cs.setFrom(r.epoch, &channelConfig{gen: gen, src: &r.source, err: ignored, nodeID: r.nodeID}) {
		r.logger.Warn("the channel ignores the xDS configuration", "err", ignored, "policy_err", err)
	}
}

// AmbientError implements watchers.TreeWatcher: the configuration in force
// stays, so only the log hears of it.
func (r *xdsResolver) AmbientError(err error) {
	r.logger.Warn("keeping the xDS configuration in force", "err", err)
}

// ResolveNow implements resolver.Resolver. The management server pushes
// every change, so there is nothing to ask for.
func (r *xdsResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close implements resolver.Resolver: it stops the tree watch and releases
// the client.
func (r *xdsResolver) Close() {
	r.cancel()
	r.release()
	r.cs.reset()
	r.authz.Close()
}

// ConfigError is what a channel's RPCs fail with while the config tree of
// its listener cannot be used: status UNAVAILABLE with this error's text,
// wait-for-ready RPCs included, until the tree is usable again. The
// resolver hands it to the balancer in the resolver state, in place of a
// snapshot. Err wraps the cause: client.ErrResourceNotFound,
// client.ErrResourceInvalid, client.ErrServerUnavailable, or
// watchers.ErrNoVirtualHost.
type ConfigError struct {
	// Listener is the name of the Listener resource watched.
	Listener string
	// NodeID is the node ID the client gave the management server (the
	// bootstrap's node.id): the first thing to look up on the server side.
	NodeID string
	// Err is the tree's error.
	Err error
}

// Error names the listener and the node ID and says what is wrong with
// the tree.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("goxds: no usable xDS configuration for xDS node ID %q: %s", e.NodeID, treeerr.Text(e.Listener, e.Err))
}

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }
