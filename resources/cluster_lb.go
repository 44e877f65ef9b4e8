package resources

import (
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Full proto names of the load balancing policy extensions understood in
// a Cluster's load_balancing_policy.
const (
	roundRobinName   = "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin"
	ringHashName     = "envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash"
	leastRequestName = "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest"
	wrrLocalityName  = "envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality"
)

// Ring hash and least request defaults and bounds (gRFC A42, A48).
const (
	DefaultMinRingSize        = 1024
	DefaultMaxRingSize        = 8 * 1024 * 1024
	MaxRingSizeLimit          = 8 * 1024 * 1024
	DefaultChoiceCount uint32 = 2
)

// LBPolicyKind names a cluster's load balancing policy.
type LBPolicyKind int

const (
	// LBRoundRobin picks endpoints in turn.
	LBRoundRobin LBPolicyKind = iota
	// LBRingHash hashes requests onto a ring of endpoints.
	LBRingHash
	// LBLeastRequest picks the least loaded of ChoiceCount random endpoints.
	LBLeastRequest
)

// String returns the LBPolicyKind as text, for logs and errors.
func (k LBPolicyKind) String() string {
	switch k {
	case LBRoundRobin:
		return "round_robin"
	case LBRingHash:
		return "ring_hash"
	case LBLeastRequest:
		return "least_request"
	}
	return "LBPolicyKind(" + strconv.Itoa(int(k)) + ")"
}

// LBPolicy is a cluster's validated load balancing policy, from lb_policy
// or, when set, load_balancing_policy (which wins, as gRFC A52 says).
type LBPolicy struct {
	Kind LBPolicyKind
	// MinRingSize and MaxRingSize bound the ring of LBRingHash, with
	// MinRingSize <= MaxRingSize <= MaxRingSizeLimit.
	MinRingSize, MaxRingSize uint64
	// ChoiceCount is LBLeastRequest's number of candidates, at least 2.
	ChoiceCount uint32
	// WRRLocality reports that load_balancing_policy wrapped the policy in
	// wrr_locality: localities are picked by weight, then the policy picks
	// an endpoint within the locality. (gRPC treats the legacy ROUND_ROBIN
	// the same way.)
	WRRLocality bool
}

func lbPolicyOf(m *clusterv3.Cluster) (LBPolicy, error) {
	if lbp := m.GetLoadBalancingPolicy(); lbp != nil {
		p, err := lbPolicyFromExtensions(lbp, false)
		if err != nil {
			return LBPolicy{}, at("load_balancing_policy", err)
		}
		return p, nil
	}
	switch p := m.GetLbPolicy(); p {
	case clusterv3.Cluster_ROUND_ROBIN:
		return LBPolicy{Kind: LBRoundRobin}, nil
	case clusterv3.Cluster_RING_HASH:
		rh := m.GetRingHashLbConfig()
		if hf := rh.GetHashFunction(); hf != clusterv3.Cluster_RingHashLbConfig_XX_HASH {
			return LBPolicy{}, fieldErrorf("ring_hash_lb_config.hash_function", "%v is not supported (want XX_HASH)", hf)
		}
		pol, err := ringHashPolicy(rh.GetMinimumRingSize(), rh.GetMaximumRingSize())
		if err != nil {
			return LBPolicy{}, at("ring_hash_lb_config", err)
		}
		return pol, nil
	case clusterv3.Cluster_LEAST_REQUEST:
		pol, err := leastRequestPolicy(m.GetLeastRequestLbConfig().GetChoiceCount())
		if err != nil {
			return LBPolicy{}, at("least_request_lb_config", err)
		}
		return pol, nil
	case clusterv3.Cluster_LOAD_BALANCING_POLICY_CONFIG:
		return LBPolicy{}, fieldErrorf("load_balancing_policy", "missing (lb_policy is LOAD_BALANCING_POLICY_CONFIG)")
	default:
		return LBPolicy{}, fieldErrorf("lb_policy", "%v is not supported (want ROUND_ROBIN, RING_HASH or LEAST_REQUEST)", p)
	}
}

func ringHashPolicy(minSize, maxSize *wrapperspb.UInt64Value) (LBPolicy, error) {
	p := LBPolicy{Kind: LBRingHash, MinRingSize: DefaultMinRingSize, MaxRingSize: DefaultMaxRingSize}
	if minSize != nil {
		p.MinRingSize = minSize.GetValue()
	}
	if maxSize != nil {
		p.MaxRingSize = maxSize.GetValue()
	}
	switch {
	case p.MaxRingSize > MaxRingSizeLimit:
		return LBPolicy{}, fieldErrorf("maximum_ring_size", "%d is above the limit %d", p.MaxRingSize, MaxRingSizeLimit)
	case p.MinRingSize > p.MaxRingSize:
		return LBPolicy{}, fieldErrorf("minimum_ring_size", "%d is above maximum_ring_size %d", p.MinRingSize, p.MaxRingSize)
	}
	return p, nil
}

func leastRequestPolicy(choiceCount *wrapperspb.UInt32Value) (LBPolicy, error) {
	p := LBPolicy{Kind: LBLeastRequest, ChoiceCount: DefaultChoiceCount}
	if choiceCount != nil {
		p.ChoiceCount = choiceCount.GetValue()
	}
	if p.ChoiceCount < 2 {
		return LBPolicy{}, fieldErrorf("choice_count", "must be at least 2, got %d", p.ChoiceCount)
	}
	return p, nil
}

// lbPolicyFromExtensions picks the first policy of the list that this
// package supports, as gRFC A52 says; a supported policy with a bad config
// is an error, not a reason to try the next. Inside wrr_locality another
// wrr_locality is not supported, which also bounds the recursion.
func lbPolicyFromExtensions(lbp *clusterv3.LoadBalancingPolicy, inWRRLocality bool) (LBPolicy, error) {
	var unsupported []string
	for i, p := range lbp.GetPolicies() {
		tc := p.GetTypedExtensionConfig().GetTypedConfig()
		path := index("policies", i) + ".typed_extension_config.typed_config"
		var (
			pol LBPolicy
			err error
		)
		switch {
		case anyIs(tc, roundRobinName):
			err = proto.Unmarshal(tc.GetValue(), new(roundrobinv3.RoundRobin))
			pol.Kind = LBRoundRobin
		case anyIs(tc, ringHashName):
			pol, err = ringHashExtension(tc.GetValue())
		case anyIs(tc, leastRequestName):
			lr := new(leastrequestv3.LeastRequest)
			if err = proto.Unmarshal(tc.GetValue(), lr); err == nil {
				pol, err = leastRequestPolicy(lr.GetChoiceCount())
			}
		case anyIs(tc, wrrLocalityName) && !inWRRLocality:
			w := new(wrrlocalityv3.WrrLocality)
			if err = proto.Unmarshal(tc.GetValue(), w); err != nil {
				break
			}
			if pol, err = lbPolicyFromExtensions(w.GetEndpointPickingPolicy(), true); err != nil {
				err = at("endpoint_picking_policy", err)
			}
			pol.WRRLocality = true
		default:
			unsupported = append(unsupported, anyName(tc))
			continue
		}
		if err != nil {
			return LBPolicy{}, at(path, err)
		}
		return pol, nil
	}
	if len(unsupported) == 0 {
		return LBPolicy{}, fieldErrorf("policies", "must not be empty")
	}
	return LBPolicy{}, fieldErrorf("policies", "no supported policy among [%s] (want round_robin, ring_hash, least_request, or wrr_locality wrapping one of them)", strings.Join(unsupported, ", "))
}

func ringHashExtension(b []byte) (LBPolicy, error) {
	rh := new(ringhashv3.RingHash)
	if err := proto.Unmarshal(b, rh); err != nil {
		return LBPolicy{}, err
	}
	switch hf := rh.GetHashFunction(); hf {
	case ringhashv3.RingHash_DEFAULT_HASH, ringhashv3.RingHash_XX_HASH:
	default:
		return LBPolicy{}, fieldErrorf("hash_function", "%v is not supported (want XX_HASH)", hf)
	}
	return ringHashPolicy(rh.GetMinimumRingSize(), rh.GetMaximumRingSize())
}
