package resources

import (
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Ring hash and least request defaults and bounds (gRFC A42, A48).
const (
	DefaultMinRingSize        = 1024
	DefaultMaxRingSize        = 8 * 1024 * 1024
	MaxRingSizeLimit          = 8 * 1024 * 1024
	DefaultChoiceCount uint32 = 2
	// MaxChoiceCount is the most candidates least_request draws: a larger
	// choice_count is lowered to it, as gRFC A48 says.
	MaxChoiceCount uint32 = 10
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
	// LBPickFirst sends every RPC to one endpoint: the first of the list
	// (shuffled when ShuffleAddressList is set) that connects, for as long
	// as it stays connected (gRFC A62).
	LBPickFirst
	// LBWeightedRoundRobin is client_side_weighted_round_robin (gRFC A58):
	// weights from ORCA load reports, WRR holding its parameters.
	LBWeightedRoundRobin
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
	case LBPickFirst:
		return "pick_first"
	case LBWeightedRoundRobin:
		return "weighted_round_robin"
	}
	return "LBPolicyKind(" + strconv.Itoa(int(k)) + ")"
}

// LBPolicy is a cluster's validated load balancing policy, from lb_policy
// or, when set, load_balancing_policy (which wins, as gRFC A52 says). It is
// comparable with ==.
type LBPolicy struct {
	Kind LBPolicyKind
	// MinRingSize and MaxRingSize bound the ring of LBRingHash, with
	// MinRingSize <= MaxRingSize <= MaxRingSizeLimit.
	MinRingSize, MaxRingSize uint64
	// RequestHashHeader is, for LBRingHash configured through a
	// TypedStruct as gRPC's ring_hash_experimental, the header whose value
	// hashes the RPC instead of the route's hash policies (gRFC A76);
	// lower case, never a "-bin" header. Empty: the route decides.
	RequestHashHeader string
	// ChoiceCount is LBLeastRequest's number of candidates, 2 to
	// MaxChoiceCount.
	ChoiceCount uint32
	// ShuffleAddressList is LBPickFirst's shuffle_address_list: the
	// endpoints are tried in a random order, drawn anew at each update and
	// weighted by the endpoints' weights (gRFC A62, A113).
	ShuffleAddressList bool
	// WRR holds LBWeightedRoundRobin's parameters.
	WRR WRRConfig
	// WRRLocality reports that load_balancing_policy wrapped the policy in
	// wrr_locality: localities are picked by weight, then the policy picks
	// an endpoint within the locality. (gRPC treats the legacy ROUND_ROBIN
	// the same way.)
	WRRLocality bool
}

// WRRConfig is client_side_weighted_round_robin's configuration with gRFC
// A58's defaults filled in.
type WRRConfig struct {
	// EnableOOBLoadReport asks for out-of-band ORCA reports every
	// OOBReportingPeriod (0 when disabled) instead of per-call ones.
	EnableOOBLoadReport bool
	OOBReportingPeriod  time.Duration
	// BlackoutPeriod is how long an endpoint's reports are ignored after it
	// connects; WeightExpirationPeriod how long a weight lasts without a
	// new report; WeightUpdatePeriod how often weights are recomputed (at
	// least 100ms).
	BlackoutPeriod, WeightExpirationPeriod, WeightUpdatePeriod time.Duration
	// ErrorUtilizationPenalty weighs errors per second against QPS; not
	// negative.
	ErrorUtilizationPenalty float64
}

// defaultWRR is WRRConfig's defaults, as gRFC A58 gives them.
var defaultWRR = WRRConfig{
	OOBReportingPeriod:      10 * time.Second, // used only with EnableOOBLoadReport
	BlackoutPeriod:          10 * time.Second,
	WeightExpirationPeriod:  3 * time.Minute,
	WeightUpdatePeriod:      time.Second,
	ErrorUtilizationPenalty: 1,
}

func lbPolicyOf(m *clusterv3.Cluster) (LBPolicy, error) {
	if lbp := m.GetLoadBalancingPolicy(); lbp != nil {
		p, err := lbPolicyFromExtensions(lbp, 0)
		if err != nil {
			return LBPolicy{}, at("load_balancing_policy", err)
		}
		return p, nil
	}
	switch p := m.GetLbPolicy(); p {
	case clusterv3.Cluster_ROUND_ROBIN:
		return LBPolicy{Kind: LBRoundRobin, WRRLocality: true}, nil
	case clusterv3.Cluster_RING_HASH:
		rh := m.GetRingHashLbConfig()
		if hf := rh.GetHashFunction(); hf != clusterv3.Cluster_RingHashLbConfig_XX_HASH {
			return LBPolicy{}, fieldErrorf("ring_hash_lb_config.hash_function", "%v is not supported (want XX_HASH)", hf)
		}
		pol, err := ringHashPolicy(rh.GetMinimumRingSize().GetValue(), rh.GetMaximumRingSize().GetValue())
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

// ringHashPolicy validates ring sizes as gRPC does: a size of 0 (or unset)
// takes the default, so an explicit minimum of 0 means 1024.
func ringHashPolicy(minSize, maxSize uint64) (LBPolicy, error) {
	switch {
	case minSize > MaxRingSizeLimit:
		return LBPolicy{}, fieldErrorf("minimum_ring_size", "%d is above the limit %d", minSize, MaxRingSizeLimit)
	case maxSize > MaxRingSizeLimit:
		return LBPolicy{}, fieldErrorf("maximum_ring_size", "%d is above the limit %d", maxSize, MaxRingSizeLimit)
	}
	p := LBPolicy{Kind: LBRingHash, MinRingSize: minSize, MaxRingSize: maxSize}
	if p.MinRingSize == 0 {
		p.MinRingSize = DefaultMinRingSize
	}
	if p.MaxRingSize == 0 {
		p.MaxRingSize = DefaultMaxRingSize
	}
	if p.MinRingSize > p.MaxRingSize {
		return LBPolicy{}, fieldErrorf("minimum_ring_size", "%d is above maximum_ring_size %d", p.MinRingSize, p.MaxRingSize)
	}
	return p, nil
}

func leastRequestPolicy(choiceCount *wrapperspb.UInt32Value) (LBPolicy, error) {
	n := DefaultChoiceCount
	if choiceCount != nil {
		n = choiceCount.GetValue()
	}
	return leastRequestChoices(n)
}

func leastRequestChoices(n uint32) (LBPolicy, error) {
	if n < 2 {
		return LBPolicy{}, fieldErrorf("choice_count", "must be at least 2, got %d", n)
	}
	return LBPolicy{Kind: LBLeastRequest, ChoiceCount: min(n, MaxChoiceCount)}, nil
}

// String returns the policy as one line for logs, status pages and
// fmt.Print: the kind, then in braces the parameters that kind uses, named
// as in the xDS configuration, and "in wrr_locality" when localities are
// picked by weight first. For example
//
//	round_robin in wrr_locality
//	ring_hash{min_ring_size=1024 max_ring_size=8388608}
//	least_request{choice_count=2}
//
// Without it a policy printed as its fields in order, which say nothing
// without the struct beside them.
func (p LBPolicy) String() string {
	var params string
	switch p.Kind {
	case LBRingHash:
		params = "min_ring_size=" + strconv.FormatUint(p.MinRingSize, 10) +
			" max_ring_size=" + strconv.FormatUint(p.MaxRingSize, 10)
		if p.RequestHashHeader != "" {
			params += " request_hash_header=" + strconv.Quote(p.RequestHashHeader)
		}
	case LBLeastRequest:
		params = "choice_count=" + strconv.FormatUint(uint64(p.ChoiceCount), 10)
	case LBPickFirst:
		if p.ShuffleAddressList {
			params = "shuffle_address_list=true"
		}
	case LBWeightedRoundRobin:
		params = p.WRR.String()
	}
	s := p.Kind.String()
	if params != "" {
		s += "{" + params + "}"
	}
	if p.WRRLocality {
		s += " in wrr_locality"
	}
	return s
}

// String returns the configuration as space-separated name=value pairs,
// named as in client_side_weighted_round_robin's configuration;
// oob_reporting_period only when out-of-band reports are enabled.
func (c WRRConfig) String() string {
	s := "blackout_period=" + c.BlackoutPeriod.String() +
		" weight_expiration_period=" + c.WeightExpirationPeriod.String() +
		" weight_update_period=" + c.WeightUpdatePeriod.String() +
		" error_utilization_penalty=" + strconv.FormatFloat(c.ErrorUtilizationPenalty, 'g', -1, 64)
	if c.EnableOOBLoadReport {
		s += " enable_oob_load_report=true oob_reporting_period=" + c.OOBReportingPeriod.String()
	}
	return s
}
