package grpcxds_test

import (
	"context"
	"sync"
	"testing"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds" // grpc-go's own xds resolver, the yardstick
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/testutils"
)

// The same Clusters and endpoints, through grpc-go's xds resolver and
// through goxds's, give the same split of RPCs over the backends within
// 5%: localities "near" (weight 1: n1, n2) and "far" (weight 2: f1, f2),
// endpoint weights 1:3 in each. (wrr_locality over ring_hash is left out:
// grpc-go 1.85 never serves it, its RPCs wait for ring_hash children that
// stay idle; goxds serves it with one ring per locality.)
//
// It is not parallel: its 60,000 RPCs would starve the tests running
// beside it.
func TestLBPolicyParityWithGRPC(t *testing.T) {
	e := newEnv(t)
	grpcGo, err := xds.NewXDSResolverWithConfigForTesting(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: e.ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	bs := []*backend{startBackend(t, "n1"), startBackend(t, "n2"), startBackend(t, "f1"), startBackend(t, "f2")}
	near, far := testutils.Locality{Zone: "near"}, testutils.Locality{Zone: "far"}
	cla := testutils.Endpoints("A", []testutils.EndpointSpec{
		{Host: "127.0.0.1", Port: bs[0].port, Locality: near, LocalityWeight: 1, Weight: 1},
		{Host: "127.0.0.1", Port: bs[1].port, Locality: near, Weight: 3},
		{Host: "127.0.0.1", Port: bs[2].port, Locality: far, LocalityWeight: 2, Weight: 1},
		{Host: "127.0.0.1", Port: bs[3].port, Locality: far, Weight: 3},
	})
	for _, tc := range []struct {
		name   string
		policy proto.Message              // load_balancing_policy's, or nil
		legacy clusterv3.Cluster_LbPolicy // lb_policy, without a policy
	}{
		{name: "legacy ROUND_ROBIN", legacy: clusterv3.Cluster_ROUND_ROBIN},
		{name: "legacy RING_HASH", legacy: clusterv3.Cluster_RING_HASH},
		{name: "round_robin", policy: &roundrobinv3.RoundRobin{}},
		{name: "TypedStruct round_robin", policy: &xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/round_robin"}},
		{name: "wrr_locality(round_robin)", policy: wrrLocality(t, &roundrobinv3.RoundRobin{})},
		{name: "wrr_locality(pick_first)", policy: wrrLocality(t, &pickfirstv3.PickFirst{})},
		{name: "pick_first", policy: &pickfirstv3.PickFirst{}},
		{name: "wrr_locality(least_request)", policy: wrrLocality(t, &leastrequestv3.LeastRequest{})},
		{name: "least_request", policy: &leastrequestv3.LeastRequest{}},
		{name: "wrr_locality(client_side_weighted_round_robin)", policy: wrrLocality(t, &cswrrv3.ClientSideWeightedRoundRobin{})},
	} {
		cluster := testutils.Cluster("A", "")
		cluster.LbPolicy = tc.legacy
		if tc.policy != nil {
			cluster.LoadBalancingPolicy = policyList(t, tc.policy)
		}
		// The cases together take longer than testTimeout under the race
		// detector, and than any multiple of it on a loaded machine: each
		// has deadlines of its own, for its update and for each channel's
		// RPCs.
		updateCtx, cancelUpdate := context.WithTimeout(context.Background(), testTimeout)
		e.ctx = updateCtx
		e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{cluster}, cla))
		cancelUpdate()
		const n = 3000
		var got [2]map[string]int
		for i, target := range []string{"xds:///" + listener, "goxds:///" + listener} {
			conn, err := grpc.NewClient(target, grpc.WithResolvers(grpcGo, e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect)
			if err != nil {
				t.Fatal(err)
			}
			// Each case has a deadline of its own: the race detector slows
			// the RPCs down several times.
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			// Warm up: grpc-go connects to some endpoints only when a pick
			// lands on them; the count starts once every connection that
			// RPCs ask for has had the time of 300 RPCs to be made.
			countConcurrently(t, ctx, conn, 300)
			got[i] = countConcurrently(t, ctx, conn, n)
			cancel()
			conn.Close()
		}
		t.Logf("%s: grpc-go %v, goxds %v", tc.name, got[0], got[1])
		for _, b := range bs {
			g, x := float64(got[0][b.name])/n, float64(got[1][b.name])/n
			if x < g-0.05 || x > g+0.05 {
				t.Errorf("%s: %s got %.1f%% of the RPCs through grpc-go, %.1f%% through goxds", tc.name, b.name, 100*g, 100*x)
			}
		}
	}
}

// countConcurrently is count with 16 RPCs in flight at a time.
func countConcurrently(t *testing.T, ctx context.Context, conn *grpc.ClientConn, n int) map[string]int {
	t.Helper()
	const workers = 16
	var (
		mu   sync.Mutex
		got  = make(map[string]int)
		errs []error
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				name, err := call(ctx, conn, grpc.WaitForReady(true))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					got[name]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d RPCs failed, the first: %v", len(errs), n, errs[0])
	}
	return got
}
