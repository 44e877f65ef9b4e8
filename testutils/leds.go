package testutils

import (
	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// EndpointCollectionTypeURL is the type URL of LbEndpointCollection
// resources (gRFC A95), the key of Resources.EndpointCollections.
const EndpointCollectionTypeURL = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpointCollection"

// CollectionLocality is one locality of EndpointsFromCollections: where it
// is, and the LbEndpointCollection holding its endpoints.
type CollectionLocality struct {
	Locality   Locality
	Priority   uint32
	Weight     uint32 // 0 means 1
	Collection string // its leds_collection_name
}

// EndpointsFromCollections builds a ClusterLoadAssignment named
// clusterName whose localities take their endpoints from collections
// (gRFC A95): each a leds_cluster_locality_config with leds_config self,
// and no lb_endpoints.
func EndpointsFromCollections(clusterName string, locs ...CollectionLocality) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: clusterName}
	for _, l := range locs {
		w := l.Weight
		if w == 0 {
			w = 1
		}
		cla.Endpoints = append(cla.Endpoints, &endpointv3.LocalityLbEndpoints{
			Locality:            &corev3.Locality{Region: l.Locality.Region, Zone: l.Locality.Zone, SubZone: l.Locality.SubZone},
			Priority:            l.Priority,
			LoadBalancingWeight: wrapperspb.UInt32(w),
			LbConfig: &endpointv3.LocalityLbEndpoints_LedsClusterLocalityConfig{LedsClusterLocalityConfig: &endpointv3.LedsClusterLocalityConfig{
				LedsConfig:         &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}},
				LedsCollectionName: l.Collection,
			}},
		})
	}
	return cla
}

// EndpointCollection builds an LbEndpointCollection of one endpoint on
// host per port, each an inline entry.
func EndpointCollection(host string, ports ...uint32) *endpointv3.LbEndpointCollection {
	c := &endpointv3.LbEndpointCollection{}
	for _, p := range ports {
		lbe := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: socketAddress(host, p),
		}}}
		c.Entries = append(c.Entries, &xdscorev3.CollectionEntry{ResourceSpecifier: &xdscorev3.CollectionEntry_InlineEntry_{
			InlineEntry: &xdscorev3.CollectionEntry_InlineEntry{Resource: MarshalAny(lbe)},
		}})
	}
	return c
}
