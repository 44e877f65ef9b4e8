// Package promxds exposes a goxds client's metrics, those of gRFC A78, to
// Prometheus (client_golang) under the names a grpc-go program exporting
// its xDS client metrics through OpenTelemetry's Prometheus exporter
// shows: a dashboard or alert built for grpc-go's xDS client works for
// goxds's.
//
// # Use
//
// Make a [Collector], give it to the client, let it observe the client,
// and register it on your registry (it registers itself nowhere):
//
//	col := promxds.New(promxds.Options{Target: "goxds:///my-service"})
//	c, err := client.New(cfg, client.Options{Metrics: col})
//	...
//	col.Observe(c)
//	registry.MustRegister(col)
//
// # Metrics
//
//   - grpc_xds_client_resource_updates_valid_total and
//     grpc_xds_client_resource_updates_invalid_total (counters): resources
//     received, valid (unchanged ones too) and invalid (NACKed); labels
//     grpc_target, grpc_xds_server, grpc_xds_resource_type.
//   - grpc_xds_client_server_failure_total (counter): a server going from
//     healthy to unhealthy, a stream that failed or could not start
//     without a response (gRFC A57); grpc_target, grpc_xds_server.
//   - grpc_xds_client_connected (gauge): 1 while the client has a working
//     stream to the server, 0 after it failed; grpc_target, grpc_xds_server.
//     A server appears once the client first reports it (its first
//     response, or its first failure).
//   - grpc_xds_client_resources (gauge): the resources in the client's
//     cache, by grpc_xds_authority ("#old" for names that are not xdstp),
//     grpc_xds_cache_state ("requested", "acked", "nacked",
//     "nacked_but_cached", "does_not_exist", and gRFC A88's
//     "received_error", "received_error_but_cached", "timeout") and
//     grpc_xds_resource_type, with grpc_target; read from
//     [client.Client.ResourceCounts] at each scrape.
//
// The help texts are the descriptions grpc-go gives the instruments.
// A label value Prometheus cannot carry (not valid UTF-8) drops that
// sample rather than failing the scrape.
//
// # Retries (gRFC A96)
//
// [NewRetryCollector] makes the histograms grpc_client_call_retries
// (buckets 1 to 5) and grpc_client_call_retry_delay_seconds (gRFC A66's
// latency buckets), labelled grpc_method and grpc_target: register the
// [RetryCollector] and give it to grpcxds.Options.RetryMetrics. A call is
// observed once, at its end, if its xDS retry policy retried it.
// grpc.client.call.transparent_retries is not collected: transparent
// retries are gRPC's own, below the interceptors where goxds retries.
//
// # External authorization (gRFC A92)
//
// [NewExtAuthzCollector] makes
// grpc_client_ext_authz_{allowed,denied,filter_disabled,failed}_rpcs_total,
// labelled grpc_target and grpc_lb_backend_service (the route's cluster),
// and grpc_server_ext_authz_*_rpcs_total with no label: register the
// [ExtAuthzCollector] and give it to grpcxds.Options.ExtAuthzMetrics and
// xdsserver.RecordExtAuthz. [NewHTTPExtAuthzCollector] makes httpxds's,
// goxds_http_client_ext_authz_*_requests_total (labelled
// grpc_lb_backend_service) and goxds_http_server_ext_authz_*_requests_total.
//
// # Outlier detection (gRFC A91) and connections (gRFC A94)
//
// [NewOutlierCollector] makes grpc_lb_outlier_detection_ejections_enforced_total
// and grpc_lb_outlier_detection_ejections_unenforced_total, labelled
// grpc_target, grpc_lb_outlier_detection_detection_method (and
// _unenforced_reason) and grpc_lb_backend_service (the leaf cluster, gRFC
// A89): register the [OutlierCollector] and give it to
// grpcxds.Options.OutlierMetrics. [NewSubchannelCollector] makes
// grpc_subchannel_connection_attempts_succeeded_total, _failed_total,
// grpc_subchannel_disconnections_total (with grpc_disconnect_error
// "subchannel shutdown" or "unknown") and the gauge
// grpc_subchannel_open_connections, labelled grpc_target,
// grpc_lb_backend_service and grpc_lb_locality: register the
// [SubchannelCollector] and give it to grpcxds.Options.SubchannelMetrics.
// [NewHTTPConnectionCollector] makes the same four for an httpxds
// client's TCP connections, goxds_http_client_connection_attempts_succeeded_total,
// _failed_total, goxds_http_client_disconnections_total and the gauge
// goxds_http_client_open_connections, labelled as the subchannel ones
// less grpc_target: register the [HTTPConnectionCollector] and give it to
// httpxds.TransportOptions.ConnectionMetrics.
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
// # grpc_target
//
// grpc-go keeps one xDS client per channel target and labels its metrics
// with that target. A goxds client is shared by every watch and channel of
// the program that made it, so it has no target of its own: [Options].Target
// names it, "#goxds" if empty. Give each client its own target if a
// program has several, and each its own Collector.
//
// # grpc_xds_resource_type
//
// grpc-go calls its four types "ListenerResource", "RouteConfigResource",
// "ClusterResource" and "EndpointsResource", where gRFC A78 would use the
// message names ("envoy.config.listener.v3.Listener"). This package follows
// grpc-go for those four, so that its dashboards match, and uses the
// message name for any other type; [Options].ResourceTypeLabel chooses
// otherwise.
//
// Package otelxds (github.com/goxds/xds/metrics/otelxds) is the same for
// OpenTelemetry.
package promxds
