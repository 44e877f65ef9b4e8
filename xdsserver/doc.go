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
// overrides: RBAC allows or denies (PERMISSION_DENIED); ext_authz and
// ext_proc call their services (below). The filter chain
// match and the RBAC evaluation are the data plane's (package
// dataplane/authz, shared with other servers); this package binds them
// to grpc-go's server, its peer and its metadata. A filter this
// package has no code for (a type registered for servers in the client's
// resources.Registry) is skipped when the Listener marks it is_optional,
// as gRFC A39 says of an unsupported optional filter and as httpxds does;
// a required one fails the RPC (UNAVAILABLE, naming the listener and the
// filter) rather than being skipped, since it may be a security filter.
//
// The external authorization filter (gRFC A92) asks the service its
// GrpcService names (gRFC A102: a trusted server's target and
// credentials, or an untrusted one's target with the credentials of the
// bootstrap's allowed_grpc_services) whether the RPC may go on; the
// decision is package dataplane/extauthz's. An allowed RPC reaches its
// handler with the incoming metadata the service changed, and the
// service's response headers added to the handler's when these are sent
// (at its first message or SendHeader, or at its end if it set any); an
// RPC that ends Trailers-Only goes without them, as the gRFC says (draft
// of 2026-05-26, grpc/proposal commit 207a967). Holding them wraps the
// RPC's ServerTransportStream, so in an RPC allowed with response headers
// to add a handler's grpc.SetSendCompressor and
// grpc.ClientSupportedCompressors fail, as inside an external processing
// filter (below). A denied RPC fails with the service's status and
// trailers; a failed call fails it with
// status_on_error unless failure_mode_allow. Over TLS from xDS server
// credentials (grpcxds/xdscreds), the destination's principal is the
// certificate the handshake served, kept by connection address since
// grpc-go's peer has credentials.TLSInfo, with no place for it (other
// transport credentials: no principal). The channels to the services
// are made at the first RPC that needs them and closed once no Listener
// version in force names their service and their calls have ended, or
// by Stop. With
// RecordExtAuthz each check is counted by its outcome
// (grpc.server_ext_authz.*).
//
// The external processing filter (gRFC A93, draft 07a7c11) sends the RPC's
// events to the processor its GrpcService names, on one stream per RPC,
// as the processing mode says; the engine is package dataplane/extproc,
// its binding to grpc-go's server (the wrapped streams) package
// internal/extprocgrpc's, as the check's of ext_authz is
// internal/extauthzgrpc's.
// The client's headers (with :path and :method) go while the chain's
// filters run, so the filters after it, and the handler, see the
// processor's changes; the handler's headers and trailers (the latter
// with grpc-status and grpc-message) are held until the processor has
// answered for them, and a response that sends nothing is told as
// Trailers-Only (headers with end_of_stream). In GRPC body mode each
// message goes to the processor serialized, and the handler and the
// client get the processor's messages instead, as many as it sends
// (a unary RPC must get exactly one each way, else INTERNAL): messages
// must be protocol buffers, and the processor's are sent uncompressed.
// Inside the filter a handler's grpc.SetSendCompressor and
// grpc.ClientSupportedCompressors fail: they need grpc-go's own
// ServerTransportStream, which the filter wraps. A change to a header
// gRFC A102 forbids (host, a pseudo-header, grpc-*), an answer out of
// order or a failed stream fails the RPC with INTERNAL, unless
// failure_mode_allow lets it on untouched (until a message was sent); an
// immediate response ends it with its status, cancelling the handler's
// context (a handler waiting for a client message with request_body_mode
// NONE notices when it returns). The GrpcService's timeout is the
// stream's deadline, and the RPC's end ends the stream; message_timeout
// is ignored, as the gRFC says. The protocol's flow control is done
// (package dataplane/extproc: windows of 64 KiB, held only once the
// processor has sent a window update), and with WithExtProcMetrics the
// gRFC's grpc.server_ext_proc.* durations are measured. The processing
// stream and the check (ext_authz) have the RPC's context as their
// parent, and the channels they go on take SideChannelDialOptions, so a
// tracing stats handler there makes them child spans of the RPC's. Not
// done: response attributes (the
// request's are :authority, path, method, protocol, user agent, referer,
// x-request-id, the headers, the empty query and the addresses).
//
// # Security
//
// The server's grpc.Creds decide, as in grpc-go. With xDS server
// credentials,
//
//	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
//	srv, err := xdsserver.NewGRPCServer(grpc.Creds(creds), ...)
//
// (package github.com/goxds/xds/grpcxds/xdscreds), the management server
// decides each connection's security. A filter chain with a
// DownstreamTlsContext is served over TLS with the certificate of its
// identity provider instance; with a validation context, client
// certificates are verified against its roots, and required with
// require_client_certificate (mTLS). When the roots provider is a
// file_watcher naming a spiffe_trust_bundle_map_file (gRFC A87), a client
// certificate must carry one SPIFFE ID and is verified against the bundle
// of its trust domain; a certificate of a trust domain the map lacks is
// refused. The instances are the bootstrap's certificate_providers
// (file_watcher: rotated files are used by new connections). A chain whose
// providers cannot be built is not served at all, neither in TLS nor by
// the fallback. A chain without a transport_socket is served by
// FallbackCreds.
//
// A chain's providers are built when its first connection's handshake
// asks for them (once per Listener version), on a goroutine of their own,
// never in the xDS callback: a plugin that blocks delays only the
// handshakes that wait for it, which end when their Listener version is
// replaced or the server stops, and Stop does not wait for it.
//
// With any other grpc.Creds (insecure, credentials.NewTLS, ...) every
// connection is served with them and the Listeners' DownstreamTlsContexts
// are ignored: their providers are never built. Without grpc.Creds the
// server is plaintext, as grpc.NewServer is. Note that grpc-go's
// credentials/xds server credentials cannot read this package's filter
// chains and would always use their fallback: use xdscreds'.
//
// Changed: goxds used to serve the Listeners' TLS whatever the caller's
// credentials (its own replaced them). A server that relies on the
// Listeners' TLS needs the grpc.Creds(creds) option above now; without it,
// it serves plaintext (or with its own credentials).
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
//	ext_authz filter (A92), A102 GrpcService       goxds runs it; grpc-go v1.85 knows the type only with
//	                                                 GRPC_EXPERIMENTAL_XDS_EXT_AUTHZ_ON_CLIENT, rejects every config
//	                                                 (its GrpcService parsing is a stub), and runs it on neither side
//	ext_proc filter (A93), ExtProcPerRoute         goxds runs it (see above); grpc-go v1.85 runs it on clients only,
//	                                                 behind GRPC_EXPERIMENTAL_XDS_EXT_PROC_ON_CLIENT
//	grpc.Creds(credentials/xds server creds)       grpc.Creds(xdscreds.NewServerCredentials(ServerOptions{FallbackCreds})):
//	                                                 per-chain TLS/mTLS from DownstreamTlsContext, fallback without one
//	other grpc.Creds, or none (insecure)           the same: used for every connection, the Listeners' TLS ignored
//	                                                 and its providers never built (HandleListenerUpdate_NoXDSCreds)
//	DownstreamTlsContext SAN matchers              refused (NACK), as grpc-go's server refuses them
//	GRPCServer.Serve/Stop/GracefulStop/            the same; RegisterService before Serve
//	  RegisterService/GetServiceInfo
//	an RPC to an unknown method                    grpc's UNIMPLEMENTED, before any routing (as in grpc-go)
package xdsserver
