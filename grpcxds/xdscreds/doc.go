// Package xdscreds secures the connections of goxds channels as the xDS
// management server says (gRFC A29): a cluster whose Cluster resource has
// an UpstreamTlsContext is reached over TLS or mutual TLS, with
// certificates from the certificate providers of the bootstrap
// (certificate_providers, such as grpc-go's "file_watcher"), and its
// server's certificate is checked against the provider's roots and the
// cluster's SAN matchers.
//
// # Using it
//
//	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{
//		FallbackCreds: insecure.NewCredentials(), // for clusters without TLS
//	})
//	...
//	conn, err := grpcxds.NewClient("goxds:///my-listener", builder,
//		grpc.WithTransportCredentials(creds))
//
// (builder is a *grpcxds.Builder; grpcxds.NewClient adds its dial options,
// which apply each RPC's route timeout, retries and HTTP filters.)
// The goxds balancer (package grpcxds) builds a [HandshakeInfo] for each
// security config in use and puts it on the addresses of the cluster's
// connections; the credentials read it in the handshake. The providers
// are those of the Builder's bootstrap (grpcxds.Options.Bootstrap, or read
// from the environment), or of its shared Client's (client.Client.Bootstrap).
//
// Servers: an xdsserver.GRPCServer made with
//
//	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{
//		FallbackCreds: insecure.NewCredentials(), // for filter chains without TLS
//	})
//	srv, err := xdsserver.NewGRPCServer(grpc.Creds(creds))
//
// serves each connection as its filter chain's DownstreamTlsContext says.
//
// # Never a silent downgrade
//
// A cluster whose TLS cannot be honoured (a certificate provider instance
// the bootstrap does not define, or whose plugin is not registered) gets
// no connection at all: its RPCs fail with UNAVAILABLE and a message that
// names the instance. A failed verification fails the handshake, and the
// RPCs with UNAVAILABLE, naming the certificate's SANs and the matchers
// ("received SANs ... do not match any of the accepted SANs ...", grpc-go's
// words first). Only clusters with no transport_socket use FallbackCreds.
//
// # SNI and auto_sni_san_validation (gRFC A101)
//
// The SNI sent is the endpoint's EDS hostname with auto_host_sni (when it
// has one), else the cluster's sni, else none; an endpoint's address is
// never sent, even when it is a name such as "localhost". With
// auto_sni_san_validation and an SNI sent, the certificate must have a DNS
// SAN for that name (wildcard SANs cover one label) and the SAN matchers
// are not used. With no SNI sent, the gRFC's "Server SAN validation
// against SNI used" says the validation context's SAN matchers apply
// instead, as without the flag: goxds, grpc-go v1.85 and the gRFC's text
// agree on this.
//
// A channel whose credentials are not xdscreds' (insecure, or
// credentials.NewTLS) uses them for every cluster, TLS ones included, as
// grpc-go does with non-xDS credentials; the balancer logs a warning once
// per such cluster.
//
// # Compared with grpc-go's credentials/xds
//
//	grpc-go (credentials/xds, xds internals)          goxds
//	xds.NewClientCredentials(ClientOptions{Fallback})  xdscreds.NewClientCredentials(ClientOptions{FallbackCreds}); fallback required in both
//	UpstreamTlsContext validation, NACK                resources.Cluster.Security: same accepted and rejected fields, NACKed with the field named
//	instance missing from the bootstrap: NACK          NACK too (gRFC A29), in grpc-go's words: decoders know the bootstrap
//	                                                   (resources.DecodeContext)
//	tls_certificate_provider_instance,                 both, and the deprecated *_certificate_provider_instance fields
//	  ca_certificate_provider_instance
//	system_root_certs (A82, behind an env var)         supported, always on
//	match_subject_alt_names: exact, prefix, suffix,    all, with ignore_case; DNS (wildcard SANs for exact), URI (SPIFFE IDs),
//	  contains, safe_regex                              email and IP SANs
//	sni, auto_host_sni, auto_sni_san_validation         supported, always on (grpc-go: behind GRPC_EXPERIMENTAL_XDS_SNI)
//	  (A101, behind an env var)
//	SPIFFE bundle maps (A87, behind                    supported, always on: a file_watcher with spiffe_trust_bundle_map_file
//	  GRPC_EXPERIMENTAL_XDS_MTLS_SPIFFE)                verifies the server against its SPIFFE ID's trust domain's bundle
//	certificate providers: certprovider registry       the same registry and plugins (bootstrap.Config.CertificateProviderConfig)
//	file_watcher reloads rotated files                 the same plugin: new connections use the new files
//	xds.NewServerCredentials(ServerOptions{Fallback})  xdscreds.NewServerCredentials(ServerOptions{FallbackCreds}) for xdsserver.NewGRPCServer's
//	                                                   grpc.Creds: each filter chain's DownstreamTlsContext, the fallback for a chain
//	                                                   without one; other credentials ignore the Listener's TLS, as in grpc-go
//	                                                   (grpc-go's own credentials/xds cannot read goxds's chains: they would fall back)
package xdscreds
