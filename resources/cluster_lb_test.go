package resources

import (
	"testing"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func policies(ms ...proto.Message) *clusterv3.LoadBalancingPolicy {
	lbp := &clusterv3.LoadBalancingPolicy{}
	for _, m := range ms {
		a, ok := m.(*anypb.Any)
		if !ok {
			a = toAny(m)
		}
		lbp.Policies = append(lbp.Policies, &clusterv3.LoadBalancingPolicy_Policy{
			TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: "p", TypedConfig: a},
		})
	}
	return lbp
}

func wrr(child ...proto.Message) *wrrlocalityv3.WrrLocality {
	return &wrrlocalityv3.WrrLocality{EndpointPickingPolicy: policies(child...)}
}

func TestDecodeClusterLoadBalancingPolicy(t *testing.T) {
	const p = "load_balancing_policy.policies[0].typed_extension_config.typed_config"
	typedStruct := toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/acme.CustomLB"})
	tests := []struct {
		name    string
		lbp     *clusterv3.LoadBalancingPolicy
		legacy  clusterv3.Cluster_LbPolicy
		want    LBPolicy
		wantErr string
	}{
		{name: "round robin", lbp: policies(&roundrobinv3.RoundRobin{}), want: LBPolicy{Kind: LBRoundRobin}},
		{name: "wins over lb_policy", lbp: policies(&roundrobinv3.RoundRobin{}), legacy: clusterv3.Cluster_MAGLEV,
			want: LBPolicy{Kind: LBRoundRobin}},
		{name: "ring hash defaults", lbp: policies(&ringhashv3.RingHash{}),
			want: LBPolicy{Kind: LBRingHash, MinRingSize: DefaultMinRingSize, MaxRingSize: DefaultMaxRingSize}},
		{name: "ring hash xx sizes", lbp: policies(&ringhashv3.RingHash{HashFunction: ringhashv3.RingHash_XX_HASH,
			MinimumRingSize: wrapperspb.UInt64(4), MaximumRingSize: wrapperspb.UInt64(16)}),
			want: LBPolicy{Kind: LBRingHash, MinRingSize: 4, MaxRingSize: 16}},
		{name: "ring hash murmur", lbp: policies(&ringhashv3.RingHash{HashFunction: ringhashv3.RingHash_MURMUR_HASH_2}),
			wantErr: p + ".hash_function: MURMUR_HASH_2 is not supported"},
		{name: "ring hash min above max", lbp: policies(&ringhashv3.RingHash{MinimumRingSize: wrapperspb.UInt64(5), MaximumRingSize: wrapperspb.UInt64(4)}),
			wantErr: p + ".minimum_ring_size: 5 is above maximum_ring_size 4"},
		{name: "ring hash max above limit", lbp: policies(&ringhashv3.RingHash{MaximumRingSize: wrapperspb.UInt64(MaxRingSizeLimit + 1)}),
			wantErr: p + ".maximum_ring_size: 8388609 is above the limit"},
		{name: "least request", lbp: policies(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(3)}),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 3}},
		{name: "least request default", lbp: policies(&leastrequestv3.LeastRequest{}),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 2}},
		{name: "least request choice count 1", lbp: policies(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(1)}),
			wantErr: p + ".choice_count: must be at least 2, got 1"},
		{name: "wrr locality round robin", lbp: policies(wrr(&roundrobinv3.RoundRobin{})),
			want: LBPolicy{Kind: LBRoundRobin, WRRLocality: true}},
		{name: "wrr locality least request", lbp: policies(wrr(&leastrequestv3.LeastRequest{})),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 2, WRRLocality: true}},
		{name: "wrr locality with a bad child", lbp: policies(wrr(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(0)})),
			wantErr: p + ".endpoint_picking_policy.policies[0].typed_extension_config.typed_config.choice_count: must be at least 2"},
		{name: "wrr locality without child", lbp: policies(wrr()),
			wantErr: p + ".endpoint_picking_policy.policies: must not be empty"},
		{name: "wrr locality inside wrr locality", lbp: policies(wrr(wrr(&roundrobinv3.RoundRobin{}))),
			wantErr: p + ".endpoint_picking_policy.policies: no supported policy among [" + wrrLocalityName + "]"},
		{name: "first supported wins", lbp: policies(typedStruct, &pickfirstv3.PickFirst{}, &ringhashv3.RingHash{}, &roundrobinv3.RoundRobin{}),
			want: LBPolicy{Kind: LBRingHash, MinRingSize: DefaultMinRingSize, MaxRingSize: DefaultMaxRingSize}},
		{name: "none supported", lbp: policies(typedStruct, &pickfirstv3.PickFirst{}),
			wantErr: "load_balancing_policy.policies: no supported policy among [xds.type.v3.TypedStruct, envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst]"},
		{name: "empty", lbp: policies(), wantErr: "load_balancing_policy.policies: must not be empty"},
		{name: "garbage config", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + leastRequestName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage wrr locality", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + wrrLocalityName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage round robin", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + roundRobinName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage ring hash", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + ringHashName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := edsCluster("c", "")
			in.LoadBalancingPolicy = tt.lbp
			in.LbPolicy = tt.legacy
			_, c, err := decodeMsg(ClusterType, in)
			checkErr(t, err, tt.wantErr)
			if err == nil && c.LBPolicy != tt.want {
				t.Errorf("LBPolicy = %+v, want %+v", c.LBPolicy, tt.want)
			}
		})
	}
}

func TestLBPolicyKindString(t *testing.T) {
	for k, want := range map[LBPolicyKind]string{LBRoundRobin: "round_robin", LBRingHash: "ring_hash", LBLeastRequest: "least_request", 4: "LBPolicyKind(4)"} {
		if k.String() != want {
			t.Errorf("String() = %q, want %q", k.String(), want)
		}
	}
}

// TestEmbeddedTypeNames checks the names this package compares Any type
// URLs with against the generated messages.
func TestEmbeddedTypeNames(t *testing.T) {
	for name, m := range map[string]proto.Message{
		roundRobinName:   &roundrobinv3.RoundRobin{},
		ringHashName:     &ringhashv3.RingHash{},
		leastRequestName: &leastrequestv3.LeastRequest{},
		wrrLocalityName:  &wrrlocalityv3.WrrLocality{},
		typedStructName:  &xdstypev3.TypedStruct{},
	} {
		if got := string(m.ProtoReflect().Descriptor().FullName()); got != name {
			t.Errorf("constant %q, message %q", name, got)
		}
	}
}
