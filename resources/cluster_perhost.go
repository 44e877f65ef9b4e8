package resources

import (
	"os"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// EnvConnectionScaling names the environment variable that turns on gRFC
// A105's xDS configuration (MAX_CONCURRENT_STREAMS connection scaling):
// when it is "true" (in any case), a Cluster's
// circuit_breakers.per_host_thresholds are read into
// Cluster.MaxConnectionsPerHost, and a max_connections of 0 there is
// NACKed. The gRFC guards the xDS configuration with it until the feature
// has passed gRPC's interop tests; without it the field is ignored, as by
// a client that predates the gRFC. Read at each decode, as the bootstrap
// reads EnvEndpointFallback, so that a program that sets it before its
// first channel gets what it set.
const EnvConnectionScaling = "GRPC_EXPERIMENTAL_XDS_MAX_CONCURRENT_STREAMS_CONNECTION_SCALING"

// ConnectionScalingEnabled reports whether EnvConnectionScaling is "true"
// now: transports follow their connections' MAX_CONCURRENT_STREAMS only
// then.
func ConnectionScalingEnabled() bool { return connectionScalingFromEnv() }

// connectionScalingFromEnv reports whether EnvConnectionScaling is "true".
func connectionScalingFromEnv() bool {
	return strings.EqualFold(os.Getenv(EnvConnectionScaling), "true")
}

// setPerHost reads the per-host thresholds as gRFC A105 says: the first of
// priority DEFAULT counts, and only its max_connections, which must not
// be 0 (it would allow an endpoint no connection at all).
func (c *Cluster) setPerHost(ts []*clusterv3.CircuitBreakers_Thresholds) error {
	for i, t := range ts {
		if t.GetPriority() != corev3.RoutingPriority_DEFAULT {
			continue
		}
		if mc := t.GetMaxConnections(); mc != nil {
			if mc.GetValue() == 0 {
				return fieldErrorf("per_host_thresholds["+strconv.Itoa(i)+"].max_connections", "must be at least 1, got 0")
			}
			c.MaxConnectionsPerHost = mc.GetValue()
		}
		return nil
	}
	return nil
}
