package bootstrap

import (
	"slices"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// UserAgentName is the user_agent_name goxds sends in its Node. A bootstrap's
// node.user_agent_name is ignored, as gRPC ignores it.
const UserAgentName = "goxds"

// Version is the version of goxds, sent as the Node's user_agent_version. A
// bootstrap's node.user_agent_version is ignored.
const Version = "0.1.0-dev"

// Node identifies the client to management servers: the JSON object node.
type Node struct {
	// ID names this client instance; servers such as Istio and Traffic
	// Director require it. JSON: id.
	ID string
	// Cluster is the service cluster the client belongs to. JSON: cluster.
	Cluster string
	// Locality is where the client runs. JSON: locality.
	Locality Locality
	// Metadata is opaque data for the server, e.g. Istio's proxy metadata.
	// JSON: metadata, any JSON object.
	Metadata *structpb.Struct
}

// Locality is a node's location. JSON: region, zone, sub_zone.
type Locality struct {
	Region  string
	Zone    string
	SubZone string
}

// Proto returns n as an Envoy Node, with UserAgentName and Version as the
// user agent and clientFeatures as the client features (the client decides
// those; this package does not). The result shares no memory with n or
// clientFeatures.
func (n Node) Proto(clientFeatures []string) *corepb.Node {
	p := &corepb.Node{
		Id:                   n.ID,
		Cluster:              n.Cluster,
		UserAgentName:        UserAgentName,
		UserAgentVersionType: &corepb.Node_UserAgentVersion{UserAgentVersion: Version},
		ClientFeatures:       slices.Clone(clientFeatures),
	}
	if n.Locality != (Locality{}) {
		p.Locality = &corepb.Locality{
			Region:  n.Locality.Region,
			Zone:    n.Locality.Zone,
			SubZone: n.Locality.SubZone,
		}
	}
	if n.Metadata != nil {
		p.Metadata = proto.CloneOf(n.Metadata)
	}
	return p
}
