// The README's "From grpc-go to goxds": a grpc-go xDS client and server
// moved to goxds. The README shows it as a diff from grpc-go's version.
package main

import (
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/xdsserver"
)

func main() {
	// A channel to a service the management server routes.
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		log.Fatal(err)
	}
	b, err := grpcxds.NewBuilder(grpcxds.Options{}) // GRPC_XDS_BOOTSTRAP, as grpc-go reads it
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpcxds.NewClient("goxds:///my-service", b, grpc.WithTransportCredentials(creds))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	// A server that serves while the Listener for its address is good.
	srv, err := xdsserver.NewGRPCServer() // TLS per filter chain, from the Listener: no credentials to pass
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "[::]:8080")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(lis))
}
