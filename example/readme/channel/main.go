// Command channel makes a gRPC channel routed by xDS through goxds's
// resolver and balancer: the README's second example, kept here so that it
// compiles.
package main

import (
	"log"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/grpcxds"
)

func main() {
	// With no Client in the options, the builder reads the bootstrap from
	// GRPC_XDS_BOOTSTRAP and makes the xDS client when a channel needs it.
	b, err := grpcxds.NewBuilder(grpcxds.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// grpcxds.NewClient installs the resolver and the interceptors that
	// apply each route's timeout, retries and HTTP filters (fault
	// injection) to every RPC. Choose the credentials of the connections
	// to the backends as for any channel: insecure here,
	// grpc/credentials/tls in production.
	conn, err := grpcxds.NewClient("goxds:///my-service", b,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// Use conn with your generated client: pb.NewGreeterClient(conn).
}
