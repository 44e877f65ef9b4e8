// Package a78 holds what the metrics adapters share: the instruments of
// gRFC A78 as grpc-go's xDS client registers them (names, descriptions,
// units, attribute keys), the values goxds gives their attributes, and
// the connected state the client reports as events but the gauge reports
// on collection.
package a78

import (
	"sort"
	"strings"
	"sync"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/metrics/internal/instrument"
)

// Instrument is one metric of gRFC A78, spelt as grpc-go (v1.85) registers
// it, so that a dashboard or alert written for grpc-go's xDS client reads
// goxds's the same way. Its Labels are in grpc-go's order.
type Instrument = instrument.Instrument

// The instruments. Names, descriptions, units and labels are grpc-go's,
// word for word (a78_test.go holds them to grpc-go's registry): they are
// what its users see in their metrics backends and match in their queries.
var (
	ResourceUpdatesValid = Instrument{
		Name:        "grpc.xds_client.resource_updates_valid",
		Description: "A counter of resources received that were considered valid. The counter will be incremented even for resources that have not changed.",
		Unit:        "{resource}",
		Labels:      []string{KeyTarget, KeyServer, KeyResourceType},
	}
	ResourceUpdatesInvalid = Instrument{
		Name:        "grpc.xds_client.resource_updates_invalid",
		Description: "A counter of resources received that were considered invalid.",
		Unit:        "{resource}",
		Labels:      []string{KeyTarget, KeyServer, KeyResourceType},
	}
	ServerFailure = Instrument{
		Name:        "grpc.xds_client.server_failure",
		Description: "A counter of xDS servers going from healthy to unhealthy. A server goes unhealthy when we have a connectivity failure or when the ADS stream fails without seeing a response message, as per gRFC A57.",
		Unit:        "{failure}",
		Labels:      []string{KeyTarget, KeyServer},
	}
	Connected = Instrument{
		Name:        "grpc.xds_client.connected",
		Description: "A metric that is 1 if the xDS Client has a working ADS stream to the server, 0 otherwise.",
		Unit:        "{connected}",
		Labels:      []string{KeyTarget, KeyServer},
	}
	Resources = Instrument{
		Name:        "grpc.xds_client.resources",
		Description: "Counts of xDS resources.",
		Unit:        "{resource}",
		Labels:      []string{KeyTarget, KeyAuthority, KeyCacheState, KeyResourceType},
	}
)

// All lists the instruments.
var All = []Instrument{ResourceUpdatesValid, ResourceUpdatesInvalid, ServerFailure, Connected, Resources}

// Attribute keys (labels), as grpc-go names them.
const (
	KeyTarget       = "grpc.target"
	KeyServer       = "grpc.xds.server"
	KeyResourceType = "grpc.xds.resource_type"
	KeyAuthority    = "grpc.xds.authority"
	KeyCacheState   = "grpc.xds.cache_state"
)

// DefaultTarget is the grpc.target of a client given no target: grpc-go
// names its clients that serve no channel with a "#" name ("#server"), so
// this one cannot be mistaken for a channel's target.
const DefaultTarget = "#goxds"

// grpcGoTypeNames are the grpc.xds.resource_type values grpc-go gives the
// four types it knows. gRFC A78 asks for the type URL's message name
// instead; grpc-go's dashboards match grpc-go, so its names win.
var grpcGoTypeNames = map[string]string{
	"type.googleapis.com/envoy.config.listener.v3.Listener":              "ListenerResource",
	"type.googleapis.com/envoy.config.route.v3.RouteConfiguration":       "RouteConfigResource",
	"type.googleapis.com/envoy.config.cluster.v3.Cluster":                "ClusterResource",
	"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment": "EndpointsResource",
}

// ResourceType is the default grpc.xds.resource_type of typeURL: grpc-go's
// name for the four types it knows ("ListenerResource", "ClusterResource",
// ...), and for any other the message name, the type URL without its
// "type.googleapis.com/" (as gRFC A78 spells every type).
func ResourceType(typeURL string) string {
	if n, ok := grpcGoTypeNames[typeURL]; ok {
		return n
	}
	if _, name, ok := strings.Cut(typeURL, "/"); ok {
		return name
	}
	return typeURL
}

// ConnectedSet keeps what the client last said of each server through
// client.Metrics.Connected, for a gauge read on collection. Safe for
// concurrent use.
type ConnectedSet struct {
	mu      sync.Mutex
	servers map[string]bool
}

// Set records that server is, or is not, connected.
func (s *ConnectedSet) Set(server string, connected bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = make(map[string]bool)
	}
	s.servers[server] = connected
}

// ServerState is one server's connected state.
type ServerState struct {
	Server    string
	Connected bool
}

// Snapshot returns every server the client has reported, sorted by name.
func (s *ConnectedSet) Snapshot() []ServerState {
	s.mu.Lock()
	out := make([]ServerState, 0, len(s.servers))
	for server, up := range s.servers {
		out = append(out, ServerState{server, up})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

// ClientRef is the client whose cache the resources gauge counts, set
// once the client exists (the adapter is made first: it is one of the
// client's options). Safe for concurrent use.
type ClientRef struct {
	mu sync.Mutex
	c  *client.Client
}

// Set makes c the client counted.
func (r *ClientRef) Set(c *client.Client) {
	r.mu.Lock()
	r.c = c
	r.mu.Unlock()
}

// Counts returns the client's resource counts, none before Set.
func (r *ClientRef) Counts() []client.ResourceCount {
	r.mu.Lock()
	c := r.c
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.ResourceCounts()
}
