package grpcxds_test

import (
	"context"
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// lrs_server self is the server that sent the cluster: with the primary
// down, the configuration comes from the fallback (gRFC A71), and so must
// the load reports go there, not to the primary the bootstrap lists first
// (resources.Cluster.LRSServer). Before, the channel dialled the primary's
// LRS service, and the fallback's never heard of the load.
func TestLoadReportedToTheFallbackThatSentTheCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	lrs := testutils.NewLRSServer()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{LoadReporting: lrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	// The primary: its port taken, every connection closed at once.
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			conn, err := down.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	t.Cleanup(func() { down.Close(); <-accepted })
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:       down.Addr().String(),
		FallbackServers: []testutils.BootstrapServer{{URI: ms.Address()}},
		NodeID:          nodeID,
	}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, ClientOptions: client.Options{
		Logger:           quietLogger,
		WatchExpiry:      2 * time.Second,
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{fastConnect}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close) // after the channel's, before the servers stop
	e := &env{t: t, ctx: ctx, ms: ms, builder: b}
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "main")), []*clusterv3.Cluster{lrsSelf(testutils.Cluster("main", ""))}, eds("main", a)))
	conn := e.dial()
	if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("RPC with the fallback's configuration: %v", err)
	}

	st, err := lrs.NextStream(e.ctx)
	if err != nil {
		t.Fatalf("no LRS stream reached the fallback that sent the cluster: %v", err)
	}
	first, err := st.NextRequest(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetNode().GetId() != nodeID {
		t.Errorf("first LoadStatsRequest from node %q, want %q", first.GetNode().GetId(), nodeID)
	}
}
