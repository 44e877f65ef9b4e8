package resources

// Type URLs of the v3 resource types named by the xDS protocol.
const (
	// ListenerTypeURL is the type URL of LDS resources.
	ListenerTypeURL = "type.googleapis.com/envoy.config.listener.v3.Listener"
	// RouteConfigTypeURL is the type URL of RDS resources.
	RouteConfigTypeURL = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	// ScopedRouteConfigTypeURL is the type URL of SRDS resources.
	ScopedRouteConfigTypeURL = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
	// VirtualHostTypeURL is the type URL of VHDS resources.
	VirtualHostTypeURL = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
	// ClusterTypeURL is the type URL of CDS resources.
	ClusterTypeURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	// EndpointsTypeURL is the type URL of EDS resources.
	EndpointsTypeURL = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	// SecretTypeURL is the type URL of SDS resources.
	SecretTypeURL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	// RuntimeTypeURL is the type URL of RTDS resources.
	RuntimeTypeURL = "type.googleapis.com/envoy.service.runtime.v3.Runtime"

	// WrapperTypeURL is the type URL of discovery.v3.Resource, the envelope
	// that carries a resource's name, version, aliases and TTL. Delta
	// responses always use it; SotW responses may wrap resources in it.
	WrapperTypeURL = "type.googleapis.com/envoy.service.discovery.v3.Resource"
)

// Wildcard is the resource name that subscribes to every resource of a type
// the server decides the client should see. Only Listener and Cluster (and
// types that say so) support it.
const Wildcard = "*"
