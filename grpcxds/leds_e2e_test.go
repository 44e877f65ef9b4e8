package grpcxds_test

import (
	"context"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// gRFC A95 on a goxds channel: an assignment whose locality takes its
// endpoints from an LbEndpointCollection (served by go-control-plane over
// delta ADS, the only way it serves them) sends RPCs to them, a new
// version of the collection moves them to its endpoints, and an empty one
// leaves the locality unreachable.
func TestEndpointCollectionServesRPCs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID, APIType: testutils.APITypeDelta}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.EndpointFallback = true // as GRPC_EXPERIMENTAL_XDS_ENDPOINT_FALLBACK=true does
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, ClientOptions: client.Options{
		Logger:           quietLogger,
		WatchExpiry:      2 * time.Second,
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{fastConnect}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	e := &env{t: t, ctx: ctx, ms: ms, builder: b}

	a, other := startBackend(t, "a"), startBackend(t, "b")
	withCollection := func(bs ...*backend) testutils.Resources {
		res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), testutils.EndpointsFromCollections("A",
			testutils.CollectionLocality{Locality: testutils.Locality{Region: "r"}, Collection: "coll-a"}))
		var ports []uint32
		for _, b := range bs {
			ports = append(ports, b.port)
		}
		res.EndpointCollections = map[string]*endpointv3.LbEndpointCollection{"coll-a": testutils.EndpointCollection("127.0.0.1", ports...)}
		return res
	}
	e.update(withCollection(a))
	conn := e.dial()
	e.waitServed(conn, 5, func(name string) bool { return name == "a" })
	e.update(withCollection(other))
	e.waitServed(conn, 5, func(name string) bool { return name == "b" })
	// A collection without entries leaves its locality unreachable.
	e.update(withCollection())
	if err := e.waitFailing(conn); status.Code(err) != codes.Unavailable {
		t.Fatalf("RPC with the collection empty: %v, want UNAVAILABLE", err)
	}
}
