package grpcparity

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

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// lbPolicies is a load_balancing_policy listing ms in order.
func lbPolicies(ms ...proto.Message) *clusterv3.LoadBalancingPolicy {
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

// wrrOver wraps child in n wrr_locality policies.
func wrrOver(n int, child proto.Message) proto.Message {
	for range n {
		child = &wrrlocalityv3.WrrLocality{EndpointPickingPolicy: lbPolicies(child)}
	}
	return child
}

func grpcPolicy(name, js string) *xdstypev3.TypedStruct {
	s := new(structpb.Struct)
	if err := protojson.Unmarshal([]byte(js), s); err != nil {
		panic(err)
	}
	return &xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/" + name, Value: s}
}

// withPolicy is cluster "c" with load_balancing_policy listing ms.
func withPolicy(ms ...proto.Message) *clusterv3.Cluster {
	c := testutils.Cluster("c", "")
	c.LoadBalancingPolicy = lbPolicies(ms...)
	return c
}

func withOutlier(od *clusterv3.OutlierDetection) *clusterv3.Cluster {
	c := testutils.Cluster("c", "")
	c.OutlierDetection = od
	return c
}

// TestClusterVerdicts: gRFC A52's load balancing policies and A50's
// outlier detection.
func TestClusterVerdicts(t *testing.T) {
	xx := ringhashv3.RingHash_XX_HASH
	unknownStruct := &xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/myorg.ThisTypeDoesNotExist"}
	tests := []struct {
		name    string
		c       *clusterv3.Cluster
		differs string
	}{
		{name: "legacy round robin", c: testutils.Cluster("c", "")},
		{name: "round_robin", c: withPolicy(&roundrobinv3.RoundRobin{})},
		{name: "ring_hash xx", c: withPolicy(&ringhashv3.RingHash{HashFunction: xx})},
		{name: "ring_hash default hash", c: withPolicy(&ringhashv3.RingHash{})},
		{name: "ring_hash murmur", c: withPolicy(&ringhashv3.RingHash{HashFunction: ringhashv3.RingHash_MURMUR_HASH_2})},
		{name: "ring_hash min above max", c: withPolicy(&ringhashv3.RingHash{HashFunction: xx, MinimumRingSize: wrapperspb.UInt64(5), MaximumRingSize: wrapperspb.UInt64(4)})},
		{name: "ring_hash zero min above max", c: withPolicy(&ringhashv3.RingHash{HashFunction: xx, MinimumRingSize: wrapperspb.UInt64(0), MaximumRingSize: wrapperspb.UInt64(4)})},
		{name: "ring_hash max above limit", c: withPolicy(&ringhashv3.RingHash{HashFunction: xx, MaximumRingSize: wrapperspb.UInt64(8<<20 + 1)})},
		{name: "least_request", c: withPolicy(&leastrequestv3.LeastRequest{})},
		{name: "least_request choice count 1", c: withPolicy(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(1)})},
		{name: "least_request choice count 11", c: withPolicy(&leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(11)})},
		{name: "pick_first", c: withPolicy(&pickfirstv3.PickFirst{ShuffleAddressList: true})},
		{name: "client_side_weighted_round_robin", c: withPolicy(&cswrrv3.ClientSideWeightedRoundRobin{BlackoutPeriod: durationpb.New(time.Second)})},
		{name: "client_side_weighted_round_robin negative penalty", c: withPolicy(&cswrrv3.ClientSideWeightedRoundRobin{ErrorUtilizationPenalty: wrapperspb.Float(-1)})},
		{name: "wrr_locality round_robin", c: withPolicy(wrrOver(1, &roundrobinv3.RoundRobin{}))},
		{name: "wrr_locality pick_first", c: withPolicy(wrrOver(1, &pickfirstv3.PickFirst{}))},
		{name: "wrr_locality nothing supported", c: withPolicy(wrrOver(1, unknownStruct), &roundrobinv3.RoundRobin{})},
		{name: "wrr_locality bad child", c: withPolicy(wrrOver(1, &leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(1)}))},
		{name: "16 nested lists", c: withPolicy(wrrOver(15, &roundrobinv3.RoundRobin{}))},
		{name: "17 nested lists", c: withPolicy(wrrOver(16, &roundrobinv3.RoundRobin{}))},
		{name: "first supported wins", c: withPolicy(unknownStruct, &pickfirstv3.PickFirst{}, &ringhashv3.RingHash{})},
		{name: "bad supported policy is not skipped", c: withPolicy(&ringhashv3.RingHash{}, &roundrobinv3.RoundRobin{})},
		{name: "none supported", c: withPolicy(unknownStruct)},
		{name: "empty list", c: withPolicy()},
		{name: "TypedStruct round_robin", c: withPolicy(grpcPolicy("round_robin", `{}`))},
		{name: "udpa TypedStruct pick_first", c: withPolicy(toAny(&udpatypev1.TypedStruct{TypeUrl: "pick_first"}))},
		{name: "TypedStruct ring_hash", c: withPolicy(grpcPolicy("ring_hash_experimental", `{"minRingSize": 10, "maxRingSize": 20, "requestHashHeader": "x-user"}`))},
		{name: "TypedStruct ring_hash binary header", c: withPolicy(grpcPolicy("ring_hash_experimental", `{"requestHashHeader": "x-user-bin"}`))},
		{name: "TypedStruct ring_hash bad size", c: withPolicy(grpcPolicy("ring_hash_experimental", `{"minRingSize": "big"}`))},
		{name: "TypedStruct least_request choice count 1", c: withPolicy(grpcPolicy("least_request_experimental", `{"choiceCount": 1}`))},
		{name: "TypedStruct weighted_round_robin", c: withPolicy(grpcPolicy("weighted_round_robin", `{"blackoutPeriod": "1.5s"}`))},
		{name: "TypedStruct xds_wrr_locality", c: withPolicy(grpcPolicy("xds_wrr_locality_experimental", `{"childPolicy": [{"acme": {}}, {"pick_first": {}}]}`))},
		{name: "TypedStruct xds_wrr_locality nothing supported", c: withPolicy(grpcPolicy("xds_wrr_locality_experimental", `{"childPolicy": [{"acme": {}}]}`))},
		{name: "TypedStruct xds_wrr_locality without child", c: withPolicy(grpcPolicy("xds_wrr_locality_experimental", `{}`))},
		{name: "TypedStruct xds_wrr_locality bad child", c: withPolicy(grpcPolicy("xds_wrr_locality_experimental", `{"childPolicy": [{"least_request_experimental": {"choiceCount": 1}}]}`))},
		{
			name:    "TypedStruct naming a policy goxds lacks",
			c:       withPolicy(grpcPolicy("weighted_target_experimental", `{"targets": {}}`)),
			differs: "grpc-go uses any policy of its registry; goxds implements its policies itself and skips the name",
		},
		{
			name: "load_balancing_policy over a bad lb_policy",
			c: func() *clusterv3.Cluster {
				c := withPolicy(&roundrobinv3.RoundRobin{})
				c.LbPolicy = clusterv3.Cluster_MAGLEV
				return c
			}(),
			differs: "grpc-go judges lb_policy before it sees load_balancing_policy; gRFC A52 says the latter wins, " +
				"and goxds ignores lb_policy when it is set",
		},

		{name: "outlier detection defaults", c: withOutlier(&clusterv3.OutlierDetection{})},
		{name: "outlier detection set", c: withOutlier(&clusterv3.OutlierDetection{Interval: durationpb.New(time.Second),
			EnforcingFailurePercentage: wrapperspb.UInt32(100), MaxEjectionPercent: wrapperspb.UInt32(100)})},
		{name: "outlier detection negative interval", c: withOutlier(&clusterv3.OutlierDetection{Interval: durationpb.New(-time.Second)})},
		{name: "outlier detection bad base ejection time", c: withOutlier(&clusterv3.OutlierDetection{BaseEjectionTime: &durationpb.Duration{Nanos: 2e9}})},
		{name: "outlier detection max_ejection_percent 101", c: withOutlier(&clusterv3.OutlierDetection{MaxEjectionPercent: wrapperspb.UInt32(101)})},
		{name: "outlier detection failure_percentage_threshold 101", c: withOutlier(&clusterv3.OutlierDetection{FailurePercentageThreshold: wrapperspb.UInt32(101)})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := resources.ClusterType.DecodeTyped(nil, toAny(tt.c))
			nack := grpcGoClusterVerdict(t, tt.c)
			if tt.differs != "" {
				if (err != nil) == (nack != "") {
					t.Errorf("known difference gone: goxds %v, grpc-go %q; drop the note: %s", err, nack, tt.differs)
				}
				return
			}
			t.Logf("goxds %v; grpc-go %q", err, nack)
			compare(t, err, nack)
		})
	}
}

// grpcGoClusterVerdict serves grpc-go's xDS client a listener and a route
// configuration sending everything to cluster c, then c, and returns the
// error_detail of its reply to c: "" for an ACK.
func grpcGoClusterVerdict(t *testing.T, c *clusterv3.Cluster) string {
	t.Helper()
	ctx, s := grpcGoClient(t)
	grpcGoRoutesToCluster(ctx, t, s)
	return exchange(ctx, t, s, resources.ClusterTypeURL, c.GetName(), c)
}
