// Package bootstrap reads and checks the xDS bootstrap: the JSON document that
// tells an xDS client which management servers to talk to, with which
// credentials, and how to identify itself. The format is the one grpc-go,
// Istio's agent and the Traffic Director bootstrap generator write (gRFC A27),
// including the federation fields of gRFC A47, so one file can serve gRPC
// services and goxds alike.
//
// # Sources
//
// [FromEnv] finds the bootstrap as gRPC does: the file named by the
// GRPC_XDS_BOOTSTRAP environment variable if it is set, otherwise the JSON held
// in GRPC_XDS_BOOTSTRAP_CONFIG. With neither set it returns [ErrNoBootstrap].
// [Load] reads a file of your choosing and [Parse] takes the bytes. A [Config]
// can also be built in code and checked with [Config.Validate].
//
// # Format
//
// A small bootstrap:
//
//	{
//	  "xds_servers": [{
//	    "server_uri": "xds.example.com:443",
//	    "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "/etc/xds/ca.pem"}}],
//	    "server_features": ["xds_v3"],
//	    "api_type": "AGGREGATED_DELTA_GRPC"
//	  }],
//	  "node": {
//	    "id": "sidecar~10.0.0.1~pod-1.default~default.svc.cluster.local",
//	    "locality": {"zone": "us-central1-a"},
//	    "metadata": {"ISTIO_VERSION": "1.24.0"}
//	  }
//	}
//
// xds_servers is required and is in priority order: a client uses the first
// and the others as fallbacks, as gRFC A71 says (package client has the
// rules). Each server must have a
// server_uri and at least one channel_creds entry of a supported type,
// "insecure", "tls" or "google_default"; the first supported entry is used
// and unsupported ones are skipped. The other top-level fields are node,
// authorities, client_default_listener_resource_name_template,
// server_listener_resource_name_template, certificate_providers and
// allowed_grpc_services; see the fields of [Config].
//
// An authority (gRFC A47) may set fallback_on_reachability_only (gRFC A95),
// a boolean: its servers are then left for the next as soon as they cannot
// be reached, cached resources or not, which suits an authority serving
// endpoints, which go stale. Like the rest of A95 it is honoured only when
// the environment variable GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK is
// "true" ([EnvEndpointFallback], [Config].EndpointFallback), as the gRFC
// says; a value that is not a boolean is an error either way.
//
// # Credentials and certificates
//
// [ServerConfig.ChannelCredentials] builds what a channel to a management
// server needs:
//
//   - "tls" (gRFC A65): ca_certificate_file, certificate_file,
//     private_key_file and refresh_interval. Files that cannot be opened
//     are reported by [Parse], [Load] and [FromEnv] alike, naming the field
//     (grpc-go reports them only as failed handshakes); the files are
//     watched by grpc-go's file_watcher (pemfile) and re-read every
//     refresh_interval, so rotated certificates are used by new
//     connections without a restart.
//   - "google_default" (gRFC A27): TLS and OAuth tokens of Google's
//     application default credentials. A Traffic Director bootstrap is read
//     on any machine; where there are no such credentials the error comes
//     when the first connection is made, and says so.
//
// A server may also list call_creds (gRFC A97), credentials added to every
// stream on top of the channel's. Unlike channel_creds, every entry of a
// supported type is used and the others are ignored. The one supported type
// is "jwt_token_file":
//
//	"call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/var/run/secrets/tokens/istio-token"}}]
//
// The file holds a JWT with an "exp" claim; it is sent as
// "authorization: Bearer <token>", cached until 30 s before it expires and
// read again from a minute before that, so a token the platform rotates is
// picked up without a restart (grpc-go's credentials/jwt does the reading).
// A token must not travel in plaintext: a supported call_creds entry on a
// server whose selected channel_creds is "insecure" is a bootstrap error, as
// is one on a REST server; a FILESYSTEM server ignores call_creds. goxds
// reads call_creds always; grpc-go v1.85 only with
// GRPC_EXPERIMENTAL_XDS_BOOTSTRAP_CALL_CREDS=true.
//
// allowed_grpc_services (gRFC A102, as of its 2025-09-18 draft, grpc/proposal
// PR 510) lists the side-channel services (external authorization or
// processing servers, rate limiters) that a management server not marked
// trusted_xds_server may name in a GrpcService, keyed by fully-qualified
// target URI, each with channel_creds (required, chosen as a server's) and
// call_creds (optional, as a server's):
//
//	"allowed_grpc_services": {
//	  "dns:///ext-authz.example.org:443": {
//	    "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "/etc/ca.pem"}}],
//	    "call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/var/run/token"}}]
//	  }
//	}
//
// Entries are validated as servers' credentials are; see
// [Config.AllowedGRPCService]. goxds reads the field always; grpc-go v1.85
// only when a feature that uses it (ext_proc) is enabled by its
// environment variable.
//
// certificate_providers (gRFC A29) maps instance names to plugins of
// grpc-go's certprovider package. A registered plugin's config is parsed by
// the plugin when the bootstrap is read, so a bad file_watcher config fails
// the load:
//
//	bootstrap: certificate_providers["p"].config: plugin "file_watcher": pemfile: at least one credential file needs to be specified
//
// A file_watcher config may name a spiffe_trust_bundle_map_file (gRFC
// A87): the provider's roots are then that SPIFFE trust bundle map, and
// ca_certificate_file is ignored, so one bootstrap serves gRPC versions
// with and without SPIFFE support. Peers are then verified against the
// bundle of their SPIFFE ID's trust domain. goxds reads the field always;
// grpc-go v1.85 only with GRPC_EXPERIMENTAL_XDS_MTLS_SPIFFE=true.
//
// An unregistered plugin is ignored, as gRPC ignores it; a cluster naming
// its instance fails (see [Config.CertificateProviderConfig] and
// [ErrUnknownCertificateProvider]).
//
// Anything wrong, a JSON type included, is an error naming the field by its
// JSON path, and invalid JSON gives its line and column, for example
//
//	bootstrap: xds_servers[0].server_uri: must be a string, got number
//	bootstrap: authorities["a"].client_listener_resource_name_template: "x" must start with "xdstp://a/"
//	bootstrap: /etc/xds/bootstrap.json: invalid JSON at line 3, column 30: invalid character '}' looking for beginning of object key string
//
// Unknown fields are not an error, as gRPC ignores them: a bootstrap written
// for a newer gRPC, or with another implementation's fields, keeps loading.
// They are listed in [Config.UnknownFields] for tools to warn about, and an
// error about a field of an object that has unknown fields names them, with
// the known field each resembles, since a misspelt field is the likeliest
// cause:
//
//	bootstrap: xds_servers: must list at least one server (unknown field at the top level: "xds_server", did you mean "xds_servers"?)
//
// node.user_agent_name and node.user_agent_version are ignored: goxds always
// sends [UserAgentName] and [Version] (see [Node.Proto]).
//
// # The api_type field and its companions
//
// "api_type" in a server object is a goxds extension: it chooses the
// protocol, named as in Envoy's ApiConfigSource.ApiType:
//
//   - "AGGREGATED_GRPC" (the default): state-of-the-world ADS, one stream for
//     every type.
//   - "AGGREGATED_DELTA_GRPC": incremental (delta) ADS.
//   - "GRPC", "DELTA_GRPC": SotW or delta on one stream per type
//     (ListenerDiscoveryService.StreamListeners, ...), for control planes
//     that serve no ADS.
//   - "REST": REST-JSON polling; server_uri is the base URL (http:// with
//     "insecure" channel_creds, https:// with "tls").
//   - "FILESYSTEM" (a goxds name): files on disk, no server at all.
//
// grpc-go ignores the field and speaks state-of-the-world ADS, so a file
// meant for gRPC too should leave it at an ADS value. Four more goxds fields
// go with it:
//
//	{
//	  "server_uri": "xds.example.com:443", "channel_creds": [{"type": "tls"}],
//	  "api_type": "AGGREGATED_GRPC",
//	  "api_type_per_type": {"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment": "DELTA_GRPC"}
//	}
//
// "api_type_per_type" overrides the api_type of some types, by type URL, on
// a gRPC server: above, endpoints come on their own delta stream and
// everything else over SotW ADS. Only the four gRPC values may appear.
//
//	{
//	  "server_uri": "/etc/xds",
//	  "api_type": "FILESYSTEM",
//	  "resource_files": {
//	    "type.googleapis.com/envoy.config.listener.v3.Listener": "listeners.yaml",
//	    "type.googleapis.com/envoy.config.cluster.v3.Cluster": "clusters.json"
//	  },
//	  "refresh_delay": "2s"
//	}
//
// A FILESYSTEM server's server_uri is a directory (a path, or a file:// URI
// of an absolute path); a relative path is relative to the bootstrap file
// when the bootstrap is read with [Load] (or GRPC_XDS_BOOTSTRAP), else to
// the working directory. "resource_files" names the file of each type,
// relative to that directory unless absolute; each holds a DiscoveryResponse
// (binary protobuf, JSON, YAML or proto text). channel_creds are not needed,
// and ignored if present.
//
// "refresh_delay" (a Duration string) is, for REST, the pause before asking
// again after an answer that changed nothing (HTTP 304), and for
// FILESYSTEM, how often files are looked at when the system cannot report
// changes; default [DefaultRefreshDelay]. "request_timeout" bounds one REST
// poll, the time a long-polling server holds it included; default
// [DefaultRequestTimeout]. Each field is an error on a server whose
// api_type it does not apply to.
package bootstrap
