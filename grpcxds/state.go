package grpcxds

import (
	"log/slog"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// What the resolver hands the channel rides in resolver.State: its
// configuration in State.Attributes, which is all the balancer reads.
// State.Endpoints stays empty: a list of every endpoint must be made anew
// for every update, O(endpoints) for a change of one, and grpc-go's
// ClientConn, with channelz on (grpc/admin, channelz/service), writes the
// whole state into a trace event as JSON on each update: 63 ms per update
// at 10,000 endpoints. EndpointsFromState makes the list for whoever asks.

// configKey is the State.Attributes key of the *channelConfig a state
// carries: the snapshot (or the ConfigError in its place), and with it the
// resolver's source, which the balancer learns its channel by. One value,
// so that an update allocates one attributes map rather than one for each
// thing the balancer reads.
type configKey struct{}

// configOf returns the configuration the resolver put into s, or nil.
func configOf(s resolver.State) *channelConfig {
	cfg, _ := s.Attributes.Value(configKey{}).(*channelConfig)
	return cfg
}

// configState is the resolver.State carrying cfg, and the service config
// that selects the goxds balancer. It costs the same for every snapshot,
// however many clusters it has.
func configState(sc *serviceconfig.ParseResult, cfg *channelConfig) resolver.State {
	return resolver.State{ServiceConfig: sc, Attributes: attributes.New(configKey{}, cfg)}
}

// source is what every configuration of one resolver carries besides its
// tree, the same for the resolver's life: the balancer is built by gRPC,
// which knows nothing of the Builder, and learns from it where to log, the
// certificate providers of clusters' TLS, the client to report load
// through, and the channel's state, which it hands each configuration.
type source struct {
	// cs is the channel's state, shared with its interceptors.
	cs *channelState
	// epoch identifies the resolver to cs (channelState.setFrom), so that
	// one closed sets no configuration.
	epoch chan struct{}
	// logger is the Builder's, with the listener.
	logger *slog.Logger
	// bootstrap defines the certificate providers clusters' TLS names:
	// the Builder's, or its shared Client's.
	bootstrap *bootstrap.Config
	// client is the goxds client watching; the balancer's Set records
	// load in its LoadStores (package dataplane/cluster, load.go).
	client *client.Client
}

// endpointInfoKey is the Endpoint.Attributes key of an EndpointInfo.
type endpointInfoKey struct{}

// SnapshotFromState returns the config tree snapshot the goxds resolver put
// into s, and false if s did not come from it.
func SnapshotFromState(s resolver.State) (*watchers.Snapshot, bool) {
	cfg := configOf(s)
	if cfg == nil || cfg.snap == nil {
		return nil, false
	}
	return cfg.snap, true
}

// EndpointInfo is what the goxds resolver says about one endpoint that
// EndpointsFromState lists: the cluster it belongs to and its place in that
// cluster's ClusterLoadAssignment. An endpoint that serves several clusters
// appears once per cluster.
type EndpointInfo struct {
	// Cluster is the EDS cluster's name (its key in Snapshot.Clusters).
	Cluster string
	// Locality and Priority place the endpoint; Priority 0 is the highest.
	Locality resources.LocalityID
	Priority uint32
	// LocalityWeight is the locality's load_balancing_weight, Weight the
	// endpoint's own (1 when unset).
	LocalityWeight uint32
	Weight         uint32
	// Health is the endpoint's health as the management server sees it. The
	// goxds balancer sends traffic only to HEALTHY and UNKNOWN endpoints.
	Health resources.HealthStatus
}

// EndpointInfoFromEndpoint returns the EndpointInfo EndpointsFromState
// attached to ep, and false if it attached none.
func EndpointInfoFromEndpoint(ep resolver.Endpoint) (EndpointInfo, bool) {
	info, ok := ep.Attributes.Value(endpointInfoKey{}).(EndpointInfo)
	return info, ok
}

// EndpointsFromState returns the endpoints of every EDS cluster of the
// snapshot the goxds resolver put into s, each with its EndpointInfo, in no
// particular order; nil if s carries no snapshot. They are made on each
// call, from the snapshot: the resolver leaves s.Endpoints empty, so that
// an update of one cluster costs the channel that cluster (see the package
// documentation).
func EndpointsFromState(s resolver.State) []resolver.Endpoint {
	snap, ok := SnapshotFromState(s)
	if !ok {
		return nil
	}
	var out []resolver.Endpoint
	for name, cc := range snap.Clusters.All() {
		if cc.Endpoints != nil {
			out = append(out, endpointsOf(name, cc.Endpoints)...)
		}
	}
	return out
}

// endpointsOf returns the resolver endpoints of an EDS cluster.
func endpointsOf(name string, e *resources.Endpoints) []resolver.Endpoint {
	var out []resolver.Endpoint
	for _, loc := range e.Localities {
		for _, ep := range loc.Endpoints {
			addrs := make([]resolver.Address, len(ep.Addresses))
			for i, a := range ep.Addresses {
				addrs[i] = resolver.Address{Addr: a}
			}
			out = append(out, resolver.Endpoint{
				Addresses: addrs,
				Attributes: attributes.New(endpointInfoKey{}, EndpointInfo{
					Cluster:        name,
					Locality:       loc.ID,
					Priority:       loc.Priority,
					LocalityWeight: loc.Weight,
					Weight:         ep.Weight,
					Health:         ep.HealthStatus,
				}),
			})
		}
	}
	return out
}
