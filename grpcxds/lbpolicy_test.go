package grpcxds_test

import (
	"context"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/testutils"
)

// The tests of this file give cluster "A" a load_balancing_policy (gRFC
// A52) and count where RPCs go. The expected splits are what gRPC's own
// policies make of the same resources.

// policyList is a load_balancing_policy of one policy.
func policyList(t *testing.T, m proto.Message) *clusterv3.LoadBalancingPolicy {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: "policy", TypedConfig: a},
	}}}
}

func wrrLocality(t *testing.T, child proto.Message) proto.Message {
	return &wrrlocalityv3.WrrLocality{EndpointPickingPolicy: policyList(t, child)}
}

// twoLocalities serves cluster A, with policy, from localities "near"
// (weight 1: backends n1, n2) and "far" (weight 2: f1, f2), and returns a
// channel on which all four backends are connected.
func twoLocalities(t *testing.T, policy proto.Message, endpointWeights ...uint32) (*env, []*backend, func(n int) map[string]int) {
	t.Helper()
	e := newEnv(t)
	// Thousands of RPCs under the race detector, beside the other tests:
	// more than testTimeout on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	t.Cleanup(cancel)
	e.ctx = ctx
	bs := []*backend{startBackend(t, "n1"), startBackend(t, "n2"), startBackend(t, "f1"), startBackend(t, "f2")}
	near, far := testutils.Locality{Zone: "near"}, testutils.Locality{Zone: "far"}
	var specs []testutils.EndpointSpec
	for i, b := range bs {
		s := testutils.EndpointSpec{Host: "127.0.0.1", Port: b.port, Locality: near, LocalityWeight: 1}
		if i >= 2 {
			s.Locality, s.LocalityWeight = far, 2
		}
		if i < len(endpointWeights) {
			s.Weight = endpointWeights[i]
		}
		specs = append(specs, s)
	}
	cluster := testutils.Cluster("A", "")
	cluster.LoadBalancingPolicy = policyList(t, policy)
	e.update(tree(routes(toCluster(prefix("/"), "A")), []*clusterv3.Cluster{cluster}, testutils.Endpoints("A", specs)))
	conn := e.dial()
	// Every endpoint of the priority is connected, but under pick_first,
	// which connects the first of each locality only (gRFC A62); wait for
	// those connected so that no pick depends on connection timing.
	connected := bs
	if proto.Equal(policy, wrrLocality(t, &pickfirstv3.PickFirst{})) {
		connected = []*backend{bs[0], bs[2]}
	}
	e.waitServed(conn, 20, func(string) bool {
		for _, b := range connected {
			if b.conns.Load() == 0 {
				return false
			}
		}
		return true
	})
	return e, bs, func(n int) map[string]int { return count(t, e.ctx, conn, n) }
}

// share fails the test unless got[names...] is want of n, within 5%.
func share(t *testing.T, got map[string]int, n int, want float64, names ...string) {
	t.Helper()
	sum := 0
	for _, name := range names {
		sum += got[name]
	}
	if s := float64(sum) / float64(n); s < want-0.05 || s > want+0.05 {
		t.Errorf("%v got %.1f%% of %d RPCs (%v), want %.1f%% ± 5%%", names, 100*s, n, got, 100*want)
	}
}

// wrr_locality over pick_first: localities 1:2 share the traffic by weight,
// and within each locality pick_first sends its whole share to its first
// endpoint, the only one it connects (gRFC A62: one at a time, the next
// only if that one fails or is slow).
func TestWRRLocalityPickFirst(t *testing.T) {
	t.Parallel()
	_, bs, rpcs := twoLocalities(t, wrrLocality(t, &pickfirstv3.PickFirst{}))
	const n = 3000
	got := rpcs(n)
	t.Logf("wrr_locality(pick_first), localities 1:2 over %d RPCs: %v", n, got)
	share(t, got, n, 1.0/3, "n1", "n2")
	share(t, got, n, 2.0/3, "f1", "f2")
	if got["n2"] != 0 || got["f2"] != 0 {
		t.Errorf("pick_first sent RPCs past each locality's first endpoint, which is up: %v", got)
	}
	if c2, c4 := bs[1].conns.Load(), bs[3].conns.Load(); c2 != 0 || c4 != 0 {
		t.Errorf("pick_first connected the second endpoint of a locality whose first is up (n2: %d, f2: %d connections)", c2, c4)
	}
}

// wrr_locality over least_request: the localities' 1:2 holds, where a
// least_request over the whole priority would split 1:1.
func TestWRRLocalityLeastRequest(t *testing.T) {
	t.Parallel()
	_, _, rpcs := twoLocalities(t, wrrLocality(t, &leastrequestv3.LeastRequest{}))
	const n = 3000
	got := rpcs(n)
	t.Logf("wrr_locality(least_request), localities 1:2 over %d RPCs: %v", n, got)
	share(t, got, n, 1.0/3, "n1", "n2")
	share(t, got, n, 2.0/3, "f1", "f2")
}

// round_robin not wrapped in wrr_locality ignores locality weights, as
// gRPC's does: four endpoints, a quarter each.
func TestRoundRobinWithoutWRRLocality(t *testing.T) {
	t.Parallel()
	_, _, rpcs := twoLocalities(t, &roundrobinv3.RoundRobin{})
	const n = 2000
	got := rpcs(n)
	t.Logf("round_robin, localities 1:2 over %d RPCs: %v", n, got)
	for _, name := range []string{"n1", "n2", "f1", "f2"} {
		share(t, got, n, 0.25, name)
	}
}

// client_side_weighted_round_robin takes its weights from ORCA load
// reports only; with none (these backends send none) it is an even round
// robin, endpoint weights 1:3:1:3 notwithstanding, as in gRPC. Under
// wrr_locality the localities' 1:2 still holds. (With reports:
// TestWeightedRoundRobinParity in internal/grpcparity.)
func TestWeightedRoundRobinWithoutORCA(t *testing.T) {
	t.Parallel()
	_, _, rpcs := twoLocalities(t, wrrLocality(t, &cswrrv3.ClientSideWeightedRoundRobin{}), 1, 3, 1, 3)
	const n = 3000
	got := rpcs(n)
	t.Logf("wrr_locality(client_side_weighted_round_robin), localities 1:2, endpoints 1:3 over %d RPCs: %v", n, got)
	share(t, got, n, 1.0/6, "n1")
	share(t, got, n, 1.0/6, "n2")
	share(t, got, n, 1.0/3, "f1")
	share(t, got, n, 1.0/3, "f2")
}
