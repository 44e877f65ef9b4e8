// Package httpfilter is the data plane's client HTTP filter runtime: what
// a listener's HTTP filters (gRFC A39) do to a client's requests, for
// every transport. Package grpcxds binds it to grpc-go's interceptors and
// package httpxds to its http.RoundTripper; it imports neither grpc-go nor
// net/http.
//
// A [Chain] is made once per configuration from the listener's filters
// ([NewChain]): each filter kind a client runs has a [Runtime], found by
// the full name of its configuration message (the fault injection filter,
// [FaultConfigName]; external authorization, [ExtAuthzConfigName]). A
// required filter of a kind without one makes the chain unusable
// ([Chain.Err]), as a security filter skipped must not let requests
// through; an optional one is skipped. Per request, the transport runs
// the chain over its view of the request ([Request]): with the filters
// routing chose and their effective configurations (Chain.Run, given
// route.Decision.Filters), or with the route it matched (Chain.RunRoute,
// which resolves each filter's most specific typed_per_filter_config
// override: weighted cluster, route, virtual host, and skips the filters
// an override disables).
//
// # Outcomes
//
// A run's [Result] is either a [Denial], which ends the request before it
// is sent, or a go-ahead: the request's header changes are already made
// through [Request.MutateHeaders] (so that a later filter sees them),
// Result.ResponseHeaders change the response headers the application
// sees, and Result.Release ends what the filters started when the request
// ends. A Denial says what to answer in both transports' terms: a gRPC
// status code and message for an RPC, an HTTP status, body and headers
// for an HTTP request; its headers are a failed RPC's trailers.
//
// # The filters
//
//   - Fault injection (gRFC A33; Envoy's fault filter,
//     https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/fault_filter):
//     dataplane/route's Faults draws the delay and the abort, header
//     controlled ones included, under max_active_faults (counted by the
//     Env's Faults, which grpcxds shares across the process). An abort is
//     the configured gRPC code or HTTP status; an HTTP status from the
//     x-envoy-fault-abort-request header maps to a gRPC code by gRPC's
//     table; a gRPC status from x-envoy-fault-abort-grpc-request is
//     answered on HTTP as a gRPC error (200, grpc-status), a code gRPC
//     does not define reading as UNKNOWN. The HTTP body is Envoy's "fault
//     filter abort". A request whose context ends during the delay is
//     denied with its context's error (HTTP 504).
//   - External authorization (gRFC A92; Envoy's ext_authz filter,
//     https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/ext_authz_filter):
//     dataplane/extauthz decides over a client of the authorization service
//     that the transport's [AuthzClients] gives (internal/extauthzgrpc's
//     channels, gRFC A102's credentials and allowed_grpc_services: the
//     service speaks gRPC even for HTTP requests). The service is told the
//     request's path and headers, and for plain HTTP its method, host,
//     scheme, protocol and size. An allowed request goes on with
//     ok_response's header changes; its response_headers_to_add join the
//     response's headers. A denied one is answered with denied_response's
//     status (403 when unset), body and headers; one the service could not
//     decide with status_on_error (403 when unset), unless
//     failure_mode_allow lets it on (with x-envoy-auth-failure-mode-allowed
//     when failure_mode_allow_header_add says so). An ExtAuthzPerRoute
//     override runs the top-level configuration; a FilterConfig override
//     with disabled skips the check. ExtAuthzPerRoute's own fields are
//     ignored, as gRFC A92 says, unless the transport follows Envoy
//     ([Env].AuthzPerRoute, httpxds's client): then its disabled skips
//     the check and its check_settings.context_extensions go to the
//     service ([AuthzContextClients]).
//   - External processing (gRFC A93; [ExtProcConfigName]): where the
//     transport gives processing clients ([Env].Procs; the gRPC client
//     does, the HTTP client does not, so a chain that requires the filter
//     cannot run there), the chain sends the request's headers (with
//     :path and :method) to the processor over dataplane/extproc and the
//     request goes on with those it answers ([HeaderReplacer]); an
//     immediate response or a failed stream is a Denial (the processor's
//     status message as given, MessageAsIs). The rest of the request, its
//     messages and its response, is the transport's: [Result].Procs
//     hands it each filter's [Proc].
package httpfilter
