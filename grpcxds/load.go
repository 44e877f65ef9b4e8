package grpcxds

import (
	// Registers the parser of the ORCA trailer: without it gRPC leaves
	// DoneInfo.ServerLoad nil, and load reports would carry no metrics.
	_ "google.golang.org/grpc/orca"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/client"
)

// Load reporting (gRFC A27's LRS) is the cluster layer's (package
// dataplane/cluster, load.go): the balancer hands its Set the client the
// resolver watches with, whose LoadStores the Set records in, and a
// pick's Done hands the cluster's Done.Finish the RPC's error and its
// ORCA report.

// clientKey is the State.Attributes key of the goxds client the resolver
// watches with: the balancer's Set asks it for load stores.
type clientKey struct{}

// clientFromState returns the client a resolver state carries, or nil.
func clientFromState(s resolver.State) *client.Client {
	c, _ := s.Attributes.Value(clientKey{}).(*client.Client)
	return c
}
