// Package httpxds serves plain HTTP (net/http) configured by xDS, and sends
// it: the server and the client halves of goxds for services that speak
// HTTP/JSON rather than gRPC.
// It follows gRFC A36's model for xDS-enabled servers, as package
// xdsserver does for gRPC, with Envoy's HTTP semantics for what the
// configuration means.
//
// # Using it
//
//	srv, err := httpxds.NewServer(mux, httpxds.Options{
//		ServingModeCallback: func(addr net.Addr, args httpxds.ServingModeChangeArgs) {
//			log.Printf("%v is %v: %v", addr, args.Mode, args.Err)
//		},
//	})
//	...
//	lis, _ := net.Listen("tcp", "[::]:8080")
//	err = srv.Serve(lis)
//
// The bootstrap (GRPC_XDS_BOOTSTRAP, or Options.Bootstrap) must have a
// server_listener_resource_name_template; for each listener the server
// watches the Listener the template names with the listening address
// substituted, as xdsserver does.
//
// # How it serves
//
// An address serves only while its Listener is held, valid, server-side
// and for that address, with every RouteConfiguration its filter chains
// name over RDS. Until then, and after the Listener is rejected or deleted
// with nothing good held, connections are accepted and closed, and those
// open are drained. Options.ServingModeCallback is told each change;
// without one they are logged as xdsserver logs them: not serving and why
// as a warning (a reason told again is left out), and serving again after
// it as a warning too. Each accepted connection is matched to a filter
// chain (package dataplane/authz, as gRPC matches); a connection no chain
// matches is closed. Each Listener version is served by an http.Server
// of its own; when a new version takes over, the old one drains: idle
// connections close, the others after their next response (Connection:
// close), a connection that has not sent its first request yet is still
// answered (for up to 5 s), and then the server is shut down gracefully
// (http.Server.Shutdown: HTTP/2 connections get a GOAWAY, requests in
// progress finish). A route configuration
// update over RDS applies to open connections from their next request.
//
// Each request then goes through, in Envoy's order:
//
//  1. Path normalization (package dataplane/httppath), by the chain's
//     normalize_path, merge_slashes and path_with_escaped_slashes_action.
//     Where the Listener leaves them unset goxds normalizes and merges
//     slashes (Envoy's edge recommendations; Envoy's own defaults are
//     off) so that "//admin", "/./admin", "/%61dmin" and
//     "/public/../admin" are routed and authorized as "/admin". A path
//     that cannot be normalized gets 400, an escaped slash under
//     REJECT_REQUEST 400, under UNESCAPE_AND_REDIRECT a 307 to the
//     unescaped path. The handler is served the normalized path (URL.Path
//     and URL.RawPath), as Envoy forwards it: what was judged is what is
//     served.
//  2. The virtual host for the Host header (Envoy's domain matching),
//     else 404. The port is part of the host unless the connection manager
//     sets strip_matching_host_port (the port is dropped when it is the
//     listener's) or strip_any_host_port (any port is dropped); then
//     routing, RBAC's :authority and the handler (Request.Host) see the
//     host without it, as Envoy forwards it. strip_trailing_host_dot
//     drops a trailing dot of the name the same way ("example.com.:80"
//     is "example.com:80").
//  3. The first route whose path, header (Envoy's pseudo-headers :method,
//     :authority, :path, :scheme included) and query parameter matchers
//     all match (the first value of a repeated parameter), and whose
//     runtime fraction draws it, else 404 "no route for host H path P in
//     route configuration R".
//  4. The chain's HTTP filters, with the route's or virtual host's
//     typed_per_filter_config: RBAC (permissions on method, path,
//     headers; principals from the client's certificate; audit loggers as
//     for gRPC) answers 403 "RBAC: access denied" and no more, as Envoy
//     does (the path judged, the policy and the route configuration go
//     to Options.Logger at debug level); fault injection (delay,
//     abort with an HTTP status, both header-controllable by Envoy's
//     x-envoy-fault-* headers) answers "fault filter abort" with the
//     status; external authorization (ext_authz, below). A filter this
//     server has no code for (ext_proc, which xdsserver runs) fails every
//     request with 503 naming the listener and the filter rather than
//     being skipped, unless it is optional (is_optional), when it is
//     skipped: the HTTP client's rule.
//  5. The route's action: non_forwarding_action serves the handler, with
//     the request and response header mutations of the route, its virtual
//     host and its route configuration (request_headers_to_add/remove,
//     response_headers_to_add/remove, in Envoy's order and append actions;
//     values as written, without Envoy's %VARIABLE% substitutions);
//     direct_response answers its status and body (Content-Type
//     text/plain with a body, as Envoy); a redirect is answered as
//     Envoy's router answers it (its response_code, 301 by default, and a
//     Location of the request's URL with the scheme, host, port and path
//     the action sets: https_redirect or scheme_redirect, host_redirect,
//     port_redirect, path_redirect, prefix_rewrite or regex_rewrite, and
//     strip_query; no body). Any other action (a route to a cluster) is
//     answered 503 naming the route: gRFC A36 has a server serve only
//     non-forwarding routes, and gRPC fails such RPCs UNAVAILABLE, whose
//     HTTP status is 503. A direct response or redirect this server
//     cannot build (a bad status, an invalid regex_rewrite) is answered
//     500 naming the route, since resources keeps these actions as
//     received.
//
// Error bodies start with "httpxds:" and name the listener, route
// configuration, virtual host or route at fault.
//
// RBAC's url_path sees the normalized path without the query; a :path
// header matcher (in RBAC and in routing) sees the normalized path with
// the query as received, as Envoy's :path holds it.
//
// # External authorization
//
// The ext_authz filter asks the authorization service of its grpc_service
// (gRFC A102's trust rules, the channel kept while the Listener in
// force names the service, and closed once its calls end after an
// update that does not)
// with Envoy's HTTP semantics
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/ext_authz_filter);
// the decision is dataplane/extauthz's, as on an xdsserver (gRFC A92)
// and the HTTP client. The service is told the request's method, host,
// :path with the query, scheme, protocol, size and headers (lower case,
// with :authority, :method, :path and :scheme, filtered by allowed_headers
// and disallowed_headers; in header_map and in the headers map Envoy
// fills by default), the peer, over TLS the principal of the
// certificate the server served on the connection (the destination's,
// gRFC A92), and with with_request_body its body (raw_body with
// pack_as_bytes) and x-envoy-auth-partial-body; a body over max_request_bytes is answered
// 413 before the service is asked, unless allow_partial_message. An
// allowed request reaches the filters after it and the handler with the
// service's header changes, and its response gets
// response_headers_to_add. A denial is answered with the service's status
// (403 when it gives none), its headers and body. A call that fails, and
// deny_at_disable, answer status_on_error (403 when unset) unless
// failure_mode_allow lets the request on; a header change the
// decoder_header_mutation_rules disallow, with disallow_is_error, 500.
// The service's header changes follow Envoy's HTTP filter, not gRPC's
// rules (dataplane/extauthz's InterpretHTTP): grpc-* headers and any
// valid HTTP header may be set, a new :authority (or host) becomes the
// request's Host, the rules' defaults refuse host and x-envoy-*, and
// validate_mutations makes an invalid change a 500 (without it the change
// is left out). Why is logged as a warning; the caller learns only that the filter
// refused. With Options.ExtAuthzMetrics each check is counted by its
// outcome (goxds.http.server_ext_authz.*_requests; the Transport's
// TransportOptions.ExtAuthzMetrics, goxds.http.client_ext_authz.*).
// ExtAuthzPerRoute is honoured: disabled skips the filter for
// its route, check_settings give context_extensions, with_request_body
// and disable_request_body_buffering (the most specific override wins;
// they are not merged). Not done: http_service (refused when the
// Listener is parsed, as for gRPC), the filter's metrics, clear_route_cache.
//
// # Security
//
// A filter chain with a DownstreamTlsContext is served over TLS (HTTP/2 by
// ALPN, or HTTP/1.1) with the certificate of its identity provider
// instance; with a validation context, client certificates are verified
// against its roots (or a SPIFFE bundle map, gRFC A87), and required with
// require_client_certificate (mTLS). The instances are the bootstrap's
// certificate_providers, built when the chain's first handshake asks for
// them and read at every handshake, so that rotated files are used by new
// connections (shared with xdsserver: internal/servertls). A chain whose
// providers cannot be built refuses its connections: never a plaintext
// fallback. A chain without a transport_socket is served in plaintext
// (HTTP/1.1, or HTTP/2 with prior knowledge).
//
// # Fault injection on a server
//
// gRPC runs the fault filter on clients only, and goxds's default registry
// refuses it on a server Listener as grpc-go does. A Server's own client
// accepts it (RegisterServerFilters on a copy of its registry); a shared
// client (Options.Client) needs RegisterServerFilters on its registry.
//
// # The client
//
// A [Transport] is an http.RoundTripper on goxds's data plane (package
// dataplane: route, cluster, endpoint, lbpolicy, outlier), as grpcxds is
// gRPC's:
//
//	hc, tr, err := httpxds.NewClient(httpxds.TransportOptions{}) // bootstrap from the environment
//	...
//	defer tr.Close()
//	resp, err := hc.Get("http://users.svc:8080/v1/users/42")
//
// The request URL's host (with its port, if it has one) names a Listener
// through the bootstrap's client_default_listener_resource_name_template
// (an xdstp:// template of gRFC A47 included), whose config tree (package
// watchers) is followed live: one watch per URL host and Host header,
// shared by the requests to it, dropped once unused for HostIdleTimeout
// and at Close. A request before the first configuration waits for it,
// bounded by its context; a host whose Listener does not exist (or was
// rejected, or has no virtual host for the Host) fails with a *HostError
// naming the listener and the node ID. The meaning of the configuration
// is Envoy's, each rule as Envoy's documentation states it:
//
//  1. The virtual host for the request's Host (Envoy's domain matching;
//     the Host rewritten first as the Listener's connection manager
//     says: strip_trailing_host_dot drops a trailing dot of the name,
//     strip_any_host_port any port, strip_matching_host_port the port the
//     URL names, and the routes and the endpoint then see that Host),
//     then the first route whose path (prefix, exact, regex,
//     path-separated prefix, matched on the path as sent), headers
//     (:method, :authority, :path, :scheme included) and query parameters
//     match, and whose runtime fraction draws it. No route: 404, the body
//     naming the host, path, route configuration, virtual host and
//     listener (Envoy's router answers 404).
//  2. A weighted cluster is drawn by weight, once per request.
//  3. The listener's HTTP filters with their per-route overrides
//     (weighted cluster, route, virtual host), run by
//     dataplane/httpfilter, the runtime grpcxds's channels share: the
//     fault filter (delay, abort with the HTTP status and Envoy's body
//     "fault filter abort", both header-controllable; an abort that gives
//     only a gRPC status is answered 200 with grpc-status); and external
//     authorization (ext_authz, gRFC A92 with Envoy's HTTP semantics,
//     https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/ext_authz_filter).
//     The authorization service is called over gRPC, on channels the
//     Transport keeps while a host's configuration names the service
//     (closed once none does and their calls end, or at Close), with gRFC A102's rules as for gRPC: a
//     service named by a server not marked trusted_xds_server must be in
//     the bootstrap's allowed_grpc_services, whose credentials it gets.
//     The service is told the request's method, host, scheme, protocol,
//     size, path with its query, and headers (lower case, with
//     :authority, :method and :path) in header_map and in the headers
//     map Envoy fills by default; an allowed request is
//     sent with ok_response's header changes (by Envoy's rules, as on
//     the server) and its response gets
//     response_headers_to_add; a denied one is answered with
//     denied_response's status (403 when unset), body and headers, and
//     one the service could not decide with status_on_error (403 when
//     unset; the body names the service and why) unless
//     failure_mode_allow lets it through (x-envoy-auth-failure-mode-allowed
//     added with failure_mode_allow_header_add). ExtAuthzPerRoute is
//     Envoy's, as on the server: disabled skips the filter for the
//     route, check_settings.context_extensions go to the service (gRPC
//     ignores both, gRFC A92). A filter this client has
//     no code for fails the request with 503 naming the listener and the
//     filter rather than being skipped, unless it is optional.
//  4. A direct_response route is answered with its status and body, a
//     redirect with its status and Location (http.Client follows it as a
//     server's), as Envoy's router answers them; a non_forwarding_action
//     (a server's, gRFC A36) with 503 naming the route.
//  5. The request is sent as the route says, the caller's request left
//     as it is: request header mutations of the route, virtual host and
//     route configuration (Envoy's order, append actions; values as
//     written, without %VARIABLE% substitutions), prefix_rewrite or
//     regex_rewrite, host_rewrite_literal (auto_host_rewrite from a
//     trusted server, gRFC A81: the Host of the endpoint picked, its EDS
//     hostname or a LOGICAL_DNS cluster's DNS name without the port, as
//     Envoy's). The response gets the response header mutations.
//  6. route.timeout bounds the request and its response body; unset, it
//     is Envoy's default, 15 s (DefaultRouteTimeout), so that a service
//     moved off an Envoy sidecar keeps the bound its mesh was tested
//     with: TransportOptions.DefaultRouteTimeout changes it, negative for
//     none, and a route's timeout of 0 means none, as in Envoy. A route's
//     idle_timeout ends a request that made no progress for that long.
//     Either firing before the response is answered 504 "upstream
//     request timeout", as Envoy's router answers it.
//  7. The route's retry policy (else the virtual host's) runs the
//     attempts; each attempt picks an endpoint anew. See Retries below.
//
// # Retries
//
// A retry_policy is followed as Envoy's router follows it
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/router_filter#x-envoy-retry-on).
// retry_on's HTTP conditions are 5xx, gateway-error, reset,
// connect-failure, retriable-4xx (409), refused-stream,
// retriable-status-codes, retriable-headers and envoy-ratelimited; other
// names, gRPC's among them, are ignored as Envoy ignores them. A request
// gets up to num_retries (1 by default) more attempts. Between them it
// waits Envoy's fully jittered back-off (retry_back_off: a 25 ms base, at
// most ten times it), or, when the response carries one of
// rate_limited_retry_back_off's reset_headers, the interval that header
// asks for (Retry-After in seconds, or an HTTP date, which Envoy does not
// read; X-RateLimit-Reset as a Unix time), up to max_interval (300 s by
// default) and jittered up to 1.5 times it. A response with
// x-envoy-overloaded is never retried, nor a reply the client made itself
// (no healthy upstream, a drop, the circuit breaker) or a request it
// refused to send. per_try_timeout bounds each attempt until its response
// headers, per_try_idle_timeout each silence until its body ends; an
// attempt either one ends is retried as a reset. A request is retried only
// if its body can be sent again: it has none, http.Request.GetBody gives
// it again, or it fits in the retry buffer (TransportOptions.RetryBufferLimit,
// by default DefaultRetryBufferLimit, 1 MiB, Envoy's default
// per_connection_buffer_limit_bytes); a longer body commits the request to
// its first attempt. What a retried attempt got is drained and closed; the
// caller gets the last attempt's response or error. With the virtual
// host's include_request_attempt_count each attempt carries
// x-envoy-attempt-count. route.timeout covers all the attempts, and the
// request's context ends everything, back-off waits included.
//
// The clusters of every host's routes are one dataplane/cluster.Set per
// Transport: priorities and failover, locality weights, every leaf policy
// (ring_hash with the route's hash policies: header, cookie, query
// parameter, and connection_properties' source_ip, which hashes
// TransportOptions.SourceAddress, the address a sidecar would have seen
// the client at, else a value drawn once per Transport, so that a
// client's requests stay on one endpoint as behind a sidecar;
// filter_state hashes state that filters of a downstream connection set,
// which a client has none of, and is skipped), aggregate and
// LOGICAL_DNS clusters, EDS drops (503 naming the category), the circuit
// breakers (max_requests, max_pending_requests and max_connections of
// priority DEFAULT, 1024 each by default; over max_requests, or with
// max_pending_requests waiting for a connection already, 503 with
// x-envoy-overloaded, the body naming the cluster and the limit), no healthy
// endpoint (503 naming the cluster), outlier detection fed by each
// request's outcome (a 5xx, or a connection failure, reset or timeout, is
// a failure, but not the timeout of a request still waiting for a
// connection, which never reached the endpoint; Envoy's consecutive_5xx and consecutive_gateway_failure eject
// an endpoint the moment its run of 5xx, or of 502, 503, 504 and
// connection failures, reaches the threshold, as
// https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier
// describes; with split_external_local_origin_errors the requests an
// endpoint never answered are counted apart, by
// consecutive_local_origin_failure and the success rate and failure
// percentage at enforcing_local_origin_success_rate and
// enforcing_failure_percentage_local_origin, and every response is a
// local success, as that page's "Detection types" says) and LRS load reports (a 5xx is an error). A request its
// caller cancels (its context cancelled or past its own deadline, not the
// route's timeouts) is no outlier result and no LRS error, only an issued
// request, as Envoy counts a downstream reset: its router resets the
// upstream request without judging the host. A request counts under the
// circuit breaker, outlier detection and LRS until its response body is
// read or closed. TransportOptions.OutlierMetrics, if set, hears of each
// outlier found, ejected or not (gRFC A91's counters, with the cluster
// and the detection method, consecutive_5xx included, and an empty
// target: the Transport's clusters serve every host it routes).
// TransportOptions.ConnectionMetrics, if set, hears of each TCP
// connection to an endpoint as gRFC A94 measures a gRPC subchannel's:
// each dial (TLS handshake included) an attempt succeeded or failed, each
// connection made one open until it closes, a disconnection with the
// socket error it was lost with, "subchannel shutdown" when the Transport
// let it go, or "unknown" (see ConnectionMetrics);
// metrics/otelxds.NewHTTPConnectionMetrics and
// metrics/promxds.NewHTTPConnectionCollector record them as
// goxds.http.client.* (goxds_http_client_*).
//
// The connection circuit breakers follow
// https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/circuit_breaking
// over net/http's pools. A request is pending when the endpoint picked has
// no free connection (on HTTP/1.1 one request holds a connection until its
// response body is read or closed; on HTTP/2 any open connection takes it)
// until net/http hands it one; max_connections counts the connections to
// all endpoints of the cluster, open or closing, and a connection past it
// is not dialled until one of the cluster's closes: the request waits for
// its endpoint's own connection to free, as a pending request. An endpoint
// with no connection at all gets one past the limit, as Envoy makes sure a
// host it picks has one. With max_pending_requests 0 no request waits for
// a connection, so one that needs a new connection is refused, as Envoy
// refuses it. The counts are per leaf cluster, shared by the clusters
// (and hosts) naming it; an endpoint listed by two clusters keeps one
// pool, its connections counted against the cluster whose request made
// them.
//
// Each endpoint's connections are an http.Transport of its own, dialling
// its addresses in turn (through its HTTP CONNECT proxy, gRFC A86): HTTP/1.1
// by default, as Envoy speaks upstream; HTTP/2 where the cluster's
// envoy.extensions.upstreams.http.v3.HttpProtocolOptions say
// explicit_http_config.http2_protocol_options (h2 over TLS, h2c with prior
// knowledge without); ALPN over TLS with auto_config. An HTTP endpoint
// counts as ready from the start, as Envoy treats a host healthy unless
// EDS health or outlier detection says otherwise. An endpoint the
// configuration drops has its idle connections closed at once and the
// others as their requests end. A cluster's UpstreamTlsContext is honoured
// with the bootstrap's certificate providers as gRPC's clusters are
// (package internal/upstreamtls, shared with xdscreds): SNI, client
// certificate, chain and SAN verification, key material read at each
// handshake; a cluster whose TLS cannot be set up gets no endpoints, and
// its requests fail with 503, never sent in plaintext. The URL's scheme
// does not choose TLS (the cluster does, as behind an Envoy sidecar), but
// an https:// request to a cluster without TLS is refused rather than
// sent in plaintext; the endpoint picked for it never saw it, so the
// refusal is no outlier result and not in the LRS load report at all (a
// request counts as issued once it has a connection, as Envoy counts it;
// a request cancelled while it waits for one under max_connections is
// not issued either), and cannot get a healthy endpoint ejected.
//
// Transport errors (a connection refused or reset, a TLS failure) are
// returned as errors naming the cluster and endpoint, not turned into
// Envoy's 503: a Go caller can tell them from a backend's answer.
// The error responses the client makes itself (no route, no healthy
// upstream, a drop, the circuit breaker, a timeout) have bodies starting
// "httpxds:"; a fault's abort has Envoy's "fault filter abort".
package httpxds
