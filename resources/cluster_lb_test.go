package resources

import (
	"testing"
	"time"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
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

// nestWRR wraps child in n wrr_locality policies.
func nestWRR(n int, child proto.Message) proto.Message {
	for range n {
		child = wrr(child)
	}
	return child
}

func typedStruct(url, js string) *anypb.Any {
	s := new(structpb.Struct)
	if err := protojson.Unmarshal([]byte(js), s); err != nil {
		panic(err)
	}
	return toAny(&xdstypev3.TypedStruct{TypeUrl: url, Value: s})
}

// The verdicts are gRPC's (grpc-go 1.85's xDS LB policy registry and the
// policies' ParseConfig), case for case: the first supported policy is
// used, unsupported ones are skipped, a supported one with a bad config
// or no supported one at all makes the Cluster invalid.
func TestDecodeClusterLoadBalancingPolicy(t *testing.T) {
	const p = "load_balancing_policy.policies[0].typed_extension_config.typed_config"
	unknownStruct := toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/myorg.ThisTypeDoesNotExist"})
	xx := ringhashv3.RingHash_XX_HASH
	ringDefaults := LBPolicy{Kind: LBRingHash, MinRingSize: DefaultMinRingSize, MaxRingSize: DefaultMaxRingSize}
	wrrDefaults := LBPolicy{Kind: LBWeightedRoundRobin, WRR: WRRConfig{BlackoutPeriod: 10 * time.Second,
		WeightExpirationPeriod: 3 * time.Minute, WeightUpdatePeriod: time.Second, ErrorUtilizationPenalty: 1}}
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
		{name: "ring hash xx", lbp: policies(&ringhashv3.RingHash{HashFunction: xx}), want: ringDefaults},
		{name: "ring hash xx sizes", lbp: policies(&ringhashv3.RingHash{HashFunction: xx,
			MinimumRingSize: wrapperspb.UInt64(4), MaximumRingSize: wrapperspb.UInt64(16)}),
			want: LBPolicy{Kind: LBRingHash, MinRingSize: 4, MaxRingSize: 16}},
		{name: "ring hash zero sizes are defaults", lbp: policies(&ringhashv3.RingHash{HashFunction: xx,
			MinimumRingSize: wrapperspb.UInt64(0), MaximumRingSize: wrapperspb.UInt64(0)}), want: ringDefaults},
		{name: "ring hash default hash function", lbp: policies(&ringhashv3.RingHash{}),
			wantErr: p + ".hash_function: DEFAULT_HASH is not supported"},
		{name: "ring hash murmur", lbp: policies(&ringhashv3.RingHash{HashFunction: ringhashv3.RingHash_MURMUR_HASH_2}),
			wantErr: p + ".hash_function: MURMUR_HASH_2 is not supported"},
		{name: "ring hash min above max", lbp: policies(&ringhashv3.RingHash{HashFunction: xx, MinimumRingSize: wrapperspb.UInt64(5), MaximumRingSize: wrapperspb.UInt64(4)}),
			wantErr: p + ".minimum_ring_size: 5 is above maximum_ring_size 4"},
		{name: "ring hash max above limit", lbp: policies(&ringhashv3.RingHash{HashFunction: xx, MaximumRingSize: wrapperspb.UInt64(MaxRingSizeLimit + 1)}),
			wantErr: p + ".maximum_ring_size: 8388609 is above the limit"},
		{name: "least request", lbp: policies(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(3)}),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 3}},
		{name: "least request default", lbp: policies(&leastrequestv3.LeastRequest{}),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 2}},
		{name: "least request choice count capped", lbp: policies(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(11)}),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 10}},
		{name: "least request choice count 1", lbp: policies(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(1)}),
			wantErr: p + ".choice_count: must be at least 2, got 1"},
		{name: "pick first", lbp: policies(&pickfirstv3.PickFirst{}), want: LBPolicy{Kind: LBPickFirst}},
		{name: "pick first shuffled", lbp: policies(&pickfirstv3.PickFirst{ShuffleAddressList: true}),
			want: LBPolicy{Kind: LBPickFirst, ShuffleAddressList: true}},
		{name: "weighted round robin defaults", lbp: policies(&cswrrv3.ClientSideWeightedRoundRobin{}), want: wrrDefaults},
		{name: "weighted round robin populated", lbp: policies(&cswrrv3.ClientSideWeightedRoundRobin{
			EnableOobLoadReport: wrapperspb.Bool(true), OobReportingPeriod: durationpb.New(2 * time.Second),
			BlackoutPeriod: durationpb.New(time.Second), WeightExpirationPeriod: durationpb.New(time.Minute),
			WeightUpdatePeriod: durationpb.New(time.Millisecond), ErrorUtilizationPenalty: wrapperspb.Float(0.5)}),
			want: LBPolicy{Kind: LBWeightedRoundRobin, WRR: WRRConfig{EnableOOBLoadReport: true, OOBReportingPeriod: 2 * time.Second,
				BlackoutPeriod: time.Second, WeightExpirationPeriod: time.Minute, WeightUpdatePeriod: 100 * time.Millisecond, ErrorUtilizationPenalty: 0.5}}},
		{name: "weighted round robin oob default period", lbp: policies(&cswrrv3.ClientSideWeightedRoundRobin{EnableOobLoadReport: wrapperspb.Bool(true)}),
			want: LBPolicy{Kind: LBWeightedRoundRobin, WRR: WRRConfig{EnableOOBLoadReport: true, OOBReportingPeriod: 10 * time.Second,
				BlackoutPeriod: 10 * time.Second, WeightExpirationPeriod: 3 * time.Minute, WeightUpdatePeriod: time.Second, ErrorUtilizationPenalty: 1}}},
		{name: "weighted round robin oob period without oob", lbp: policies(&cswrrv3.ClientSideWeightedRoundRobin{OobReportingPeriod: durationpb.New(time.Second)}),
			want: wrrDefaults},
		{name: "weighted round robin negative penalty", lbp: policies(&cswrrv3.ClientSideWeightedRoundRobin{ErrorUtilizationPenalty: wrapperspb.Float(-1)}),
			wantErr: p + ".error_utilization_penalty: must not be negative"},
		{name: "weighted round robin bad duration", lbp: policies(&cswrrv3.ClientSideWeightedRoundRobin{BlackoutPeriod: &durationpb.Duration{Nanos: 2e9}}),
			wantErr: p + ".blackout_period: invalid duration"},
		{name: "wrr locality round robin", lbp: policies(wrr(&roundrobinv3.RoundRobin{})),
			want: LBPolicy{Kind: LBRoundRobin, WRRLocality: true}},
		{name: "wrr locality least request", lbp: policies(wrr(&leastrequestv3.LeastRequest{})),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 2, WRRLocality: true}},
		{name: "wrr locality pick first", lbp: policies(wrr(&pickfirstv3.PickFirst{})),
			want: LBPolicy{Kind: LBPickFirst, WRRLocality: true}},
		{name: "wrr locality skips unsupported", lbp: policies(wrr(unknownStruct, &pickfirstv3.PickFirst{})),
			want: LBPolicy{Kind: LBPickFirst, WRRLocality: true}},
		{name: "wrr locality with a bad child", lbp: policies(wrr(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(0)})),
			wantErr: p + ".endpoint_picking_policy.policies[0].typed_extension_config.typed_config.choice_count: must be at least 2"},
		{name: "wrr locality without child", lbp: policies(wrr()),
			wantErr: p + ".endpoint_picking_policy.policies: must not be empty"},
		{name: "wrr locality with no supported child", lbp: policies(wrr(unknownStruct), &roundrobinv3.RoundRobin{}),
			wantErr: p + ".endpoint_picking_policy.policies: no supported policy among [xds.type.v3.TypedStruct]"},
		{name: "wrr locality inside wrr locality", lbp: policies(wrr(wrr(&roundrobinv3.RoundRobin{}))),
			want: LBPolicy{Kind: LBRoundRobin, WRRLocality: true}},
		// 16 nested lists are allowed, 17 are not (gRPC's on-the-boundary
		// and exceeds-by-one cases).
		{name: "16 nested lists", lbp: policies(nestWRR(15, &roundrobinv3.RoundRobin{})),
			want: LBPolicy{Kind: LBRoundRobin, WRRLocality: true}},
		{name: "17 nested lists", lbp: policies(nestWRR(16, &roundrobinv3.RoundRobin{})),
			wantErr: "policies: more than 16 nested policy lists"},
		{name: "first supported wins", lbp: policies(unknownStruct, &ringhashv3.RingHash{HashFunction: xx}, &roundrobinv3.RoundRobin{}),
			want: ringDefaults},
		{name: "pick first before round robin", lbp: policies(&pickfirstv3.PickFirst{}, &roundrobinv3.RoundRobin{}),
			want: LBPolicy{Kind: LBPickFirst}},
		{name: "bad config is not skipped", lbp: policies(&ringhashv3.RingHash{}, &roundrobinv3.RoundRobin{}),
			wantErr: p + ".hash_function: DEFAULT_HASH is not supported"},
		{name: "none supported", lbp: policies(unknownStruct, toAny(&clusterv3.Cluster{})),
			wantErr: "load_balancing_policy.policies: no supported policy among [xds.type.v3.TypedStruct, envoy.config.cluster.v3.Cluster]"},
		{name: "empty", lbp: policies(), wantErr: "load_balancing_policy.policies: must not be empty"},

		// TypedStruct naming a gRPC policy, its Struct the JSON config.
		{name: "custom round robin", lbp: policies(typedStruct("type.googleapis.com/round_robin", `{}`)),
			want: LBPolicy{Kind: LBRoundRobin}},
		{name: "custom udpa struct", lbp: policies(toAny(&udpatypev1.TypedStruct{TypeUrl: "round_robin"})),
			want: LBPolicy{Kind: LBRoundRobin}},
		{name: "custom pick first", lbp: policies(typedStruct("pick_first", `{"shuffleAddressList": true}`)),
			want: LBPolicy{Kind: LBPickFirst, ShuffleAddressList: true}},
		{name: "custom ring hash", lbp: policies(typedStruct("x/ring_hash_experimental", `{"minRingSize": 10, "maxRingSize": 20, "requestHashHeader": "X-User"}`)),
			want: LBPolicy{Kind: LBRingHash, MinRingSize: 10, MaxRingSize: 20, RequestHashHeader: "x-user"}},
		{name: "custom ring hash binary header", lbp: policies(typedStruct("ring_hash_experimental", `{"requestHashHeader": "x-key-bin"}`)),
			wantErr: p + ".value.requestHashHeader: \"x-key-bin\": a binary header cannot be hashed"},
		{name: "custom ring hash bad size", lbp: policies(typedStruct("ring_hash_experimental", `{"minRingSize": "big"}`)),
			wantErr: p + ".value: ring_hash_experimental config: json: cannot unmarshal string"},
		{name: "custom least request", lbp: policies(typedStruct("least_request_experimental", `{"choiceCount": 4}`)),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 4}},
		{name: "custom least request choice count 1", lbp: policies(typedStruct("least_request_experimental", `{"choiceCount": 1}`)),
			wantErr: p + ".value.choiceCount: must be at least 2"},
		{name: "custom weighted round robin", lbp: policies(typedStruct("weighted_round_robin", `{"blackoutPeriod": "1.5s", "errorUtilizationPenalty": 2}`)),
			want: LBPolicy{Kind: LBWeightedRoundRobin, WRR: WRRConfig{BlackoutPeriod: 1500 * time.Millisecond,
				WeightExpirationPeriod: 3 * time.Minute, WeightUpdatePeriod: time.Second, ErrorUtilizationPenalty: 2}}},
		{name: "custom weighted round robin bad duration", lbp: policies(typedStruct("weighted_round_robin", `{"blackoutPeriod": "1m"}`)),
			wantErr: p + ".value.blackoutPeriod: \"1m\" is not a duration"},
		{name: "custom wrr locality", lbp: policies(typedStruct("xds_wrr_locality_experimental", `{"childPolicy": [{"acme": {}}, {"pick_first": {}}, {"round_robin": {}}]}`)),
			want: LBPolicy{Kind: LBPickFirst, WRRLocality: true}},
		{name: "custom wrr locality nested", lbp: policies(typedStruct("xds_wrr_locality_experimental", `{"childPolicy": [{"xds_wrr_locality_experimental": {"childPolicy": [{"least_request_experimental": {"choiceCount": 3}}]}}]}`)),
			want: LBPolicy{Kind: LBLeastRequest, ChoiceCount: 3, WRRLocality: true}},
		{name: "custom wrr locality without child", lbp: policies(typedStruct("xds_wrr_locality_experimental", `{}`)),
			wantErr: p + ".value.childPolicy: must be set"},
		{name: "custom wrr locality nothing supported", lbp: policies(typedStruct("xds_wrr_locality_experimental", `{"childPolicy": [{"acme": {}}]}`)),
			wantErr: p + ".value.childPolicy: no supported policy among [acme]"},
		{name: "custom wrr locality bad child", lbp: policies(typedStruct("xds_wrr_locality_experimental", `{"childPolicy": [{"least_request_experimental": {"choiceCount": 1}}]}`)),
			wantErr: p + ".value.childPolicy[0].choiceCount: must be at least 2"},
		{name: "custom wrr locality two keys", lbp: policies(typedStruct("xds_wrr_locality_experimental", `{"childPolicy": [{"round_robin": {}, "pick_first": {}}]}`)),
			wantErr: p + ".value.childPolicy[0]: has 2 keys"},
		{name: "custom unknown skipped", lbp: policies(unknownStruct, typedStruct("pick_first", `{}`)),
			want: LBPolicy{Kind: LBPickFirst}},
		{name: "garbage typed struct", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + typedStructName, Value: []byte{0x0a}}),
			wantErr: p + ": "},

		{name: "garbage config", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + leastRequestName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage wrr locality", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + wrrLocalityName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage round robin", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + roundRobinName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage ring hash", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + ringHashName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage pick first", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + pickFirstName, Value: []byte{0x0a}}),
			wantErr: p + ": "},
		{name: "garbage weighted round robin", lbp: policies(&anypb.Any{TypeUrl: "type.googleapis.com/" + cswrrName, Value: []byte{0x0a}}),
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

// The legacy lb_policy maps as in gRPC: ROUND_ROBIN is wrr_locality over
// round_robin, RING_HASH and LEAST_REQUEST are not wrapped.
func TestDecodeClusterLegacyLBPolicy(t *testing.T) {
	for _, tc := range []struct {
		legacy clusterv3.Cluster_LbPolicy
		cfg    func(*clusterv3.Cluster)
		want   LBPolicy
	}{
		{clusterv3.Cluster_ROUND_ROBIN, nil, LBPolicy{Kind: LBRoundRobin, WRRLocality: true}},
		{clusterv3.Cluster_RING_HASH, nil, LBPolicy{Kind: LBRingHash, MinRingSize: DefaultMinRingSize, MaxRingSize: DefaultMaxRingSize}},
		{clusterv3.Cluster_LEAST_REQUEST, nil, LBPolicy{Kind: LBLeastRequest, ChoiceCount: 2}},
		{clusterv3.Cluster_LEAST_REQUEST, func(c *clusterv3.Cluster) {
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{ChoiceCount: wrapperspb.UInt32(50)}}
		}, LBPolicy{Kind: LBLeastRequest, ChoiceCount: 10}},
	} {
		in := edsCluster("c", "")
		in.LbPolicy = tc.legacy
		if tc.cfg != nil {
			tc.cfg(in)
		}
		_, c, err := decodeMsg(ClusterType, in)
		if err != nil || c.LBPolicy != tc.want {
			t.Errorf("lb_policy %v: %+v, %v; want %+v", tc.legacy, c.LBPolicy, err, tc.want)
		}
	}
}

func TestJSONDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1s": time.Second, "1.5s": 1500 * time.Millisecond, ".25s": 250 * time.Millisecond, "2.s": 2 * time.Second,
		"-1s": -time.Second, "+3s": 3 * time.Second, "0.000000001s": 1, "0s": 0,
	} {
		if got, err := jsonDuration(in); err != nil || got != want {
			t.Errorf("jsonDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1", "1m", "s", ".s", "1e3s", "0x1p-2s", "--1s", "1.2.3s", "1.0000000001s", "9999999999999s", "NaNs", " 1s"} {
		if got, err := jsonDuration(in); err == nil {
			t.Errorf("jsonDuration(%q) = %v, want an error", in, got)
		}
	}
}

func TestLBPolicyKindString(t *testing.T) {
	for k, want := range map[LBPolicyKind]string{LBRoundRobin: "round_robin", LBRingHash: "ring_hash", LBLeastRequest: "least_request", LBPickFirst: "pick_first", LBWeightedRoundRobin: "weighted_round_robin", 9: "LBPolicyKind(9)"} {
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
		pickFirstName:    &pickfirstv3.PickFirst{},
		cswrrName:        &cswrrv3.ClientSideWeightedRoundRobin{},
		typedStructName:  &xdstypev3.TypedStruct{},
	} {
		if got := string(m.ProtoReflect().Descriptor().FullName()); got != name {
			t.Errorf("constant %q, message %q", name, got)
		}
	}
}
