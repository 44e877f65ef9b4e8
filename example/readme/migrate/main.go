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
	defer b.Close()
	conn, err := grpcxds.NewClient("goxds:///my-service", b, grpc.WithTransportCredentials(creds))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	// A server that serves while the Listener for its address is good, with
	// the TLS its filter chains say (the fallback for chains without).
	serverCreds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := xdsserver.NewGRPCServer(grpc.Creds(serverCreds))
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "[::]:8080")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(lis))
}
