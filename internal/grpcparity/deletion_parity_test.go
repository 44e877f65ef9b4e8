package grpcparity

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// TestDeletionVerdicts: gRFC A88, which grpc-go v1.85 does not implement.
// The same management server behaviour, a SotW response that leaves out
// the Listener or the Cluster a working channel uses, from a server the
// bootstrap does not mark (neither ignore_resource_deletion nor
// fail_on_data_errors): grpc-go drops the resource and fails the channel's
// new RPCs with UNAVAILABLE, which its own tests
// (TestIgnoreResourceDeletionOnClient's "not ignored" cases) assert; goxds
// keeps it, tells the watchers an ambient ErrResourceNotFound, shows it
// DOES_NOT_EXIST with the value in the dump, and goes on serving RPCs.
func TestDeletionVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		typeURL string
		res     string
		// watch watches res on c, passing its ambient errors to ambient
		// and its resource errors to dropped.
		watch func(c *client.Client, ambient, dropped func(error)) (cancel func())
	}{
		{"listener", resources.ListenerTypeURL, listenerName, func(c *client.Client, ambient, dropped func(error)) func() {
			return client.WatchListener(c, listenerName, client.WatcherFuncs[*resources.Listener]{OnAmbientError: ambient, OnResourceError: dropped})
		}},
		{"cluster", resources.ClusterTypeURL, "c", func(c *client.Client, ambient, dropped func(error)) func() {
			return client.WatchCluster(c, "c", client.WatcherFuncs[*resources.Cluster]{OnAmbientError: ambient, OnResourceError: dropped})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			backend := startHealthBackend(t)

			t.Run("grpc-go drops", func(t *testing.T) {
				ctx, s, conn := grpcGoChannel(t)
				serveTree(ctx, t, s, backend)
				if err := check(ctx, conn, grpc.WaitForReady(true)); err != nil {
					t.Fatalf("RPC before the deletion: %v", err)
				}
				deleteAll(ctx, t, s, tt.typeURL)
				// grpc-go applies the deletion after its ACK: wait for
				// the first RPC it fails.
				var err error
				for err = check(ctx, conn); err == nil; err = check(ctx, conn) {
					select {
					case <-ctx.Done():
						t.Fatal("grpc-go's RPCs kept succeeding after the deletion")
					case <-time.After(5 * time.Millisecond):
					}
				}
				// The text varies: the resource's removal with the node
				// ID while the erroring config selector is in place, or,
				// once no RPC holds the clusters, an empty resolver
				// update's "produced zero addresses".
				t.Logf("grpc-go: %v", err)
				if status.Code(err) != codes.Unavailable {
					t.Errorf("grpc-go's RPC failed with %v; want UNAVAILABLE", err)
				}
			})

			t.Run("goxds keeps", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), verdictTimeout)
				defer cancel()
				s, c, conn := goxdsChannel(t)
				ambient, dropped := make(chan error, 1), make(chan error, 1)
				defer tt.watch(c, sendTo(ambient), sendTo(dropped))()
				serveTree(ctx, t, s, backend)
				if err := check(ctx, conn, grpc.WaitForReady(true)); err != nil {
					t.Fatalf("RPC before the deletion: %v", err)
				}
				deleteAll(ctx, t, s, tt.typeURL)
				select {
				case err := <-ambient:
					t.Logf("goxds: ambient error %v", err)
					if !errors.Is(err, client.ErrResourceNotFound) {
						t.Errorf("ambient error %v; want ErrResourceNotFound", err)
					}
				case err := <-dropped:
					t.Fatalf("%s dropped after the deletion: %v", tt.name, err)
				case <-ctx.Done():
					t.Fatal("no ambient error after the deletion")
				}
				held := false
				for _, st := range c.Dump() {
					if st.TypeURL == tt.typeURL && st.Name == tt.res {
						held = st.Status == client.StatusDoesNotExist && st.Value != nil
					}
				}
				if !held {
					t.Errorf("%s %q not in the dump as DOES_NOT_EXIST with its value", tt.name, tt.res)
				}
				if err := check(ctx, conn); err != nil {
					t.Errorf("RPC after the deletion: %v; want it served with the %s kept", err, tt.name)
				}
			})
		})
	}
}

// sendTo returns a function that passes its first error to ch, which has
// room for one.
func sendTo(ch chan<- error) func(error) {
	return func(err error) {
		select {
		case ch <- err:
		default:
		}
	}
}

// startHealthBackend starts a gRPC server with the health service and
// returns its port; it stops with the test.
func startHealthBackend(t *testing.T) uint32 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return uint32(lis.Addr().(*net.TCPAddr).Port)
}

func check(ctx context.Context, conn *grpc.ClientConn, opts ...grpc.CallOption) error {
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
	return err
}

// goxdsChannel starts a fake management server, a goxds client of it for
// node "parity", and a channel through grpcxds to "goxds:///"+listenerName
// on that client; all end with the test.
func goxdsChannel(t *testing.T) (*testutils.FakeServer, *client.Client, *grpc.ClientConn) {
	t.Helper()
	s, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: s.Address(), NodeID: "parity"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := grpcxds.NewBuilder(grpcxds.Options{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	conn, err := grpcxds.NewClient("goxds:///"+listenerName, b, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.Connect()
	return s, c, conn
}

// serveTree serves the client of s the listener, its route configuration
// to cluster c, c, and c's endpoint at 127.0.0.1:port.
func serveTree(ctx context.Context, t *testing.T, s *testutils.FakeServer, port uint32) {
	t.Helper()
	grpcGoRoutesToCluster(ctx, t, s)
	if nack := exchange(ctx, t, s, resources.ClusterTypeURL, "c", testutils.Cluster("c", "")); nack != "" {
		t.Fatalf("cluster rejected: %s", nack)
	}
	cla := testutils.Endpoints("c", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: port}})
	if nack := exchange(ctx, t, s, resources.EndpointsTypeURL, "c", cla); nack != "" {
		t.Fatalf("endpoints rejected: %s", nack)
	}
}

// deleteAll sends a SotW response of typeURL with no resources, which
// deletes every one held, and waits for the client's ACK.
func deleteAll(ctx context.Context, t *testing.T, s *testutils.FakeServer, typeURL string) {
	t.Helper()
	const nonce = "n2"
	if err := s.Send(&discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: "2", Nonce: nonce}); err != nil {
		t.Fatal(err)
	}
	for {
		req := unstash(s, typeURL)
		if req == nil {
			var err error
			if req, err = s.NextRequest(ctx); err != nil {
				t.Fatalf("waiting for the reply to the deletion: %v", err)
			}
		}
		switch {
		case req.GetTypeUrl() != typeURL:
			keep(s, req)
		case req.GetResponseNonce() == nonce:
			if d := req.GetErrorDetail(); d != nil {
				t.Fatalf("the deletion was NACKed: %s", d.GetMessage())
			}
			return
		}
	}
}
