// Package grpcxds routes gRPC channels by an xDS management server's
// configuration, with a resolver and a balancer built only on grpc-go's
// public resolver and balancer APIs. It sits beside grpc-go's own "xds"
// resolver rather than replacing it: the scheme is "goxds" by default,
// the config comes from a goxds client (SotW or delta, TTLs honoured), and
// nothing of grpc-go's internals is needed.
//
// # Using it
//
//	b, err := grpcxds.NewBuilder(grpcxds.Options{}) // bootstrap from GRPC_XDS_BOOTSTRAP(_CONFIG)
//	...
//	conn, err := grpcxds.NewClient("goxds:///my-listener", b,
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// [NewClient] is grpc.NewClient with [Builder.DialOptions]: the resolver,
// and unary and stream interceptors that apply the per-RPC part of the
// configuration (see Per RPC below). Call DialOptions once per channel.
// A channel made with grpc.WithResolvers(b) alone, or from a target of a
// scheme registered with [Register] without the dial options, routes by
// the configuration but applies none of the per-RPC part; the balancer
// logs a warning at its first RPC, naming which of the two the channel
// did. NewClient refuses a target that is not of b's scheme
// ("xds:///name", or a bare name that gRPC would give to DNS), and a
// channel of the dial options whose target another resolver serves fails
// its RPCs at once, saying so: b would never configure it.
//
// Importing the package registers the balancer ([BalancerName]) with gRPC.
// [Options].Client shares one goxds client between the Builder and the rest
// of the program, and its bootstrap ((*client.Client).Bootstrap) names the
// listeners; without it the Builder creates one from the bootstrap when
// its first channel starts, and keeps it while channels use it and for
// [Options].ClientLinger after the last one closes or goes idle, so that a
// channel coming back from idle finds its configuration at once rather
// than redialling the management server. [Builder.Close] closes it. The channel must accept service configs
// from its resolver: that is how the balancer is selected. On a channel
// made with grpc.WithDisableServiceConfig, RPCs fail with UNAVAILABLE
// saying so, rather than going wherever gRPC's default policy sends them.
//
// [Register] registers a Builder with gRPC under a scheme: "goxds" by
// default, or "xds" when grpc-go's own xDS resolver is not linked in.
//
// # The resolver
//
// A target "goxds:///name" watches the Listener the bootstrap's
// client_default_listener_resource_name_template makes of name ("name"
// itself by default), "goxds://authority/name" a listener of a bootstrap
// authority (gRFC A47). The resolver follows the listener's config tree
// ([watchers.WatchConfigTree]) and hands the channel each snapshot: in
// resolver.State.Attributes for the balancer ([SnapshotFromState]), with a
// service config selecting the balancer. resolver.State.Endpoints is left
// empty, as grpc-go's own xDS resolver leaves it: a list of every
// endpoint, made anew for each update, made one cluster's change cost the
// channel every endpoint (and grpc-go's channelz, when on, writes the
// state it is given into its trace as JSON: 63 ms an update at 10,000
// endpoints). [EndpointsFromState] makes that list on demand: the
// endpoints of every EDS cluster with their cluster, locality, priority,
// weights and health ([EndpointInfoFromEndpoint]).
//
// When the tree is unusable (the listener or route configuration does not
// exist or was rejected with nothing good held, no virtual host matches,
// or the management server was never reached) the resolver hands the
// balancer a [ConfigError] instead of a snapshot: the channel goes to
// TRANSIENT_FAILURE, RPCs fail with status UNAVAILABLE and its text until
// the tree is usable again, and the connections of the old configuration
// are closed. Wait-for-ready RPCs wait instead, as gRPC holds them on any
// channel in TRANSIENT_FAILURE: until a usable configuration comes (then
// they are sent by it) or their deadline (DEADLINE_EXCEEDED, naming the
// last configuration error). So a client started before its listener
// exists, or whose listener is re-created, holds such RPCs past the 15 s
// does-not-exist timer.
// A lost stream to the management server, or a rejected update, keeps the
// configuration in force.
//
// # The balancer
//
// For each RPC the picker takes the first route of the virtual host that
// matches: the path (prefix, exact or regex), every header matcher against
// the outgoing metadata (binary "-bin" headers are never matched; the
// content-type is "application/grpc"), and the runtime fraction. A route
// with query parameter matchers never matches, as gRPC requests carry no
// query; routes gRPC cannot use at all (a cluster_header target, an
// optional cluster specifier plugin of an unknown type) are not there to
// match, being skipped when the route configuration is decoded (gRFC A28).
// The route's cluster, or one of its weighted clusters drawn at
// random by weight, picks the endpoint; or, for a route by the RLS
// cluster specifier plugin (grpc.lookup.v1.RouteLookupClusterSpecifier),
// the cluster a route lookup service names for the RPC (see RLS below). No matching route, or a route that
// does not forward (redirect, direct response, non-forwarding), fails the
// RPC with UNAVAILABLE and the reason, naming the xDS node ID. With the
// interceptors, the route and cluster are chosen once when the RPC starts,
// and kept at every pick (below).
//
// Each cluster has priorities: its localities by priority for EDS, a
// single endpoint with every resolved address for LOGICAL_DNS (resolved by
// gRPC's own "dns" resolver), and for an aggregate cluster those of its
// leaves in order. The highest priority with a ready endpoint takes the
// traffic. One still connecting is waited for, up to [Options].FailoverTimeout
// (acted on up to a sixteenth of it late, at most 250 ms, so that the timeouts
// of many clusters that expire together are handled as one batch: one
// picker, not one per cluster);
// one whose endpoints all fail, or that has no HEALTHY or UNKNOWN endpoint,
// is passed over; traffic returns to a higher priority as soon as it has
// a ready endpoint. Within the priority the cluster's policy picks (gRFC
// A52: load_balancing_policy's first supported policy, or the legacy
// lb_policy), with gRPC's outcomes:
//
//   - wrr_locality (gRFC A52), and the legacy ROUND_ROBIN, which gRPC reads
//     as wrr_locality over round_robin: a locality with a ready endpoint is
//     drawn in proportion to its weight, then the wrapped policy picks
//     within that locality. Without wrr_locality the policy picks among all
//     the endpoints of the priority and locality weights count only where
//     the policy weighs endpoints (ring_hash, pick_first's shuffle);
//   - round_robin: the ready endpoints in turn; endpoint weights do not
//     count, as in gRPC;
//   - client_side_weighted_round_robin (gRFC A58): endpoints weighed by
//     their ORCA load reports only, never by EDS weights (QPS over
//     utilization, errors penalized), read per RPC from the trailer, or
//     out of band with enable_oob_load_report (grpc-go's orca package on
//     the SubConn); RPCs spread evenly until two endpoints have weights,
//     an endpoint without one taking the mean;
//   - ring_hash (gRFC A42): the route's hash policies hash the RPC (headers
//     with xxhash, io.grpc.channel_id; no hash gives a random one), or the
//     requestHashHeader of a TypedStruct ring_hash_experimental config
//     (gRFC A76), onto a ring weighted by locality share times endpoint
//     share (under wrr_locality, one ring per locality by endpoint
//     weights), sized by the cluster, at most 4096 entries;
//   - least_request (gRFC A48): the least loaded of choice_count random
//     ready endpoints;
//   - pick_first (gRFC A62): one endpoint connected at a time, in order:
//     the next when it fails, or after 250ms still connecting (Happy
//     Eyeballs, gRFC A61); every RPC to the first ready one, for as long
//     as it stays ready (also across updates that keep it), the others no
//     longer wanted; shuffle_address_list draws the order anew at each
//     update, weighted by the endpoints' shares (gRFC A113). Unlike
//     gRPC's, which goes idle when its connection is lost, it starts
//     again from the first endpoint at once.
//
// The clusters (priorities, failover, aggregate and LOGICAL_DNS leaves,
// drops, circuit breakers, outlier detection, load reports, idle
// clusters) are package dataplane/cluster's, their policies package
// dataplane/lbpolicy's, over the endpoints of package dataplane/
// endpoint's pool (one SubConn per address list and security, shared by
// every cluster and priority naming it); this package binds them to
// SubConns, xdscreds, gRPC's "dns" resolver and gRPC's picks.
//
// A cluster's drop_overloads drop RPCs with UNAVAILABLE "dropped by load
// balancing policy: <category>", and its circuit breaker's max_requests
// caps the RPCs in flight.
//
// A leaf cluster's outlier_detection (gRFC A50) counts the outcome of
// every RPC on each endpoint of a priority (any error is a failure) and,
// at the end of each interval, ejects the endpoints whose success rate is
// below the mean by success_rate_stdev_factor/1000 standard deviations,
// or whose failure percentage is above failure_percentage_threshold,
// among endpoints with the request volume, when enough have it; each with
// its enforcing percentage, and never more than max_ejection_percent of
// the endpoints. An ejected endpoint is failing to the policy and to the
// priority's state (all ejected: the next priority takes over), for
// base_ejection_time times the number of its ejections (at most
// max(base_ejection_time, max_ejection_time)); that number drops by one
// at each interval it is not ejected. Detection is package
// dataplane/outlier's; its intervals run on the balancer's clock.
//
// A cluster whose lrs_server is self reports its load to the management
// server it came from over LRS (gRFC A27), as gRPC does: per locality the
// RPCs issued, in progress, succeeded and errored (any status but OK), each
// attempt counted in the locality of the endpoint it went to; drops by
// drop_overloads category; circuit breaker refusals in the total of drops
// only. The goxds client keeps the counts and runs the stream
// ([client.Client.ReportLoad]); the stream is open while a cluster in use
// reports to the server. The backend metrics an RPC ends with (an ORCA
// load report in its trailer) are summed per locality as the cluster's
// lrs_report_endpoint_metrics select them (gRFC A85): cpu_utilization,
// mem_utilization, application_utilization, named_metrics.<name> or
// named_metrics.*; without that field, none.
//
// # Per RPC
//
// grpc-go applies the per-RPC part of xDS through its config selector, an
// internal API; the interceptors of [Builder.DialOptions] do the same
// through public ones, sharing the channel's state with its resolver. What
// is decided for an RPC (route, cluster, hash, retry policy, filters,
// faults) is the transport-neutral package dataplane/route, whose doc
// lists its rules by gRFC; grpcxds gives it the RPC's metadata as headers
// and turns its answers into gRPC's terms:
//
//   - gRFC A31: the route, the cluster a weighted route draws and the
//     ring_hash request hash are chosen once when the RPC starts, from the
//     configuration in force, and
//     carried in the RPC's context to the picker, which uses them at every
//     pick: an RPC waiting for a cluster that is still connecting keeps it
//     across picker updates. (A cluster that leaves the configuration while
//     an RPC waits for it is given up and the RPC routed again; grpc-go
//     keeps such a cluster until its RPCs commit.)
//   - gRFC A31 timeouts, as grpc-go applies them: the route's
//     max_stream_duration.grpc_timeout_header_max if set, else its
//     max_stream_duration.max_stream_duration, else the connection
//     manager's common_http_protocol_options.max_stream_duration, bound
//     the whole RPC (retries included); an earlier deadline of the
//     application stays. Zero means none; route.timeout is not used.
//   - gRFC A44 retries: the route's retry_policy, else the virtual host's.
//     retry_on's gRPC codes (cancelled, deadline-exceeded, internal,
//     resource-exhausted, unavailable) are retried; num_retries (default
//     1) plus one attempts, not capped at 5 (grpc-go caps service config
//     policies, not those of its xds resolver); the backoff is
//     base_interval (default 25ms) doubled each retry up to max_interval
//     (default 10 times base), times a jitter of 0.8 to 1.2; the server's
//     grpc-retry-pushback-ms trailer replaces it, and a negative or
//     malformed one ends the retries. An attempt that got response
//     headers is not retried, nor a pick that failed with a status (a
//     drop). A stream is retried until it receives a header or message or
//     has sent more than 256 KiB: what it sent is sent again; a unary
//     request over 256 KiB is not retried. A policy
//     with num_retries 0 (which grpc-go rejects) retries nothing.
//   - gRFC A96 retry metrics: with Options.RetryMetrics, each call a
//     retry policy retried is reported once at its end, with its retries
//     and the time waited between attempts (grpc.client.call.retries and
//     grpc.client.call.retry_delay; metrics/otelxds and metrics/promxds
//     record them). gRPC's stats handlers see each of these attempts as a
//     call of its own. grpc.client.call.transparent_retries is not
//     measured: gRPC retries transparently below the interceptors, where
//     goxds cannot see it.
//   - gRFC A39 HTTP filters: the listener's filters run in order on each
//     RPC before it is sent, once per RPC (not per attempt), each with its
//     effective configuration: the weighted cluster's
//     typed_per_filter_config, else the route's, else the virtual host's,
//     else its own; an override that disables it switches it off, and a
//     filter disabled in the listener runs only where an override switches
//     it on. Fault injection (gRFC A33) is the filter clients run: delays
//     and aborts, percentages with their denominators, header-controlled
//     faults, max_active_faults (counted for the whole process, as grpc-go
//     counts them).
//     An abort is not retried; an abort with status OK ends a stream at
//     once, and a unary RPC with io.EOF, as in grpc-go.
//   - gRFC A92 external authorization: the ext_authz filter asks the
//     service its GrpcService names (gRFC A102: a trusted server's target,
//     credentials and initial metadata; an untrusted one's target, which
//     the bootstrap's allowed_grpc_services must list, with that entry's
//     credentials) before the RPC is sent; package dataplane/extauthz
//     decides. An allowed RPC goes with the outgoing metadata the service
//     changed; a denied one fails with the service's status; a failed call
//     fails it with status_on_error unless failure_mode_allow. A denial's
//     headers are the failed RPC's trailers (the grpc.Trailer call
//     options get them, unary and streaming, as from a server's
//     trailers-only failure); an allowed RPC's response_headers_to_add are
//     applied to the response headers the server sent (grpc.Header, and a
//     stream's Header), none where the server sent none (a trailers-only
//     response).
//     A channel keeps one connection per service across configuration
//     updates, closed with the channel.
//   - gRFC A81 authority rewriting: on a route whose auto_host_rewrite is
//     set by a server marked trusted_xds_server in the bootstrap (from any
//     other server it is ignored), each attempt carries as its :authority
//     the hostname of the endpoint picked for it: an EDS endpoint's
//     hostname, a LOGICAL_DNS cluster's host:port; an endpoint without one
//     keeps the channel's authority, and grpc.CallAuthority wins over the
//     rewrite. The picker hands it to gRPC in the pick's metadata, which
//     grpc-go sends as the attempt's authority after its credentials
//     accepted it (TLS checks it against the server's certificate,
//     xdscreds' too). grpc-go does this only with
//     GRPC_EXPERIMENTAL_XDS_AUTHORITY_REWRITE=true; goxds always does,
//     the server's trust being the switch.
//
// # Connections
//
// There is one SubConn per endpoint (per address list), shared by every
// cluster and priority that lists it (under one hostname: an address
// listed under two hostnames is two endpoints, since an RPC's rewritten
// authority is its endpoint's). An EDS update keeps the SubConns of
// the endpoints it keeps, creates SubConns only for new ones and shuts
// down (gracefully: RPCs in flight finish) those of removed or unhealthy
// ones. A priority's endpoints are connected when the priority is used or
// tried, and stay connected while they are listed; under pick_first only
// those its pass has reached until one is ready, then that one.
//
// As in gRPC, every cluster the routes name is connected as soon as the
// configuration arrives. With [Options].ConnectOnFirstRPC a cluster waits
// for the first RPC routed to it instead: a service given a mesh-wide
// route configuration of thousands of clusters then holds connections only
// to those it calls, and with [Options].ClusterIdleTimeout only to those it
// called lately.
//
// # Security
//
// With the credentials of package xdscreds, a cluster's UpstreamTlsContext
// (gRFC A29) makes the connections to its endpoints TLS or mutual TLS,
// with the certificate providers of the bootstrap, and the server's
// certificate is checked against the cluster's SAN matchers; a cluster
// whose TLS cannot be honoured gets no connection and its RPCs fail with
// UNAVAILABLE. There is one SubConn per address list and security config,
// so two clusters that share an endpoint but not their TLS do not share a
// connection. Any other channel credentials are used for every cluster, as
// in grpc-go, with a warning once per cluster that asks for TLS. See
// package xdscreds.
//
// # HTTP CONNECT
//
// The endpoints of a cluster whose transport socket is http_11_proxy
// (gRFC A86) are reached through the proxy their EDS metadata names: the
// channel's dialer opens an HTTP/1.1 CONNECT tunnel to the endpoint's
// address, and the cluster's TLS, if any, runs inside it (:authority and
// the TLS server name stay the backend's). Endpoints naming no proxy are
// reached directly. A proxy that answers anything but 200 fails the
// connection, and RPCs fail with UNAVAILABLE quoting its answer. grpc-go
// does this only with GRPC_EXPERIMENTAL_XDS_HTTP_CONNECT set; goxds always
// does. The dialer is [ConnectDialer], installed by [Builder.DialOptions]
// and [NewClient]; a channel passing its own grpc.WithContextDialer after
// those replaces it and must wrap its dialer in ConnectDialer. A channel
// made without the dial options (grpc.WithResolvers alone) cannot tunnel:
// its RPCs to proxied endpoints fail with UNAVAILABLE saying so, never
// connecting around the proxy. A custom dialer turns off grpc-go's own
// proxying from the environment (HTTPS_PROXY, NO_PROXY); ConnectDialer(nil)
// does the same for the addresses it dials directly, so channels keep it,
// but a base dialer of your own does not.
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
// failing over from a priority still connecting at the failover timeout,
// a cluster switching priority) and their failures at warning level (no
// usable configuration, a cluster with no usable endpoint). Without one,
// the lines go where the client's do: [Options].ClientOptions.Logger, or
// warnings only to slog.Default(). A channel writes at most 10 warnings of
// one kind in 10 seconds (a zone going down fails thousands of clusters at
// once): the tenth says that more are held back, and the first after the
// pause carries held_back, how many were.
//
// # Not supported
//
// Retry throttling (which xDS does not configure either).
// grpc.WithDisableRetry and grpc.WithMaxCallAttempts do not reach the
// interceptors' retries. Of gRFC A52's custom policies only those above: a
// TypedStruct naming another policy registered with gRPC is skipped (gRPC
// would use it).
package grpcxds
