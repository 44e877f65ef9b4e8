package grpcxds

import (
	"log/slog"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// What the resolver hands the channel rides in resolver.State: the
// snapshot in State.Attributes, which is all the balancer reads.
// State.Endpoints stays empty: a list of every endpoint must be made anew
// for every update, O(endpoints) for a change of one, and grpc-go's
// ClientConn, with channelz on (grpc/admin, channelz/service), writes the
// whole state into a trace event as JSON on each update: 63 ms per update
// at 10,000 endpoints. EndpointsFromState makes the list for whoever asks.

// snapshotKey is the State.Attributes key of the snapshot.
type snapshotKey struct{}

// configErrorKey is the State.Attributes key of a *ConfigError, which
// stands in for the snapshot while the tree is unusable.
type configErrorKey struct{}

// loggerKey is the State.Attributes key of the Builder's *slog.Logger: the
// balancer is built by gRPC, which knows nothing of the Builder, and learns
// where to log from the resolver.
type loggerKey struct{}

// loggerFromState returns the logger the resolver put into s, or nil.
func loggerFromState(s resolver.State) *slog.Logger {
	l, _ := s.Attributes.Value(loggerKey{}).(*slog.Logger)
	return l
}

// bootstrapKey is the State.Attributes key of the Builder's
// *bootstrap.Config, whose certificate providers the balancer builds for
// clusters with TLS.
type bootstrapKey struct{}

// bootstrapFromState returns the bootstrap the resolver put into s, or nil.
func bootstrapFromState(s resolver.State) *bootstrap.Config {
	b, _ := s.Attributes.Value(bootstrapKey{}).(*bootstrap.Config)
	return b
}

// endpointInfoKey is the Endpoint.Attributes key of an EndpointInfo.
type endpointInfoKey struct{}

// SnapshotFromState returns the config tree snapshot the goxds resolver put
// into s, and false if s did not come from it.
func SnapshotFromState(s resolver.State) (*watchers.Snapshot, bool) {
	snap, ok := s.Attributes.Value(snapshotKey{}).(*watchers.Snapshot)
	return snap, ok && snap != nil
}

// withSnapshot returns the attributes that carry snap.
func withSnapshot(snap *watchers.Snapshot) *attributes.Attributes {
	return attributes.New(snapshotKey{}, snap)
}

// configErrorFromState returns the ConfigError the resolver put into s in
// place of a snapshot, or nil.
func configErrorFromState(s resolver.State) *ConfigError {
	err, _ := s.Attributes.Value(configErrorKey{}).(*ConfigError)
	return err
}

// errorState is the resolver.State for an unusable tree: the service
// config, so that the goxds balancer runs, and the error it fails RPCs
// with.
func errorState(err *ConfigError, sc *serviceconfig.ParseResult, logger *slog.Logger, cs *channelState, cfg *channelConfig) resolver.State {
	return resolver.State{ServiceConfig: sc, Attributes: attributes.New(configErrorKey{}, err).WithValue(loggerKey{}, logger).
		WithValue(channelKey{}, cs).WithValue(channelConfigKey{}, cfg)}
}

// channelKey and channelConfigKey are the State.Attributes keys of the
// channel's *channelState and of the *channelConfig the state carries: the
// balancer that takes the state hands the configuration to the channel's
// interceptors (channelState.setFrom), and its pickers know by the
// configuration's generation which RPCs chose from a newer one.
type (
	channelKey       struct{}
	channelConfigKey struct{}
)

// channelFromState returns what channelKey and channelConfigKey hold.
func channelFromState(s resolver.State) (*channelState, *channelConfig) {
	cs, _ := s.Attributes.Value(channelKey{}).(*channelState)
	cfg, _ := s.Attributes.Value(channelConfigKey{}).(*channelConfig)
	return cs, cfg
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

// stateOf is the resolver.State for a snapshot: the snapshot itself, the
// service config selecting the goxds balancer, the bootstrap (nil if none)
// for certificate providers, and the channel's per-RPC state with the
// configuration's generation. It costs the same for every snapshot,
// however many clusters it has.
func stateOf(snap *watchers.Snapshot, sc *serviceconfig.ParseResult, logger *slog.Logger, b *bootstrap.Config, cs *channelState, cfg *channelConfig) resolver.State {
	return resolver.State{ServiceConfig: sc, Attributes: withSnapshot(snap).WithValue(loggerKey{}, logger).WithValue(bootstrapKey{}, b).
		WithValue(channelKey{}, cs).WithValue(channelConfigKey{}, cfg)}
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
