package resources

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// toAny packs m; test inputs always marshal.
func toAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

// checkErr fails t unless err matches want: nil for "", else an error
// containing want.
func checkErr(t testing.TB, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

func selfSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
}

func routerFilter() *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{
		Name:       "envoy.filters.http.router",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(&routerv3.Router{})},
	}
}

// rdsHCM is a valid connection manager that fetches route config rc.
func rdsHCM(rc string) *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: rc,
		}},
		HttpFilters: []*hcmv3.HttpFilter{routerFilter()},
	}
}

func listenerWith(name string, hcm *hcmv3.HttpConnectionManager) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: toAny(hcm)},
	}
}

func prefixRoute(prefix, cluster string) *routev3.Route {
	return &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
		}},
	}
}

func weightedRoute(prefix string, clusters map[string]uint32, order ...string) *routev3.Route {
	var cws []*routev3.WeightedCluster_ClusterWeight
	for _, name := range order {
		cws = append(cws, &routev3.WeightedCluster_ClusterWeight{Name: name, Weight: wrapperspb.UInt32(clusters[name])})
	}
	r := prefixRoute(prefix, "")
	r.GetRoute().ClusterSpecifier = &routev3.RouteAction_WeightedClusters{
		WeightedClusters: &routev3.WeightedCluster{Clusters: cws},
	}
	return r
}

func vhost(name string, domains []string, routes ...*routev3.Route) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: domains, Routes: routes}
}

func routeConfig(name string, vhs ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: vhs}
}

// simpleRouteConfig has one virtual host for every domain with one route.
func simpleRouteConfig(name, cluster string) *routev3.RouteConfiguration {
	return routeConfig(name, vhost("vh", []string{"*"}, prefixRoute("/", cluster)))
}

func edsCluster(name, service string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: service},
	}
}

func dnsCluster(name, host string, port uint32) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS},
		LoadAssignment:       cla(name, locality("r", 0, 1, lbEndpoint(host, port))),
	}
}

func aggregateCluster(name string, children ...string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: name,
		ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
			Name:        aggregateClusterTypeName,
			TypedConfig: toAny(&aggregatev3.ClusterConfig{Clusters: children}),
		}},
	}
}

func socketAddr(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func lbEndpoint(host string, port uint32) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
		Endpoint: &endpointv3.Endpoint{Address: socketAddr(host, port)},
	}}
}

func locality(region string, priority, weight uint32, eps ...*endpointv3.LbEndpoint) *endpointv3.LocalityLbEndpoints {
	l := &endpointv3.LocalityLbEndpoints{
		Locality:    &corev3.Locality{Region: region},
		Priority:    priority,
		LbEndpoints: eps,
	}
	if weight != 0 {
		l.LoadBalancingWeight = wrapperspb.UInt32(weight)
	}
	return l
}

func cla(name string, locs ...*endpointv3.LocalityLbEndpoints) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: locs}
}

// decodeMsg packs m and decodes it with typ.
func decodeMsg[T Resource](typ *Type[T], m proto.Message) (string, T, error) {
	return typ.DecodeTyped(nil, toAny(m))
}
