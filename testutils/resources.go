package testutils

import (
	"cmp"
	"fmt"
	"slices"
	"time"

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

// Resources is everything one node sees: the argument of
// ManagementServer.Update, and what DefaultResources returns.
type Resources struct {
	Listeners []*listenerv3.Listener
	Routes    []*routev3.RouteConfiguration
	Clusters  []*clusterv3.Cluster
	Endpoints []*endpointv3.ClusterLoadAssignment
	// Others holds resources of further types, keyed by type URL (a type of
	// a test's own invention is fine). A resource is named by its GetName
	// method, or GetClusterName for a ClusterLoadAssignment. The server puts
	// the key into the Any of every resource it sends, whatever the message
	// is, so a test can serve a message under the wrong type URL on purpose.
	Others map[string][]proto.Message
	// EndpointCollections holds LbEndpointCollection resources (gRFC A95)
	// by name: the message has no name of its own. go-control-plane v0.14
	// names a resource in a SotW response only by the message's own name,
	// so a SotW client gets these without a name, and rejects them; serve
	// them over delta, where the cache's name goes into each
	// discovery.v3.Resource.
	EndpointCollections map[string]*endpointv3.LbEndpointCollection
	// TTLs gives resources a time to live. The server then sends each of them
	// wrapped in a discovery.v3.Resource with that ttl and, if
	// ManagementServerOptions.HeartbeatInterval is set, refreshes it with
	// heartbeats. go-control-plane honours TTLs on SotW streams only. Every
	// key must name a resource present in these Resources.
	TTLs map[ResourceKey]time.Duration
}

// ResourceKey names one resource of one type.
type ResourceKey struct {
	TypeURL string
	Name    string
}

// Names of the extensions the builders put into resources.
const (
	routerFilterName     = "router"
	aggregateClusterType = "envoy.clusters.aggregate"
)

// ResourceParams describes the resource tree DefaultResources builds. Zero
// fields take the defaults written beside them.
type ResourceParams struct {
	// ListenerName names the Listener, the root of the tree. "" means "listener".
	ListenerName string
	// RouteName names the RouteConfiguration the Listener points to over RDS.
	// "" means ListenerName + "-route".
	RouteName string
	// Domain is the one domain of the single virtual host. "" means "*".
	Domain string
	// ClusterNames are the EDS Clusters the route sends traffic to, with equal
	// weights when there is more than one. Each cluster's EDS service name is
	// its own name. None means one cluster named ListenerName + "-cluster".
	ClusterNames []string
	// Host is the address of every endpoint. "" means "127.0.0.1".
	Host string
	// Ports are the endpoint ports; every cluster gets one endpoint per port in
	// a single locality. None means one endpoint on port 8080.
	Ports []uint32
}

// DefaultResources builds a complete, valid tree: a Listener whose
// HttpConnectionManager fetches a RouteConfiguration over ADS, a route to the
// clusters, one EDS Cluster per name and one ClusterLoadAssignment per
// cluster. The result can go straight to ManagementServer.Update, and tests
// may edit it first.
func DefaultResources(p ResourceParams) Resources {
	p.ListenerName = cmp.Or(p.ListenerName, "listener")
	p.RouteName = cmp.Or(p.RouteName, p.ListenerName+"-route")
	p.Domain = cmp.Or(p.Domain, "*")
	p.Host = cmp.Or(p.Host, "127.0.0.1")
	if len(p.ClusterNames) == 0 {
		p.ClusterNames = []string{p.ListenerName + "-cluster"}
	}
	if len(p.Ports) == 0 {
		p.Ports = []uint32{8080}
	}

	res := Resources{Listeners: []*listenerv3.Listener{Listener(p.ListenerName, p.RouteName)}}
	if len(p.ClusterNames) == 1 {
		res.Routes = append(res.Routes, RouteConfig(p.RouteName, p.Domain, p.ClusterNames[0]))
	} else {
		weights := make([]ClusterWeight, 0, len(p.ClusterNames))
		for _, name := range p.ClusterNames {
			weights = append(weights, ClusterWeight{Name: name, Weight: 1})
		}
		res.Routes = append(res.Routes, WeightedRouteConfig(p.RouteName, p.Domain, weights...))
	}
	for _, name := range p.ClusterNames {
		res.Clusters = append(res.Clusters, Cluster(name, name))
		res.Endpoints = append(res.Endpoints, ClusterLoadAssignment(name, p.Host, p.Ports...))
	}
	return res
}

// adsConfigSource points a resource at the ADS stream it arrived on, the only
// config source a gRPC-style client accepts besides "self".
func adsConfigSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// Listener builds a client-side Listener named name: an api_listener holding
// an HttpConnectionManager that fetches routeName over RDS from the ADS
// stream, with the router filter as its last (and only) HTTP filter.
func Listener(name, routeName string) *listenerv3.Listener {
	return apiListener(name, &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsConfigSource(),
			RouteConfigName: routeName,
		}},
	})
}

// ListenerInlineRoute builds a client-side Listener like Listener, but with rc
// carried inside the HttpConnectionManager instead of fetched over RDS.
func ListenerInlineRoute(name string, rc *routev3.RouteConfiguration) *listenerv3.Listener {
	return apiListener(name, &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
	})
}

// apiListener appends the router filter to hcm and wraps it in a Listener.
func apiListener(name string, hcm *hcmv3.HttpConnectionManager) *listenerv3.Listener {
	hcm.StatPrefix = name
	hcm.HttpFilters = append(hcm.HttpFilters, &hcmv3.HttpFilter{
		Name:       routerFilterName,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: MarshalAny(&routerv3.Router{})},
	})
	return &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: MarshalAny(hcm)},
	}
}

// RouteConfig builds a RouteConfiguration with one virtual host matching
// domain (use "*" for any) whose single route sends every path to cluster.
func RouteConfig(name, domain, cluster string) *routev3.RouteConfiguration {
	return routeConfig(name, domain, &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
	})
}

// ClusterWeight is one cluster of a weighted route and its share of traffic.
type ClusterWeight struct {
	Name   string
	Weight uint32
}

// WeightedRouteConfig builds a RouteConfiguration like RouteConfig whose
// route splits traffic across clusters by weight, in the order given.
func WeightedRouteConfig(name, domain string, clusters ...ClusterWeight) *routev3.RouteConfiguration {
	wc := &routev3.WeightedCluster{}
	for _, c := range clusters {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{
			Name:   c.Name,
			Weight: wrapperspb.UInt32(c.Weight),
		})
	}
	return routeConfig(name, domain, &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc},
	})
}

func routeConfig(name, domain string, action *routev3.RouteAction) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    name + "-vhost",
			Domains: []string{domain},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: action},
			}},
		}},
	}
}

// Cluster builds an EDS Cluster with round-robin balancing whose endpoints
// come over the ADS stream under edsServiceName ("" means the
// ClusterLoadAssignment is named like the cluster).
func Cluster(name, edsServiceName string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig:   adsConfigSource(),
			ServiceName: edsServiceName,
		},
		LbPolicy: clusterv3.Cluster_ROUND_ROBIN,
	}
}

// LogicalDNSCluster builds a LOGICAL_DNS Cluster resolving host:port, with
// the single locality and endpoint a gRPC client requires.
func LogicalDNSCluster(name, host string, port uint32) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
		LoadAssignment:       ClusterLoadAssignment(name, host, port),
	}
}

// AggregateCluster builds a Cluster of type envoy.clusters.aggregate whose
// children are tried in the order given.
func AggregateCluster(name string, children ...string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: name,
		ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
			Name:        aggregateClusterType,
			TypedConfig: MarshalAny(&aggregatev3.ClusterConfig{Clusters: slices.Clone(children)}),
		}},
		// gRPC checks lb_policy before the cluster type and accepts only a
		// few policies, so an aggregate cluster carries ROUND_ROBIN too.
		LbPolicy: clusterv3.Cluster_ROUND_ROBIN,
	}
}

// Locality identifies where endpoints run.
type Locality struct {
	Region, Zone, SubZone string
}

// EndpointSpec describes one endpoint for Endpoints.
type EndpointSpec struct {
	Host string
	Port uint32
	// Weight is the endpoint's load-balancing weight; 0 leaves it unset (1).
	Weight uint32
	// Health is the endpoint's health; the zero value, UNKNOWN, counts as
	// healthy for gRPC.
	Health corev3.HealthStatus
	// Locality and Priority place the endpoint; endpoints sharing both are
	// grouped into one LocalityLbEndpoints.
	Locality Locality
	Priority uint32
	// LocalityWeight is the weight of the endpoint's locality; the first
	// non-zero value among the locality's endpoints wins and 0 everywhere
	// means 1 (gRPC ignores localities whose weight is 0).
	LocalityWeight uint32
}

// Endpoints builds a ClusterLoadAssignment named clusterName (a cluster's
// EDS service name, or its name when that is empty). Endpoints are grouped by
// priority (ascending) and locality (in order of first appearance).
func Endpoints(clusterName string, eps []EndpointSpec) *endpointv3.ClusterLoadAssignment {
	type group struct {
		priority uint32
		locality Locality
	}
	var order []group
	byGroup := make(map[group]*endpointv3.LocalityLbEndpoints)
	for _, ep := range eps {
		g := group{ep.Priority, ep.Locality}
		lle := byGroup[g]
		if lle == nil {
			lle = &endpointv3.LocalityLbEndpoints{
				Locality: &corev3.Locality{Region: g.locality.Region, Zone: g.locality.Zone, SubZone: g.locality.SubZone},
				Priority: g.priority,
			}
			byGroup[g] = lle
			order = append(order, g)
		}
		if lle.LoadBalancingWeight == nil && ep.LocalityWeight != 0 {
			lle.LoadBalancingWeight = wrapperspb.UInt32(ep.LocalityWeight)
		}
		lbe := &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: socketAddress(ep.Host, ep.Port),
			}},
			HealthStatus: ep.Health,
		}
		if ep.Weight != 0 {
			lbe.LoadBalancingWeight = wrapperspb.UInt32(ep.Weight)
		}
		lle.LbEndpoints = append(lle.LbEndpoints, lbe)
	}
	slices.SortStableFunc(order, func(a, b group) int { return cmp.Compare(a.priority, b.priority) })

	cla := &endpointv3.ClusterLoadAssignment{ClusterName: clusterName}
	for _, g := range order {
		lle := byGroup[g]
		if lle.LoadBalancingWeight == nil {
			lle.LoadBalancingWeight = wrapperspb.UInt32(1)
		}
		cla.Endpoints = append(cla.Endpoints, lle)
	}
	return cla
}

// ClusterLoadAssignment builds a ClusterLoadAssignment named clusterName
// with one endpoint on host per port, all in one locality of priority 0.
func ClusterLoadAssignment(clusterName, host string, ports ...uint32) *endpointv3.ClusterLoadAssignment {
	eps := make([]EndpointSpec, 0, len(ports))
	for _, p := range ports {
		eps = append(eps, EndpointSpec{Host: host, Port: p})
	}
	return Endpoints(clusterName, eps)
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      corev3.SocketAddress_TCP,
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// MarshalAny wraps m in an Any whose type URL names m's type. It panics if m
// cannot be marshalled, which does not happen for generated messages.
func MarshalAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("testutils: marshalling %T: %v", m, err))
	}
	return a
}
