package resources

import (
	"fmt"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// The resources of example/loadtest's world, which come by the ten
// thousand: their decode's allocations are most of a client's garbage on
// the way to full config (docs/PERFORMANCE.md).

// BenchmarkDecodeEndpoints3 decodes a ClusterLoadAssignment of one
// locality of 3 endpoints.
func BenchmarkDecodeEndpoints3(b *testing.B) {
	benchDecode(b, EndpointsType, toAny(cla("cluster-000042", locality("r", 0, 1,
		lbEndpoint("127.0.0.1", 10042), lbEndpoint("127.0.0.1", 20042), lbEndpoint("127.0.0.1", 30042)))))
}

// BenchmarkDecodeClusterEDS decodes a plain EDS Cluster.
func BenchmarkDecodeClusterEDS(b *testing.B) {
	benchDecode(b, ClusterType, toAny(edsCluster("cluster-000042", "")))
}

// BenchmarkDecodeRouteConfig10k decodes one virtual host of 10,000 prefix
// routes, each to its cluster.
func BenchmarkDecodeRouteConfig10k(b *testing.B) {
	routes := make([]*routev3.Route, 10000)
	for i := range routes {
		routes[i] = prefixRoute(fmt.Sprintf("/svc-%d/", i), fmt.Sprintf("cluster-%06d", i))
	}
	benchDecode(b, RouteConfigType, toAny(routeConfig("rc", vhost("vh", []string{"*"}, routes...))))
}
