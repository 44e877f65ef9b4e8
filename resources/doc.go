// Package resources turns the resources an xDS management server sends into
// validated, immutable Go values.
//
// # Types
//
// A resource type is a value, not an interface to implement: a [Type]
// built with [NewType] from a type URL, two protocol flags and a decoder.
// The decoder gets one resource body (a google.protobuf.Any), unmarshals
// it, validates it and returns the resource name and a Go value that
// implements [Resource]. It returns the name even when validation fails,
// so that the client can tell the watchers of that one resource and NACK
// the response with a message naming it. Every *Type[T] is also an
// [AnyType], the form the client uses when it does not care about T.
//
// # Where a resource came from
//
// A decoder also gets a [*DecodeContext]: the config of the management
// server that sent the resource (its URI and server features, such as
// trusted_xds_server), the bootstrap of the client decoding it (node,
// authorities, certificate provider instances) and the [Registry] of
// filters and plugins that client validates with. The built-in types use
// it: a Cluster with lrs_server "self" names its sender in
// [Cluster].LRSServer, which after a fallback (gRFC A71) is the fallback
// server; a route's auto_host_rewrite is honoured only from a server
// marked trusted_xds_server (gRFC A81, [Route].AutoHostRewrite); and a
// Cluster or server Listener naming a certificate provider
// instance the bootstrap does not define is rejected (gRFC A29), in gRPC's
// words:
//
//	Cluster "c": transport_socket.typed_config.common_tls_context: identity certificate provider instance name "x" missing in bootstrap configuration (the bootstrap's certificate_providers defines "roots")
//
// A decoder whose rules do not depend on the source ignores the context
// (the example's does). Outside a client the context may be nil: the
// default registry is used, and the rules that need a server or a
// bootstrap are left out. A decoded value that depends on its sender says
// so ([SourceDependent]), so that a client decodes the same bytes again
// when another server sends them.
//
// # Registries
//
// A [Registry] holds resource types, HTTP filter types and cluster
// specifier plugin types. The process has a default one
// ([DefaultRegistry]), which the built-in types and filters and packages'
// init functions register into through the package functions: [Register]
// adds a type and refuses a second one for the same URL; [Replace]
// overrides one on purpose; [Lookup] and [Registered] read it. Register
// your own types before creating a client, typically from an init
// function. A client decodes with its own copy, taken when it is made
// (client.Options.Registry; by default a copy of the default registry):
// a package registering later, or another client's registry, does not
// change what it accepts, and two clients of one process may validate the
// same route configuration differently. For a client of its own filters,
// clone the default registry and register into the clone.
//
// # Envelopes
//
// Delta responses always, and SotW responses optionally, carry each
// resource in a discovery.v3.Resource wrapper with its name, version and
// TTL. [Unwrap] (for an Any from a SotW response) and [FromResource] (for
// a delta response's Resource) return an [Envelope]; its Body is what a
// decoder gets. An envelope without a body is a TTL heartbeat.
//
// # Built-in types
//
// [ListenerType], [RouteConfigType], [ClusterType] and [EndpointsType]
// decode the four resources of the LDS→RDS→CDS→EDS tree into [*Listener],
// [*RouteConfig], [*Cluster] and [*Endpoints]. They apply the client-side
// validation rules of gRPC's xDS support (gRFC A27, A28, A39 and their
// successors), and leave to the caller what depends on the features it has:
// route actions other than forwarding and query parameter matchers are
// kept, not rejected. Routes gRPC cannot use at all (their target is a
// cluster_header, an inline or optional unsupported cluster specifier
// plugin, or nothing) are left out of their virtual host and listed in
// [VirtualHost.SkippedRoutes] (gRFC A28). Cluster specifier plugin types
// are registered with [RegisterClusterSpecifier] (package grpcxds
// registers gRPC's RLS plugin into the default registry) or
// [Registry.RegisterClusterSpecifier]; a route by a registered plugin is kept,
// with [Route.ClusterSpecifierPlugin] naming it. A resource that breaks a rule
// fails to decode with an error that wraps a [*FieldError] naming the
// offending field, for example
//
//	RouteConfiguration "r": virtual_hosts[0].routes[2].match: no path specifier
//
// Each value gives the message it came from, for the fields it does not
// model, through Raw; values, and any messages they point to, are shared
// by every watcher and must not be modified. The types that come by the
// thousand (Cluster, Endpoints, RouteConfig with its VirtualHost and Route
// values, and VHDS's VirtualHostResource) keep the bytes received, not the
// decoded message, and unmarshal them on each call of their Raw method,
// whose result is the caller's: the decoded messages were a third of a
// client's heap at 10,000 clusters. A virtual host or route keeps its part
// of its route configuration's bytes, with no copy. The other types keep
// the decoded message in a Raw field.
//
// A Cluster's [LBPolicy] comes from load_balancing_policy as gRPC reads it
// (gRFC A52): the first policy of the list that gRPC supports is used
// (round_robin, ring_hash with XX_HASH, least_request, pick_first,
// client_side_weighted_round_robin, wrr_locality wrapping one of them,
// nested at most 16 lists deep, or a TypedStruct naming one of these by
// its gRPC name such as "ring_hash_experimental" or
// "xds_wrr_locality_experimental", its Struct the JSON config); unsupported
// ones are skipped; a supported one with a bad config,
// or a list with none supported, makes the Cluster invalid. Without
// load_balancing_policy, lb_policy ROUND_ROBIN means wrr_locality over
// round_robin, as in gRPC; RING_HASH and LEAST_REQUEST are not wrapped.
//
// Helpers answer the questions a client asks of the values:
// [FindVirtualHost] picks the virtual host for an authority,
// [Route.MatchPath] and the header matchers match a request, and
// [RouteConfig.ClusterNames] and [Route.ClusterNames] list the clusters to
// fetch next.
//
// A Cluster's transport_socket is validated as gRPC validates an
// UpstreamTlsContext (gRFC A29: certificates from certificate provider
// instances only, SAN matchers, sni, auto_host_sni, auto_sni_san_validation;
// what gRPC cannot honour is rejected, naming the field) and read into
// [Cluster].Security, a [*SecurityConfig]; with a bootstrap in the
// [DecodeContext], the instances it names must be ones the bootstrap
// defines. It may be wrapped in an
// Http11ProxyUpstreamTransport (gRFC A86, HTTP CONNECT): [Cluster].HTTP11Proxy
// is then set, the inner socket (none for plaintext) is validated as above,
// and each [Endpoint].ProxyAddress is the proxy its metadata, or its
// locality's, names under [ProxyAddressMetadataKey]. grpc-go reads these
// only with GRPC_EXPERIMENTAL_XDS_HTTP_CONNECT set; goxds always does. As
// in grpc-go, every envoy.config.core.v3.Address in an endpoint's or
// locality's typed_filter_metadata must be an IP address with a port, or
// the ClusterLoadAssignment is rejected.
//
// The other resource types of the protocol are built in too, with Envoy's
// rules where gRPC has none. [SecretType] (SDS) decodes a [*Secret]: a TLS
// certificate, a validation context, session ticket keys or a generic
// secret. Its [DataSource] values never print their contents, so a private
// key stays out of logs and errors. [RuntimeType] (RTDS) decodes a
// [*Runtime] layer, in which [Runtime.LookupBool], [Runtime.LookupNumber]
// and [Runtime.LookupString] read a dotted key as Envoy does.
// [ScopedRouteConfigType] (SRDS) decodes a [*ScopedRouteConfig], whose
// inline route configuration follows the RouteConfiguration rules.
// [VirtualHostType] (VHDS, delta only) decodes a [*VirtualHostResource],
// whose [*VirtualHost] is validated as in a route configuration.
// [EndpointCollectionType] decodes an LbEndpointCollection (gRFC A95: LEDS
// with list collections) into an [*EndpointCollection], the endpoints of
// one locality; it has no name of its own and must come in a
// discovery.v3.Resource naming it. A client with A95 on
// (bootstrap.Config.EndpointFallback) decodes a locality's
// leds_cluster_locality_config into [Locality].EndpointCollection, and
// [Endpoints.WithCollections] puts the collections in their localities
// (the config-tree watcher does it for its snapshots).
//
// # HTTP filters
//
// A Listener's HTTP filters, and the typed_per_filter_config overrides of
// virtual hosts, routes and weighted clusters, are validated against the
// filter types of the decoding client's registry (gRFC A39):
// [Registry.RegisterHTTPFilter] adds an [HTTPFilterType] (and
// [RegisterHTTPFilter] to the default registry), [LookupHTTPFilter] finds
// one by config type URL.
// The router and the fault injection filter are built in. A filter of an
// unregistered type, or of one that cannot run on a client, makes the
// Listener invalid unless it is optional, in which case it is left out;
// TypedStruct-wrapped configs are looked up by the type inside; a filter
// found by config_discovery is of no known type. [HTTPFilter.Parsed] holds
// each config as its type parsed it, the FilterOverrides maps each
// override, and an override wrapped in a FilterConfig may be optional or
// may disable the filter ([DisabledFilterOverride]). The fault filter's
// config is a [*FaultConfig] (gRFC A33). The RBAC filter (gRFC A41) runs on
// servers only; its config and RBACPerRoute overrides are [*RBACConfig],
// whose [RBACRules] are the validated rules as plain data, evaluated by the
// data plane's authz package. The external authorization filter (gRFC A92)
// runs on clients and servers; its config is an [*ExtAuthzConfig], and its
// ExtAuthzPerRoute override an [*ExtAuthzPerRouteConfig] that keeps the
// top-level config ([ExtAuthzOf]). The [GrpcService] it names is judged by
// gRFC A102's rule: from a server marked trusted_xds_server it is used as
// given; from any other its target must be a key of the bootstrap's
// allowed_grpc_services (else the Listener is invalid, the error naming
// the target), whose credentials are used, and its initial_metadata is
// ignored, once valid: it is validated whoever sent it. Each initial_metadata header's value is its raw_value when set,
// else its value, -bin or not (gRFC A102's HeaderValue). Such a Listener
// depends on its source ([SourceDependent]).
// The external processing filter (gRFC A93) is registered for neither side
// until a client or server runtime runs it: a Listener that requires it is
// NACKed, an optional one skipped. Its config is an [*ExtProcConfig] (bodies in GRPC mode or not at all,
// response bodies only with response trailers), and its ExtProcPerRoute
// override an [*ExtProcPerRouteConfig] whose fields replace the top-level
// ones ([ExtProcOf]); an override may name its own GrpcService, judged as
// above, and then the route configuration holding it depends on its
// source. Filter types whose parsing needs the context set
// [HTTPFilterType.ParseConfigFrom] (and [HTTPFilterType.ParseOverrideFrom]).
//
// # Server Listeners
//
// A Listener without an api_listener is a server's (gRFC A36): it decodes
// with [Listener.Server] set to a [*ServerListener], its filter chains
// validated as gRPC validates them and expanded into the entries
// ([ServerListener.Entries]) from which the data plane's authz package
// picks a connection's chain. Package xdsserver serves by it.
//
// # Adding a type
//
// Write a Go type that implements [Resource], a decoder, and register the
// type: see the example of an ECDS extension config type. Nothing panics
// on input a server sends; a decoder should keep that promise too.
package resources
