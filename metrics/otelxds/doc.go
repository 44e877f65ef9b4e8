// Package otelxds reports a goxds client's metrics, those of gRFC A78, to
// OpenTelemetry, under the instrument names, units, descriptions and
// attributes grpc-go's own OpenTelemetry plugin uses for its xDS client: a
// dashboard or alert built for grpc-go's xDS client works for goxds's.
//
// # Use
//
// Make a [Metrics] on your MeterProvider, give it to the client, then let
// it observe the client:
//
//	m, err := otelxds.New(provider, otelxds.Options{Target: "goxds:///my-service"})
//	...
//	c, err := client.New(cfg, client.Options{Metrics: m})
//	...
//	m.Observe(c)
//	defer m.Close()
//
// # Instruments
//
//   - grpc.xds_client.resource_updates_valid, _invalid (counters,
//     {resource}): resources received, valid (unchanged ones too) and
//     invalid (NACKed); attributes grpc.target, grpc.xds.server,
//     grpc.xds.resource_type.
//   - grpc.xds_client.server_failure (counter, {failure}): a server going
//     from healthy to unhealthy, a stream that failed or could not start
//     without a response (gRFC A57); grpc.target, grpc.xds.server.
//   - grpc.xds_client.connected (asynchronous gauge, {connected}): 1 while
//     the client has a working stream to the server, 0 after it failed;
//     grpc.target, grpc.xds.server. A server appears once the client first
//     reports it (its first response, or its first failure).
//   - grpc.xds_client.resources (asynchronous gauge, {resource}): the
//     resources in the client's cache, by grpc.xds.authority ("#old" for
//     names that are not xdstp), grpc.xds.cache_state ("requested", "acked",
//     "nacked", "nacked_but_cached", "does_not_exist", and gRFC A88's
//     "received_error", "received_error_but_cached", "timeout") and
//     grpc.xds.resource_type, with grpc.target; read from
//     [client.Client.ResourceCounts] at each collection.
//
// The meter is named [ScopeName]. The gauges are read when the reader
// collects, and cost nothing in between.
//
// # Retries (gRFC A96)
//
// [NewRetryMetrics] makes grpc.client.call.retries (histogram, {retry},
// buckets 1 to 5) and grpc.client.call.retry_delay (histogram, s, gRFC
// A66's latency buckets), attributes grpc.method and grpc.target: give the
// [RetryMetrics] to grpcxds.Options.RetryMetrics. A call is measured once,
// at its end, if its xDS retry policy retried it. goxds retries in its
// interceptors, so grpc-go's own plugin sees each attempt as a call and
// counts no retries there; grpc.client.call.transparent_retries cannot be
// measured from an interceptor (transparent retries are gRPC's own,
// below it), and xDS configures no hedging.
//
// # External authorization (gRFC A92)
//
// [NewExtAuthzMetrics] makes the counters
// grpc.client_ext_authz.allowed_rpcs, .denied_rpcs, .filter_disabled_rpcs
// and .failed_rpcs ({RPCs}), attributes grpc.target and
// grpc.lb.backend_service (the route's cluster), and
// grpc.server_ext_authz.* with none: give the [ExtAuthzMetrics] to
// grpcxds.Options.ExtAuthzMetrics and to xdsserver.RecordExtAuthz. Each
// check counts once, on its outcome. [NewHTTPExtAuthzMetrics] makes
// httpxds's, goxds.http.client_ext_authz.*_requests (attribute
// grpc.lb.backend_service) and goxds.http.server_ext_authz.*_requests,
// for httpxds.TransportOptions.ExtAuthzMetrics and
// httpxds.Options.ExtAuthzMetrics: HTTP requests are not a channel's RPCs.
//
// # Outlier detection (gRFC A91) and connections (gRFC A94)
//
// [NewOutlierMetrics] makes the counters
// grpc.lb.outlier_detection.ejections_enforced and
// grpc.lb.outlier_detection.ejections_unenforced ({ejection}), attributes
// grpc.target, grpc.lb.outlier_detection.detection_method
// ("success_rate", "failure_percentage"), .unenforced_reason
// ("enforcement_percentage", "max_ejection_overflow") and
// grpc.lb.backend_service (the leaf cluster, gRFC A89): give the
// [OutlierMetrics] to grpcxds.Options.OutlierMetrics.
// [NewSubchannelMetrics] makes the counters
// grpc.subchannel.connection_attempts_succeeded, _failed ({attempt}) and
// grpc.subchannel.disconnections ({disconnection}, with
// grpc.disconnect_error "subchannel shutdown" or "unknown"), and the
// up-down counter grpc.subchannel.open_connections ({connection}),
// attributes grpc.target, grpc.lb.backend_service and grpc.lb.locality
// ({region="…", zone="…", sub_zone="…"}): give the [SubchannelMetrics] to
// grpcxds.Options.SubchannelMetrics. Names and descriptions are
// grpc-go's; where grpc-go makes a label optional, these record it.
// grpc-go's own subchannel metrics (its OpenTelemetry plugin, with the
// instruments enabled) measure a goxds channel's connections too, but
// without the cluster and locality labels: enable one or the other.
// [NewHTTPConnectionMetrics] makes the same four for an httpxds client's
// TCP connections, named goxds.http.client.connection_attempts_succeeded,
// _failed, .disconnections and .open_connections (an HTTP client has no
// subchannels, and OpenTelemetry's http.client.open_connections counts
// connections by state and server address), with the same units,
// attributes less grpc.target and grpc.disconnect_error values (there
// also the socket error a connection was lost with: "connection reset",
// "connection timed out", "connection aborted", "socket error"): give the
// [HTTPConnectionMetrics] to httpxds.TransportOptions.ConnectionMetrics.
//
// # With grpcxds
//
// A grpcxds.Builder given only ClientOptions makes its client itself, when
// its first channel starts: the counters and the connected gauge reach the
// adapter through ClientOptions.Metrics, but there is no client to
// observe. For the resources gauge too, make the client with the adapter
// as its Metrics, observe it, and give it to the Builder in
// grpcxds.Options.Client.
//
// # grpc.target
//
// grpc-go keeps one xDS client per channel target and labels its metrics
// with that target. A goxds client is shared by every watch and channel of
// the program that made it, so it has no target of its own: [Options].Target
// names it, "#goxds" if empty. Give each client its own target if a
// program has several.
//
// # grpc.xds.resource_type
//
// grpc-go calls its four types "ListenerResource", "RouteConfigResource",
// "ClusterResource" and "EndpointsResource", where gRFC A78 would use the
// message names ("envoy.config.listener.v3.Listener"). This package follows
// grpc-go for those four, so that its dashboards match, and uses the
// message name for any other type; [Options].ResourceTypeLabel chooses
// otherwise.
//
// Package promxds (github.com/goxds/xds/metrics/promxds) is the same for
// Prometheus's client_golang without OpenTelemetry.
package otelxds
