package resources_test

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/goxds/xds/resources"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestValueStrings holds the text fmt prints for the resources' value
// types: names as in the xDS configuration, not the fields in order.
func TestValueStrings(t *testing.T) {
	wrr := resources.WRRConfig{
		BlackoutPeriod:          10 * time.Second,
		WeightExpirationPeriod:  3 * time.Minute,
		WeightUpdatePeriod:      time.Second,
		ErrorUtilizationPenalty: 1.5,
	}
	oob := wrr
	oob.EnableOOBLoadReport, oob.OOBReportingPeriod = true, 5*time.Second
	for _, tc := range []struct {
		v    any
		want string
	}{
		// The example: this printed {round_robin 0 0  0 false {false 0s 0s 0s 0s 0} true}.
		{resources.LBPolicy{Kind: resources.LBRoundRobin, WRRLocality: true}, "round_robin in wrr_locality"},
		{resources.LBPolicy{Kind: resources.LBRoundRobin}, "round_robin"},
		{resources.LBPolicy{Kind: resources.LBRingHash, MinRingSize: 1024, MaxRingSize: 8388608}, "ring_hash{min_ring_size=1024 max_ring_size=8388608}"},
		{resources.LBPolicy{Kind: resources.LBRingHash, MinRingSize: 1, MaxRingSize: 2, RequestHashHeader: "x-user"}, `ring_hash{min_ring_size=1 max_ring_size=2 request_hash_header="x-user"}`},
		{resources.LBPolicy{Kind: resources.LBLeastRequest, ChoiceCount: 3, WRRLocality: true}, "least_request{choice_count=3} in wrr_locality"},
		{resources.LBPolicy{Kind: resources.LBPickFirst}, "pick_first"},
		{resources.LBPolicy{Kind: resources.LBPickFirst, ShuffleAddressList: true}, "pick_first{shuffle_address_list=true}"},
		{resources.LBPolicy{Kind: resources.LBWeightedRoundRobin, WRR: wrr}, "weighted_round_robin{blackout_period=10s weight_expiration_period=3m0s weight_update_period=1s error_utilization_penalty=1.5}"},
		{resources.LBPolicy{Kind: 9}, "LBPolicyKind(9)"},
		{oob, "blackout_period=10s weight_expiration_period=3m0s weight_update_period=1s error_utilization_penalty=1.5 enable_oob_load_report=true oob_reporting_period=5s"},
		{resources.Endpoint{Addresses: []string{"10.0.0.1:8080"}, HealthStatus: resources.HealthStatusHealthy, Weight: 1}, "10.0.0.1:8080 HEALTHY"},
		{
			resources.Endpoint{
				Addresses:    []string{"10.0.0.2:8080", "[2001:db8::2]:8080"},
				HealthStatus: resources.HealthStatusDraining, Weight: 3, Hostname: "b-2", ProxyAddress: "10.0.0.9:3128",
			},
			`10.0.0.2:8080,[2001:db8::2]:8080 DRAINING weight=3 hostname="b-2" proxy=10.0.0.9:3128`,
		},
		{resources.Endpoint{Weight: 1}, "(no address) UNKNOWN"},
		{resources.DropOverload{Category: "throttle", PerMillion: 25000}, `"throttle" 2.5%`},
		{resources.DropOverload{Category: "all", PerMillion: 1000000}, `"all" 100%`},
	} {
		if got := fmt.Sprint(tc.v); got != tc.want {
			t.Errorf("fmt.Sprint(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestDecodedLBPolicyString prints the policy of a decoded legacy
// ROUND_ROBIN cluster, which gRPC runs under wrr_locality.
func TestDecodedLBPolicyString(t *testing.T) {
	c := decodeClusterJSON(t, `{"name": "c", "type": "EDS", "eds_cluster_config": {"eds_config": {"ads": {}}}}`)
	if got, want := fmt.Sprint(c.LBPolicy), "round_robin in wrr_locality"; got != want {
		t.Errorf("LBPolicy printed %q, want %q", got, want)
	}
}

func decodeClusterJSON(t *testing.T, js string) *resources.Cluster {
	t.Helper()
	m := new(clusterv3.Cluster)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatal(err)
	}
	body, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := resources.ClusterType.DecodeTyped(body)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return c
}
