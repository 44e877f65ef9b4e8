package testutils_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/testutils"
)

const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// A management server answers a client asking for some of the clusters.
func ExampleManagementServer() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer ms.Stop()
	res := testutils.DefaultResources(testutils.ResourceParams{ClusterNames: []string{"a", "b"}})
	if err := ms.Update(ctx, "node-1", res); err != nil {
		log.Fatal(err)
	}

	cc, err := grpc.NewClient(ms.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{
		Node:          &corev3.Node{Id: "node-1"},
		TypeUrl:       clusterType,
		ResourceNames: []string{"b"},
	}); err != nil {
		log.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		log.Fatal(err)
	}
	c := &clusterv3.Cluster{}
	if err := resp.GetResources()[0].UnmarshalTo(c); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(resp.GetResources()), c.GetName(), resp.GetVersionInfo())
	// Output: 1 b 1
}

// A test scripts a fake server and checks the client's ACK.
func ExampleFakeServer() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer fs.Stop()

	// The client under test would do this part.
	cc, err := grpc.NewClient(fs.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		_ = stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: clusterType, ResourceNames: []string{"c"}})
		resp, err := stream.Recv()
		if err == nil {
			_ = stream.Send(&discoveryv3.DiscoveryRequest{
				TypeUrl:       clusterType,
				ResourceNames: []string{"c"},
				VersionInfo:   resp.GetVersionInfo(),
				ResponseNonce: resp.GetNonce(),
			})
		}
	}()

	req, err := fs.NextRequest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("subscribed to", req.GetResourceNames())
	if err := fs.Send(testutils.SotWResponse(clusterType, "v1", "nonce-1", testutils.Cluster("c", ""))); err != nil {
		log.Fatal(err)
	}
	ack, err := fs.NextRequest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ACK of", ack.GetVersionInfo(), ack.GetResponseNonce())
	// Output:
	// subscribed to [c]
	// ACK of v1 nonce-1
}
