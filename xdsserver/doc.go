// Package xdsserver serves gRPC configured by xDS, as grpc-go's
// xds.NewGRPCServer does: an xDS-enabled server (gRFC A36) with RBAC
// (gRFC A41) and TLS/mTLS from the mesh (gRFC A29's server half).
//
// # Using it
//
//	srv, err := xdsserver.NewGRPCServer(
//		xdsserver.ServingModeCallback(func(addr net.Addr, args xdsserver.ServingModeChangeArgs) {
//			log.Printf("%v is %v: %v", addr, args.Mode, args.Err)
//		}),
//	)
//	...
//	pb.RegisterGreeterServer(srv, impl)
//	lis, _ := net.Listen("tcp", "[::]:8080")
//	err = srv.Serve(lis)
//
// The bootstrap (GRPC_XDS_BOOTSTRAP, or BootstrapConfig) must have a
// server_listener_resource_name_template; for each listener the server
// watches the Listener the template names with the listening address
// substituted ("[::]:8080", percent-encoded for an xdstp:// template, gRFC
// A47).
//
// # How it serves
//
// An address serves only while its Listener is held, valid and
// server-side (no api_listener), for that address, with every
// RouteConfiguration its filter chains name over RDS. Until then, and
// after the Listener is deleted or rejected with nothing good held, it is
// not serving: connections are accepted and closed, open ones drained.
// The ServingModeCallback is told each change. Without one, the server
// logs them, as grpc-go does: not serving and why (the Listener does not
// exist once the client's does-not-exist timer fires, was rejected, or is
// for another address) as a warning, and serving again after that as a
// warning too, so that a default log (client.DefaultLogger: warnings to
// slog.Default()) shows both.
//
// Each accepted connection is matched to a filter chain as gRPC matches
// (most specific destination prefix, then source type, source prefix,
// source port; the default chain when none matches); a connection no chain
// matches is closed. Each Listener version is served by a grpc.Server of
// its own: when a new version takes over, the old one is stopped with
// GracefulStop, so its connections get a GOAWAY and close when their RPCs
// are done (grpc-go does the same with its internal transports).
//
// Each RPC is routed by the chain's route configuration: the virtual host
// for its :authority, the first route that matches; the route's action
// must be non_forwarding_action, else the RPC fails with UNAVAILABLE. Then
// the chain's HTTP filters run with the route's or virtual host's
// overrides: RBAC allows or denies (PERMISSION_DENIED). The filter chain
// match and the RBAC evaluation are the data plane's (package
// dataplane/authz, shared with other servers); this package binds them
// to grpc-go's server, its peer and its metadata. A filter this
// package has no code for fails the RPC (UNAVAILABLE) rather than being
// skipped.
//
// # Security
//
// A filter chain with a DownstreamTlsContext is served over TLS with the
// certificate of its identity provider instance; with a validation
// context, client certificates are verified against its roots, and
// required with require_client_certificate (mTLS). When the roots
// provider is a file_watcher naming a spiffe_trust_bundle_map_file (gRFC
// A87), a client certificate must carry one SPIFFE ID and is verified
// against the bundle of its trust domain; a certificate of a trust domain
// the map lacks is refused. The instances are the
// bootstrap's certificate_providers (file_watcher: rotated files are used
// by new connections). A chain whose providers cannot be built is not
// served at all, neither in TLS nor in plaintext. Providers are built on a
// goroutine of their own, never in the xDS callback: a plugin that blocks
// delays only the Listener version that names it, and Stop does not wait
// for it. A chain without a
// transport_socket is plaintext. The server sets its own transport
// credentials on every connection (its grpc.Creds wins over the caller's):
// the management server, not the code, decides each connection's security.
//
// # Compared with grpc-go's xds package
//
//	grpc-go                                        goxds
//	xds.NewGRPCServer(opts...)                     xdsserver.NewGRPCServer(opts...): grpc options and this package's
//	xds.ServingModeCallback, ServingModeChangeArgs ServingModeCallback, ServingModeChangeArgs (Mode, Err)
//	no callback: mode changes logged               the same: not serving and why as a warning (Logger, or slog.Default())
//	connectivity.ServingModeStarting/Serving/Not   ServingModeStarting, ServingModeServing, ServingModeNotServing
//	xds.BootstrapContentsForTesting                BootstrapConfig(*bootstrap.Config), ClientOptions, SharedClient
//	Listener template, [::]/IP:port, xdstp %-enc   the same (bootstrap.Config.ServerListenerResourceName)
//	Listener validation (filter chains, HCM,       the same rules, NACKed with the field named
//	  duplicate matches, dropped chains)           (resources.ServerListener; checked against grpc-go by internal/grpcparity)
//	filter chain match at accept                   the same order; destination prefixes are matched whatever the
//	                                                 bound address (grpc-go: only when bound to a wildcard)
//	RDS per filter chain, wait for all             the same; an RDS update applies to open connections
//	drain on Listener change / not serving         GracefulStop of the old generation's grpc.Server (GOAWAY)
//	non_forwarding_action, else UNAVAILABLE        the same
//	RBAC filter (A41), RBACPerRoute                the same rules and NACKs; audit loggers through grpc-go's
//	                                                 authz/audit registry (stdout logger, custom loggers)
//	credentials/xds server creds + fallback        built in: per-chain TLS/mTLS from DownstreamTlsContext;
//	                                                 no transport_socket is plaintext (no separate fallback creds)
//	DownstreamTlsContext SAN matchers              refused (NACK), as grpc-go's server refuses them
//	GRPCServer.Serve/Stop/GracefulStop/            the same; RegisterService before Serve
//	  RegisterService/GetServiceInfo
//	an RPC to an unknown method                    grpc's UNIMPLEMENTED, before any routing (as in grpc-go)
package xdsserver
