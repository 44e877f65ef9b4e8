package grpcxds_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// hello is a greeter backend for the example.
type hello string

func (h hello) SayHello(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String(fmt.Sprintf("hello %s, from %s", in.GetValue(), h)), nil
}

// Route a channel by an xDS management server. An in-process management
// server stands in for a real one here (exampleWorld); with a real one,
// NewBuilder with zero Options reads the bootstrap from GRPC_XDS_BOOTSTRAP.
func ExampleNewBuilder() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, stop := exampleWorld(ctx)
	defer stop()

	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// NewClient installs the resolver and the interceptors that apply the
	// route's timeout, retries and HTTP filters to each RPC.
	conn, err := grpcxds.NewClient("goxds:///greeter", b,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	reply := new(wrapperspb.StringValue)
	err = conn.Invoke(ctx, "/goxds.test.Greeter/SayHello", wrapperspb.String("gopher"), reply, grpc.WaitForReady(true))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply.GetValue())
	// Output: hello gopher, from backend-1
}

// A service whose route configuration names many clusters, of which it
// calls a few, connects each cluster on its first RPC, and lets clusters it
// stopped calling close their connections.
func ExampleOptions_connectOnFirstRPC() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, stop := exampleWorld(ctx)
	defer stop()

	b, err := grpcxds.NewBuilder(grpcxds.Options{
		Bootstrap:          cfg,
		ConnectOnFirstRPC:  true,
		ClusterIdleTimeout: 30 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	conn, err := grpcxds.NewClient("goxds:///greeter", b,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	// The first RPC routed to the cluster connects it, and waits for it.
	reply := new(wrapperspb.StringValue)
	err = conn.Invoke(ctx, "/goxds.test.Greeter/SayHello", wrapperspb.String("gopher"), reply)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply.GetValue())
	// Output: hello gopher, from backend-1
}

// exampleWorld starts a backend, "backend-1", and a management server that
// sends listener "greeter" to it, and returns the bootstrap of a client of
// that server and how to stop them.
func exampleWorld(ctx context.Context) (*bootstrap.Config, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&greeterDesc, hello("backend-1"))
	go srv.Serve(lis)

	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	stop := func() { ms.Stop(); srv.Stop() }
	err = ms.Update(ctx, "example-node", testutils.DefaultResources(testutils.ResourceParams{
		ListenerName: "greeter",
		Ports:        []uint32{uint32(lis.Addr().(*net.TCPAddr).Port)},
	}))
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "example-node"}))
	if err != nil {
		log.Fatal(err)
	}
	return cfg, stop
}
