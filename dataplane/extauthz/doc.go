// Package extauthz is the data plane's external authorization (gRFC A92):
// given an external authorization filter's configuration
// ([resources.ExtAuthzConfig]) and a request described by plain fields
// ([Request]: path, headers, time, and on a server the connection's
// addresses and certificates), it decides whether the request goes on,
// with which header changes, or fails, with which status and trailers.
// It serves clients and servers of any transport: the call to the
// authorization service goes through a [Client] that the adapter provides
// (packages grpcxds, xdsserver and httpxds, for its client and its
// server, use one over a gRPC channel built from the filter's
// GrpcService, gRFC A102, by internal/extauthzgrpc), so the package imports neither
// grpc-go nor net/http, and describes the service's messages
// (envoy.service.auth.v3 CheckRequest and CheckResponse) by its own plain
// types, [CheckRequest] and [CheckResponse].
//
// # What a check does
//
// [Checker.Check] follows gRFC A92 (the draft of 2026-05-26,
// grpc/proposal commit 207a967), with gRFC A102's header rules:
//   - filter_enabled: a request drawn outside the configured share (the
//     draw is in [0, 100)) is not checked; it goes on unchanged, or with
//     deny_at_disable fails with the status of status_on_error.
//   - The request sent: the request's headers that disallowed_headers does
//     not match and allowed_headers (when set with at least one pattern:
//     an empty list is as unset) does, each as one entry (its
//     values joined with ","; a -bin header's values base64-encoded, as on
//     the wire; a plain HTTP request has no binary headers); the path;
//     the time; for gRPC method POST, size -1, protocol HTTP/2
//     ([RequestMethod], [RequestSize], [RequestProtocol]), for plain HTTP
//     the request's own method, host, scheme, protocol and size
//     ([Request].HTTP, as Envoy's HTTP filter sends them); and on a
//     server the source (peer address, principal, and with
//     include_peer_certificate its certificate, PEM, URL-encoded) and the
//     destination (local address, and over TLS the principal of the
//     certificate the server served on the connection, which xdsserver,
//     with xDS server credentials, and httpxds record at the handshake).
//     A principal is a certificate's first URI SAN, else its first DNS
//     SAN, else its subject.
//   - The call runs under the GrpcService's timeout. If it fails, or the
//     response is malformed (a header change gRFC A102 calls invalid),
//     the request fails with status_on_error, unless failure_mode_allow
//     lets it on, then with x-envoy-auth-failure-mode-allowed: true added
//     when failure_mode_allow_header_add says so.
//   - A response whose status is OK allows the request, with
//     ok_response's headers and headers_to_remove applied to its headers
//     and response_headers_to_add to its response headers. Any other
//     status denies it, with denied_response's HTTP status (403 when
//     unset) mapped to a gRPC code, the service's status message in the
//     denial's, and denied_response's headers as the trailers of the
//     failed RPC; a plain HTTP request is answered with that status,
//     denied_response's body and its headers ([Decision].HTTPStatus and
//     Body; status_on_error's HTTP status when the service could not
//     decide).
//   - Header changes (gRFC A102, [ValidHeader]): in any of the four
//     fields, a change whose name is empty, not a lower-case gRPC header
//     name, longer than 16384 bytes, host, a pseudo-header or grpc-*, or
//     whose value is longer than 16384 bytes or (not -bin) not printable
//     ASCII, makes the response malformed; so does a headers_to_remove
//     entry that is not a gRPC header name. Every change is subject to
//     decoder_header_mutation_rules ([Permitted]: never host nor a
//     pseudo-header), a disallowed one ignored or, with
//     disallow_is_error, failing the request with UNKNOWN (Envoy's HTTP
//     500), even where it would have changed nothing. append_action's
//     four values are honoured; keep_empty_value is not read: a change
//     that leaves a header empty keeps it. A plain HTTP request
//     (Request.HTTP) follows Envoy's HTTP filter instead (InterpretHTTP):
//     any valid HTTP header, grpc-* included, names lower-cased; host
//     and pseudo-headers never removed; decoder_header_mutation_rules,
//     when set, read as Envoy reads them (allow_all_routing, allow_envoy,
//     disallow_system and the defaults they change), on the request's
//     headers only; validate_mutations making an invalid change a 500,
//     and without it the change left out.
//
// The per-route overrides are resolved before: a filter turned off by a
// FilterConfig wrapper does not run, and an ExtAuthzPerRoute override
// runs the top-level configuration (resources.ExtAuthzOf).
//
// # Metrics, and what is not done
//
// [Decision.Outcome] says which of allowed, denied, disabled or failed a
// check was; the adapters count it (gRFC A92's grpc.client_ext_authz.*
// and grpc.server_ext_authz.*: grpcxds.ExtAuthzMetrics,
// xdsserver.ExtAuthzMetrics, httpxds's, through dataplane/httpfilter's
// AuthzObserver on clients), passing [Outcome.String]. A check that a
// disallow_is_error rule fails counts as failed. Trace context
// propagation is the adapters': the call is made in the context given
// to [Checker.Check], the RPC's (gRFC A92), on a channel with their
// users' SideChannelDialOptions, so a tracing stats handler there makes
// it the RPC's child span.
package extauthz
