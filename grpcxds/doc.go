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
//	conn, err := grpc.NewClient("goxds:///my-listener", grpc.WithResolvers(b),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// Importing the package registers the balancer ([BalancerName]) with gRPC.
// [Options].Client shares one goxds client between the Builder and the rest
// of the program; without it the Builder creates one from the bootstrap for
// as long as some channel uses it. The channel must accept service configs
// from its resolver (do not use grpc.WithDisableServiceConfig): that is how
// the balancer is selected.
//
// # The resolver
//
// A target "goxds:///name" watches the Listener the bootstrap's
// client_default_listener_resource_name_template makes of name ("name"
// itself by default), "goxds://authority/name" a listener of a bootstrap
// authority (gRFC A47). The resolver follows the listener's config tree
// ([watchers.WatchConfigTree]) and hands the channel each snapshot: in
// resolver.State.Attributes for the balancer ([SnapshotFromState]), the
// endpoints of every EDS cluster in resolver.State.Endpoints with their
// cluster, locality, priority, weights and health ([EndpointInfoFromEndpoint]),
// and a service config selecting the balancer.
//
// When the tree is unusable (the listener or route configuration does not
// exist or was rejected with nothing good held, no virtual host matches,
// or the management server was never reached) the resolver hands the
// balancer a [ConfigError] instead of a snapshot: RPCs, wait-for-ready ones
// included, fail with status UNAVAILABLE and its text until the tree is
// usable again, and the connections of the old configuration are closed.
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
// unsupported cluster specifier plugin) are not there to match, being
// skipped when the route configuration is decoded (gRFC A28). The route's
// cluster, or one of its weighted clusters drawn at
// random by weight, picks the endpoint. No matching route, or a route that
// does not forward (redirect, direct response, non-forwarding), fails the
// RPC with UNAVAILABLE and the reason.
//
// Each cluster has priorities: its localities by priority for EDS, a
// single endpoint with every resolved address for LOGICAL_DNS (resolved by
// gRPC's own "dns" resolver), and for an aggregate cluster those of its
// leaves in order. The highest priority with a ready endpoint takes the
// traffic. One still connecting is waited for, up to [Options].FailoverTimeout;
// one whose endpoints all fail, or that has no HEALTHY or UNKNOWN endpoint,
// is passed over; traffic returns to a higher priority as soon as it has
// a ready endpoint. Within the priority the cluster's policy picks:
//
//   - round_robin: weighted round robin over the ready endpoints, each
//     weighted by its locality's weight times its own (in proportion among
//     what is ready);
//   - ring_hash: the route's hash policies hash the RPC (headers with
//     xxhash, io.grpc.channel_id; no hash gives a random one) onto a ring
//     sized by the cluster, at most 4096 entries;
//   - least_request: the least loaded of choice_count random endpoints.
//
// A cluster's drop_overloads drop RPCs with UNAVAILABLE "dropped by load
// balancing policy: <category>", and its circuit breaker's max_requests
// caps the RPCs in flight.
//
// # Connections
//
// There is one SubConn per endpoint (per address list), shared by every
// cluster and priority that lists it. An EDS update keeps the SubConns of
// the endpoints it keeps, creates SubConns only for new ones and shuts
// down (gracefully: RPCs in flight finish) those of removed or unhealthy
// ones. A priority's endpoints are connected when the priority is used or
// tried, and stay connected while they are listed.
//
// # Logs
//
// [Options].Logger, a *slog.Logger, hears the resolver's and the
// balancer's decisions at debug level (a configuration applied, a cluster
// failing over from a priority still connecting at the failover timeout,
// a cluster switching priority) and their failures at warning level (no
// usable configuration, a cluster with no usable endpoint). Without one,
// the lines go where the client's do: [Options].ClientOptions.Logger, or
// warnings only to slog.Default().
//
// # Not supported
//
// Route timeouts, max_stream_duration and retry policies (they need
// grpc-go's internal config selector), running HTTP filters on RPCs (a
// listener's filters are validated as gRFC A39 says, and the fault
// injection of gRFC A33 is implemented, but the per-RPC chain does not
// call it yet; RBAC), the RLS cluster specifier plugin, cluster TLS (the channel's own credentials are used), load
// reporting, outlier detection, and authority rewriting.
package grpcxds
