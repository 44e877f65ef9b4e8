// Package grpcxds routes gRPC channels by an xDS management server's
// configuration, with a resolver, a balancer and interceptors built only
// on grpc-go's public APIs. It sits beside grpc-go's own "xds" resolver
// rather than replacing it: the scheme is "goxds" by default, the
// configuration comes from a goxds client (SotW or delta, TTLs honoured),
// and nothing of grpc-go's internals is needed.
//
// # Using it
//
//	b, err := grpcxds.NewBuilder(grpcxds.Options{}) // bootstrap from GRPC_XDS_BOOTSTRAP(_CONFIG)
//	...
//	conn, err := grpcxds.NewClient("goxds:///my-listener", b,
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// [NewClient] is grpc.NewClient with [Builder.DialOptions]: the resolver,
// the interceptors that apply the per-RPC part of the configuration
// (route timeouts, retries, HTTP filters; see What is supported) and the
// HTTP CONNECT dialer. Call DialOptions once per channel. A channel made
// with grpc.WithResolvers(b) alone, or from a target of a scheme
// [Register] registered, without the dial options, routes by the
// configuration but applies none of the per-RPC part; the balancer logs a
// warning at its first RPC, naming which of the two the channel did.
// NewClient refuses a target that is not of b's scheme ("xds:///name", or
// a bare name that gRPC would give to DNS), and a channel of the dial
// options whose target another resolver serves fails its RPCs at once,
// saying so: b would never configure it. The channel must accept service
// configs from its resolver, which is how the balancer ([BalancerName],
// registered with gRPC when the package is imported) is selected: on a
// channel made with grpc.WithDisableServiceConfig, RPCs fail with
// UNAVAILABLE saying so, rather than going wherever gRPC's default policy
// sends them. [Register] registers a Builder with gRPC under a scheme:
// "goxds" by default, or "xds" when grpc-go's own xDS resolver is not
// linked in.
//
// # Options
//
// [Options] are documented field by field. In short: Client shares one
// goxds client between the Builder and the rest of the program (its
// bootstrap, (*client.Client).Bootstrap, names the listeners); without
// it the Builder creates one from Bootstrap (or the environment) when its
// first channel starts, and keeps it while channels use it and for
// ClientLinger after the last one closes or goes idle, so that a channel
// coming back from idle finds its configuration at once rather than
// redialling the management server; [Builder.Close] closes it. Logger
// hears the channels' decisions (see Logs), FailoverTimeout bounds the
// wait for a priority still connecting, ConnectOnFirstRPC and
// ClusterIdleTimeout connect clusters only when used, RetryMetrics
// hears of the calls a retry policy retried, OutlierMetrics of the
// outliers outlier detection finds and SubchannelMetrics of the
// connections (gRFC A91, A94: see Clusters and Connections below),
// ExtProcMetrics of the time RPCs' events spend in external processing
// filters (gRFC A93).
//
// # The resolver
//
// A target "goxds:///name" watches the Listener the bootstrap's
// client_default_listener_resource_name_template makes of name ("name"
// itself by default), "goxds://authority/name" a listener of a bootstrap
// authority (gRFC A47). The resolver follows the listener's config tree
// ([watchers.WatchConfigTree]) and hands the channel each snapshot in
// resolver.State.Attributes ([SnapshotFromState]), with a service config
// selecting the balancer. resolver.State.Endpoints is left empty, as
// grpc-go's own xDS resolver leaves it: a list of every endpoint, made
// anew for each update, made one cluster's change cost the channel every
// endpoint (and grpc-go's channelz, when on, writes the state into its
// trace as JSON: 63 ms an update at 10,000 endpoints). [EndpointsFromState]
// makes that list on demand, each endpoint with its cluster, locality,
// priority, weights and health ([EndpointInfoFromEndpoint]).
//
// When the tree is unusable (the listener or route configuration does not
// exist or was rejected with nothing good held, no virtual host matches,
// or the management server was never reached) the channel goes to
// TRANSIENT_FAILURE: RPCs fail with status UNAVAILABLE and the text of a
// [ConfigError] naming the listener and the xDS node ID until the tree is
// usable again, and the connections of the old configuration are closed.
// Wait-for-ready RPCs wait instead, as gRPC holds them on any channel in
// TRANSIENT_FAILURE, until a usable configuration comes or their deadline
// (DEADLINE_EXCEEDED, naming the last configuration error): a client
// started before its listener exists holds them past the 15 s
// does-not-exist timer. A lost stream to the management server, or a
// rejected update, keeps the configuration in force.
//
// # What is supported
//
// The rules are the data plane's, the same for every transport, and each
// layer's package documents its own: dataplane/route (which route,
// cluster, hash and policy a request gets), dataplane/cluster (priorities,
// aggregate and LOGICAL_DNS clusters, drops, circuit breakers, LRS, idle
// clusters), dataplane/lbpolicy (the leaf policies), dataplane/outlier and
// dataplane/endpoint (the connections shared by every cluster). What
// follows is what a gRPC channel sees of them.
//
//   - Routing (gRFC A28): paths, headers against the outgoing metadata
//     ("-bin" headers never match; content-type is "application/grpc") and
//     runtime fractions; a route with query parameter matchers never
//     matches; routes no gRPC client can use are skipped at decoding. No
//     matching route, or one that does not forward, fails the RPC with
//     UNAVAILABLE and the reason, naming the xDS node ID.
//   - gRFC A31: the route, the cluster a weighted route draws and the
//     ring_hash request hash are chosen once when the RPC starts and kept
//     at every pick: an RPC waiting for a cluster still connecting keeps
//     it across picker updates (one that leaves the configuration is given
//     up and the RPC routed again; grpc-go keeps it until its RPCs
//     commit). Timeouts as grpc-go applies them: the route's
//     max_stream_duration.grpc_timeout_header_max, else its
//     max_stream_duration, else the connection manager's, bound the whole
//     RPC, retries included (an earlier deadline of the application
//     stays); route.timeout is not used.
//   - Retries (gRFC A44): the route's retry_policy, else the virtual
//     host's; retry_on's gRPC codes; num_retries plus one attempts, not
//     capped at 5 (grpc-go caps service config policies, not xDS ones),
//     and none with num_retries 0 (which grpc-go rejects); exponential
//     backoff with jitter, replaced by the server's grpc-retry-pushback-ms
//     (a negative or malformed one ends the retries). An attempt that got
//     response headers is not retried, nor a dropped pick; a stream is
//     retried until it receives something or has sent more than 256 KiB
//     (what it sent is sent again), and a unary request over 256 KiB not
//     at all. With Options.RetryMetrics each retried call is reported at
//     its end (gRFC A96: retries, time waited); gRPC's own transparent
//     retries happen below the interceptors and are not counted.
//   - HTTP filters (gRFC A39), once per RPC, not per attempt, with their
//     per-route overrides, run by dataplane/httpfilter (shared with the
//     HTTP client; this package binds it: the RPC's metadata, a denial as
//     the RPC's status and trailers). Fault injection (gRFC A33): an abort is not
//     retried; an abort with status OK ends a stream at once, and a unary
//     RPC with io.EOF, as in grpc-go; max_active_faults counts the whole
//     process. External authorization (gRFC A92; package dataplane/extauthz
//     decides): its service is the GrpcService's target with a trusted
//     server's credentials, or for an untrusted server one the bootstrap's
//     allowed_grpc_services lists, with that entry's credentials (gRFC
//     A102); a denied RPC fails
//     with the service's status and its headers as trailers (grpc.Trailer),
//     an allowed one's response_headers_to_add reach grpc.Header and a
//     stream's Header; a channel keeps one connection per service (its
//     target and credentials) while its configuration names it, closed
//     once an update no longer does and the calls on it have ended, or
//     with the channel. With Options.ExtAuthzMetrics each check is counted by its
//     outcome (grpc.client_ext_authz.*, labelled with the channel's target
//     and the route's cluster). External processing (gRFC A93; package dataplane/extproc
//     runs the processing stream, one per RPC, over the same channels):
//     the RPC's metadata and :path go to the processor before the RPC is
//     sent and its changes are the outgoing metadata; in GRPC body mode
//     the request messages and half-close go to it and what it gives back
//     is sent (uncompressed, whatever compressor the RPC asked for); the
//     response headers, messages and trailers go through it before the
//     application sees them (grpc.Header, grpc.Trailer, a stream's Header,
//     RecvMsg and Trailer); an immediate response ends the RPC with its
//     status at once; a Trailers-Only response is headers with
//     end_of_stream. It runs once per RPC, outside the retry attempts,
//     as the other filters do, so a retried RPC has one processing stream
//     and every attempt sends what the processor gave. The protocol's
//     flow control holds each direction to its window once the processor
//     has sent a window update; Options.ExtProcMetrics hears the gRFC's
//     grpc.client_ext_proc.* durations. The check and the processing
//     stream are calls in the RPC's context (gRFC A92, A93: child spans
//     of its trace) on channels that take Options.SideChannelDialOptions,
//     a tracing stats handler say.
//   - Authority rewriting (gRFC A81): on a route whose auto_host_rewrite a
//     trusted_xds_server set, each attempt's :authority is the hostname of
//     the endpoint picked for it (an EDS endpoint's hostname, a
//     LOGICAL_DNS cluster's host:port; grpc.CallAuthority wins), sent once
//     the connection's credentials accept it (TLS checks it against the
//     server's certificate); grpc-go does this only with
//     GRPC_EXPERIMENTAL_XDS_AUTHORITY_REWRITE=true.
//   - Clusters: EDS, LOGICAL_DNS (resolved by gRPC's own "dns" resolver)
//     and aggregate clusters, priorities and failover (gRFC A56: a priority
//     still connecting is waited for up to Options.FailoverTimeout), drops
//     (UNAVAILABLE "dropped by load balancing policy: <category>"), circuit
//     breakers (max_requests), outlier detection (gRFC A50; with
//     Options.OutlierMetrics each outlier found is reported, ejected or
//     not and why: gRFC A91, with the leaf cluster as A89's
//     grpc.lb.backend_service) and load
//     reports to lrs_server self (gRFC A27, with A85's backend metrics),
//     sent by the goxds client ([client.Client.ReportLoad]).
//   - Leaf policies (gRFC A52's load_balancing_policy, or the legacy
//     lb_policy): wrr_locality and ROUND_ROBIN, round_robin,
//     client_side_weighted_round_robin (gRFC A58, weights from ORCA
//     reports per RPC and out of band through grpc-go's orca package),
//     ring_hash (gRFC A42, A76), least_request (gRFC A48) and pick_first
//     (gRFC A62, A61's Happy Eyeballs, A113's weighted shuffle); where one
//     differs from grpc-go's, dataplane/lbpolicy says so.
//   - Connections: one SubConn per endpoint (address list, hostname and
//     security), shared by every cluster and priority that lists it; an
//     EDS update keeps the SubConns of the endpoints it keeps and shuts
//     down those of removed or unhealthy ones gracefully. As in gRPC,
//     every cluster the routes name connects as soon as the configuration
//     arrives; with Options.ConnectOnFirstRPC a cluster waits for its
//     first RPC, and with Options.ClusterIdleTimeout sleeps again when
//     unused, so that a service given a mesh-wide route configuration of
//     thousands of clusters holds connections only to those it calls.
//     With Options.SubchannelMetrics (gRFC A94) each SubConn's attempts,
//     disconnections ("subchannel shutdown" when goxds closed it,
//     "unknown" otherwise: gRPC tells a balancer no more) and the open
//     count are reported, labelled with the leaf cluster and locality
//     that first listed the endpoint, a shared connection counted once;
//     grpc-go's own subchannel metrics cannot carry these labels for a
//     goxds channel.
//   - Security (gRFC A29): with the credentials of package xdscreds, a
//     cluster's UpstreamTlsContext makes its connections TLS or mutual
//     TLS, with the bootstrap's certificate providers and the cluster's
//     SAN matchers; a cluster whose TLS cannot be honoured gets no
//     connection and its RPCs fail with UNAVAILABLE. Any other channel
//     credentials are used for every cluster, as in grpc-go, with a
//     warning once per cluster that asks for TLS.
//   - HTTP CONNECT (gRFC A86): the endpoints of an http_11_proxy cluster
//     are reached through an HTTP/1.1 CONNECT tunnel of the proxy their
//     metadata names, with the cluster's TLS inside (:authority and the
//     TLS server name stay the backend's); a proxy's refusal fails RPCs
//     with UNAVAILABLE quoting its answer. grpc-go does this only with
//     GRPC_EXPERIMENTAL_XDS_HTTP_CONNECT set. The dialer is
//     [ConnectDialer], installed by the dial options: a channel passing
//     its own grpc.WithContextDialer after them must wrap its dialer in
//     ConnectDialer, and a channel without them fails its RPCs to proxied
//     endpoints saying so, never connecting around the proxy.
//     ConnectDialer(nil) keeps grpc-go's proxying from the environment
//     (HTTPS_PROXY, NO_PROXY), which any custom dialer turns off; a base
//     dialer of your own does not.
//   - Connection scaling (gRFC A105), with
//     GRPC_EXPERIMENTAL_XDS_MAX_CONCURRENT_STREAMS_CONNECTION_SCALING=true
//     as the gRFC says: a cluster's per-host circuit breaker
//     (per_host_thresholds, priority DEFAULT, max_connections; 0 is
//     NACKed) lets a channel open up to that many connections to each of
//     its endpoints, capped by Options.MaxConnectionsPerEndpoint (default
//     10), a new one when every open one carries as many RPCs as the
//     server's MAX_CONCURRENT_STREAMS allows. goxds reads that setting off
//     the connection: its dialer ([ConnectDialer]) does in plaintext,
//     xdscreds after its TLS handshake; under other TLS credentials it
//     cannot, and the endpoint keeps one connection (with a warning). An
//     RPC waits for a connection being made in the picker's queue; with
//     none to be made (the cap, or backoff) it waits for a stream in
//     gRPC's transport, as before.
//
// # RLS
//
// The client a Builder makes has the RLS cluster specifier plugin in its
// registry (a copy of [Options].ClientOptions.Registry, or of
// resources.DefaultRegistry(), with the plugin added): a route
// configuration with a RouteLookupClusterSpecifier is accepted or rejected
// as grpc-go's xDS client does (package dataplane/rls validates its
// route_lookup_config with gRPC's rules, and the lookup service's target
// must have a gRPC resolver; an invalid one rejects the route
// configuration, optional plugin or not). Importing the package registers
// the plugin nowhere, so that it never changes how the other clients of
// the process validate routes. A client given as [Options].Client routes
// by RLS only if its registry has the plugin, which [RegisterRLS] adds:
//
//	reg := resources.DefaultRegistry().Clone()
//	if err := grpcxds.RegisterRLS(reg); err != nil { ... }
//	c, err := client.New(cfg, client.Options{Registry: reg})
//
// Without it, the client treats the plugin as any it does not know: a
// route by an optional one is skipped, a route configuration with a
// required one is NACKed, naming the plugin and its type.
//
// Package dataplane/rls routes by the plugin, and its doc says how: the
// lookup keys built from the RPC's method and metadata, the cache,
// throttling, backoff and the default target. Under grpcxds its targets
// are cluster names: the channel subscribes to each one (Cluster and
// endpoints) while a cached answer or the default target uses it, and
// routes to it with the cluster's own policy, as it does a route's
// cluster; the answer's header data goes to the backend as
// x-google-rls-data. A failed lookup without a default target fails the
// RPC with UNAVAILABLE. The lookup service is dialled as gRPC's RLS
// policy dials it, with the channel's authority, credentials and dialer.
//
// # Logs
//
// [Options].Logger, a *slog.Logger, hears the resolver's and the
// balancer's decisions at debug level (a configuration applied, a cluster
// failing over or switching priority, clusters woken or put to sleep) and
// their failures at warning level (no usable configuration, a cluster
// with no usable endpoint). Without one, the lines go where the client's
// do: [Options].ClientOptions.Logger, or warnings only to slog.Default().
// A channel writes at most 10 warnings of one kind in 10 seconds (a zone
// going down fails thousands of clusters at once): the tenth says that
// more are held back, and the first after the pause carries held_back,
// how many were (internal/warnlimit, which httpxds's client uses too).
//
// # Not supported
//
// Retry throttling (which xDS does not configure either).
// grpc.WithDisableRetry and grpc.WithMaxCallAttempts do not reach the
// interceptors' retries. Of gRFC A52's custom policies only those above: a
// TypedStruct naming another policy registered with gRPC is skipped (gRPC
// would use it).
//
// # How it is built
//
// This package is the binding of the data plane to grpc-go's public APIs
// (docs/ARCHITECTURE.md has the picture). The resolver (resolver.go)
// watches the tree and hands each configuration, with what the balancer
// needs of the Builder, to the channel in its resolver.State (state.go);
// the balancer (balancer.go) is a dataplane/cluster Set whose endpoints'
// connections are SubConns (conns.go), secured by xdscreds (security.go,
// over internal/upstreamtls's Cache of HandshakeInfos, which httpxds's
// client shares), resolved by gRPC's "dns" resolver (dns.go); RLS's
// targets are the Set's Holds (rlsplugin.go), A94's connection
// events are judged by dataplane/endpoint's ConnMeter
// (subchannelmetrics.go), and A105's several connections of an endpoint
// are dataplane/endpoint's Group, whose connections are SubConns
// (scale.go; an RPC queued for one keeps its place under max_requests,
// scale_held.go); it hands the configuration
// to the channel's interceptors (channel.go) before it publishes the
// picker made from it, so that no RPC chooses from a configuration newer
// than its picker's. The interceptors (interceptors.go, selector.go)
// choose each RPC's route with dataplane/route and carry it in the RPC's
// context to the picker (picker.go); the RPC's headers as routing sees
// them (route.GRPCHeaders) and whether a failed attempt is retried
// (route.RetryState.NextGRPC) are dataplane/route's rules, and the HTTP
// filters dataplane/httpfilter's (filterchain.go, fault.go and extauthz.go
// bind them; the rest of ext_authz's and ext_proc's binding to grpc-go's
// RPCs, the part a server shares, is internal/extauthzgrpc's and
// internal/extprocgrpc's, which the interceptors call). HTTP CONNECT's dial is internal/httpconnect's, shared with
// httpxds's client, and the client the Builder lends its channels
// internal/sharedclient's.
package grpcxds
