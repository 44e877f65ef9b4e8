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
// xds_servers is required and is in priority order. Each server must have a
// server_uri and at least one channel_creds entry of a supported type,
// "insecure" or "tls"; the first supported entry is used and unsupported ones
// (such as "google_default") are skipped. The other top-level fields are node,
// authorities, client_default_listener_resource_name_template,
// server_listener_resource_name_template and certificate_providers; see the
// fields of [Config].
//
// Unknown fields are ignored, as gRPC ignores them. Anything else that is
// wrong, a JSON type included, is an error naming the field by its JSON path,
// for example
//
//	bootstrap: xds_servers[0].server_uri: must be a string, got number
//	bootstrap: authorities["a"].client_listener_resource_name_template: "x" must start with "xdstp://a/"
//
// node.user_agent_name and node.user_agent_version are ignored: goxds always
// sends [UserAgentName] and [Version] (see [Node.Proto]).
//
// # The api_type field
//
// "api_type" in a server object is a goxds extension: it chooses the protocol,
// named as in Envoy's ApiConfigSource.ApiType. "AGGREGATED_GRPC" (the default)
// is state-of-the-world ADS and "AGGREGATED_DELTA_GRPC" is incremental (delta)
// ADS. "GRPC", "DELTA_GRPC" and "REST" are reserved and rejected for now.
// grpc-go ignores the field, so a file that sets it still works with gRPC,
// which speaks state-of-the-world ADS to the same server.
package bootstrap
