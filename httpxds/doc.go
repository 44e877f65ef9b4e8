// Package httpxds serves plain HTTP (net/http) configured by xDS: the
// server half of goxds for services that speak HTTP/JSON rather than gRPC.
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
//     host without it, as Envoy forwards it.
//  3. The first route whose path, header (Envoy's pseudo-headers :method,
//     :authority, :path, :scheme included) and query parameter matchers
//     all match (the first value of a repeated parameter), and whose
//     runtime fraction draws it, else 404 "no route for host H path P in
//     route configuration R".
//  4. The chain's HTTP filters, with the route's or virtual host's
//     typed_per_filter_config: RBAC (permissions on method, path,
//     headers; principals from the client's certificate; audit loggers as
//     for gRPC) answers 403 "RBAC: access denied"; fault injection (delay,
//     abort with an HTTP status, both header-controllable by Envoy's
//     x-envoy-fault-* headers) answers "fault filter abort" with the
//     status. A filter this server has no code for fails the request
//     (503) rather than being skipped.
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
package httpxds
