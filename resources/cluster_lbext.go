package resources

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Full proto names of the load balancing policy extensions understood in
// a Cluster's load_balancing_policy.
const (
	roundRobinName   = "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin"
	ringHashName     = "envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash"
	leastRequestName = "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest"
	wrrLocalityName  = "envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality"
	pickFirstName    = "envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst"
	cswrrName        = "envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3.ClientSideWeightedRoundRobin"
)

// maxPolicyDepth is how many nested policy lists load_balancing_policy may
// hold (wrr_locality inside wrr_locality ...): gRFC A52 makes deeper
// configurations invalid, and it bounds the recursion.
const maxPolicyDepth = 16

// lbPolicyFromExtensions picks the first policy of the list that this
// package supports, as gRFC A52 says; a supported policy with a bad config
// is an error, not a reason to try the next. depth counts the lists
// around this one.
func lbPolicyFromExtensions(lbp *clusterv3.LoadBalancingPolicy, depth int) (LBPolicy, error) {
	if depth >= maxPolicyDepth {
		return LBPolicy{}, fieldErrorf("policies", "more than %d nested policy lists", maxPolicyDepth)
	}
	var unsupported []string
	for i, p := range lbp.GetPolicies() {
		tc := p.GetTypedExtensionConfig().GetTypedConfig()
		pol, ok, err := lbPolicyFromAny(tc.GetTypeUrl(), tc.GetValue(), depth)
		if err != nil {
			return LBPolicy{}, at(index("policies", i)+".typed_extension_config.typed_config", err)
		}
		if ok {
			return pol, nil
		}
		unsupported = append(unsupported, anyName(tc))
	}
	if len(unsupported) == 0 {
		return LBPolicy{}, fieldErrorf("policies", "must not be empty")
	}
	return LBPolicy{}, fieldErrorf("policies", "no supported policy among [%s] (want round_robin, ring_hash, least_request, pick_first, client_side_weighted_round_robin, or wrr_locality wrapping one of them)", strings.Join(unsupported, ", "))
}

// lbPolicyFromAny decodes one policy of a list; ok false means the policy
// is not supported and the next one is to be tried.
func lbPolicyFromAny(typeURL string, b []byte, depth int) (pol LBPolicy, ok bool, err error) {
	name := typeURL[strings.LastIndexByte(typeURL, '/')+1:]
	switch name {
	case roundRobinName:
		err = proto.Unmarshal(b, new(roundrobinv3.RoundRobin))
		pol.Kind = LBRoundRobin
	case ringHashName:
		pol, err = ringHashExtension(b)
	case leastRequestName:
		lr := new(leastrequestv3.LeastRequest)
		if err = proto.Unmarshal(b, lr); err == nil {
			pol, err = leastRequestPolicy(lr.GetChoiceCount())
		}
	case pickFirstName:
		pf := new(pickfirstv3.PickFirst)
		err = proto.Unmarshal(b, pf)
		pol = LBPolicy{Kind: LBPickFirst, ShuffleAddressList: pf.GetShuffleAddressList()}
	case cswrrName:
		pol, err = wrrExtension(b)
	case wrrLocalityName:
		w := new(wrrlocalityv3.WrrLocality)
		if err = proto.Unmarshal(b, w); err != nil {
			break
		}
		// A wrr_locality inside another changes nothing: the inner one sees
		// a single locality. So nesting flattens to one.
		if pol, err = lbPolicyFromExtensions(w.GetEndpointPickingPolicy(), depth+1); err != nil {
			err = at("endpoint_picking_policy", err)
		}
		pol.WRRLocality = true
	case typedStructName:
		ts := new(xdstypev3.TypedStruct)
		if err = proto.Unmarshal(b, ts); err != nil {
			break
		}
		return customPolicy(ts.GetTypeUrl(), ts.GetValue(), depth)
	case udpaStructName:
		ts := new(udpatypev1.TypedStruct)
		if err = proto.Unmarshal(b, ts); err != nil {
			break
		}
		return customPolicy(ts.GetTypeUrl(), ts.GetValue(), depth)
	default:
		return LBPolicy{}, false, nil
	}
	if err != nil {
		return LBPolicy{}, false, err
	}
	return pol, true, nil
}

func ringHashExtension(b []byte) (LBPolicy, error) {
	rh := new(ringhashv3.RingHash)
	if err := proto.Unmarshal(b, rh); err != nil {
		return LBPolicy{}, err
	}
	// gRPC takes XX_HASH only, and does not read DEFAULT_HASH (the zero
	// value) as XX_HASH.
	if hf := rh.GetHashFunction(); hf != ringhashv3.RingHash_XX_HASH {
		return LBPolicy{}, fieldErrorf("hash_function", "%v is not supported (want XX_HASH)", hf)
	}
	return ringHashPolicy(rh.GetMinimumRingSize().GetValue(), rh.GetMaximumRingSize().GetValue())
}

func wrrExtension(b []byte) (LBPolicy, error) {
	m := new(cswrrv3.ClientSideWeightedRoundRobin)
	if err := proto.Unmarshal(b, m); err != nil {
		return LBPolicy{}, err
	}
	c := defaultWRR
	if v := m.GetEnableOobLoadReport(); v != nil {
		c.EnableOOBLoadReport = v.GetValue()
	}
	for _, d := range []struct {
		field string
		in    *durationpb.Duration
		out   *time.Duration
	}{
		{"oob_reporting_period", m.GetOobReportingPeriod(), &c.OOBReportingPeriod},
		{"blackout_period", m.GetBlackoutPeriod(), &c.BlackoutPeriod},
		{"weight_expiration_period", m.GetWeightExpirationPeriod(), &c.WeightExpirationPeriod},
		{"weight_update_period", m.GetWeightUpdatePeriod(), &c.WeightUpdatePeriod},
	} {
		if d.in != nil {
			if err := d.in.CheckValid(); err != nil {
				return LBPolicy{}, fieldErrorf(d.field, "invalid duration: %v", err)
			}
			*d.out = d.in.AsDuration()
		}
	}
	if v := m.GetErrorUtilizationPenalty(); v != nil {
		c.ErrorUtilizationPenalty = float64(v.GetValue())
	}
	return wrrPolicy(c)
}

// wrrPolicy validates and normalizes a WRRConfig as gRPC does.
func wrrPolicy(c WRRConfig) (LBPolicy, error) {
	if c.ErrorUtilizationPenalty < 0 {
		return LBPolicy{}, fieldErrorf("error_utilization_penalty", "must not be negative, got %v", c.ErrorUtilizationPenalty)
	}
	if !c.EnableOOBLoadReport {
		c.OOBReportingPeriod = 0
	}
	c.WeightUpdatePeriod = max(c.WeightUpdatePeriod, 100*time.Millisecond)
	return LBPolicy{Kind: LBWeightedRoundRobin, WRR: c}, nil
}

// gRPC's names of the policies a TypedStruct may name (gRFC A52's custom
// policies): the part of its type_url after the last '/'.
const (
	grpcRoundRobin   = "round_robin"
	grpcPickFirst    = "pick_first"
	grpcRingHash     = "ring_hash_experimental"
	grpcLeastRequest = "least_request_experimental"
	grpcWRR          = "weighted_round_robin"
	grpcWRRLocality  = "xds_wrr_locality_experimental"
)

// customPolicy decodes a TypedStruct naming a gRPC policy, whose Struct is
// that policy's JSON configuration. gRPC uses any policy registered in its
// balancer registry this way; this package knows the ones it implements,
// and skips every other name as gRPC skips a name it has not registered.
func customPolicy(typeURL string, s *structpb.Struct, depth int) (LBPolicy, bool, error) {
	name := typeURL[strings.LastIndexByte(typeURL, '/')+1:]
	js := []byte("{}")
	if s != nil {
		var err error
		if js, err = protojson.Marshal(s); err != nil {
			return LBPolicy{}, false, fieldErrorf("value", "%v", err)
		}
	}
	pol, ok, err := grpcPolicy(name, js, depth)
	if err != nil {
		return LBPolicy{}, false, at("value", err)
	}
	return pol, ok, nil
}

// grpcPolicy decodes the JSON configuration js of the gRPC policy name;
// ok false means this package does not implement the policy.
func grpcPolicy(name string, js []byte, depth int) (pol LBPolicy, ok bool, err error) {
	switch name {
	case grpcRoundRobin:
		pol.Kind = LBRoundRobin
	case grpcPickFirst:
		var c struct {
			Shuffle bool `json:"shuffleAddressList"`
		}
		err = json.Unmarshal(js, &c)
		pol = LBPolicy{Kind: LBPickFirst, ShuffleAddressList: c.Shuffle}
	case grpcLeastRequest:
		c := struct {
			ChoiceCount uint32 `json:"choiceCount"`
		}{DefaultChoiceCount}
		switch err = json.Unmarshal(js, &c); {
		case err != nil:
		case c.ChoiceCount < 2:
			err = fieldErrorf("choiceCount", "must be at least 2, got %d", c.ChoiceCount)
		default:
			pol, err = leastRequestChoices(c.ChoiceCount)
		}
	case grpcRingHash:
		pol, err = ringHashJSON(js)
	case grpcWRR:
		pol, err = wrrJSON(js)
	case grpcWRRLocality:
		var c struct {
			ChildPolicy []map[string]json.RawMessage `json:"childPolicy"`
		}
		if err = json.Unmarshal(js, &c); err == nil {
			pol, err = grpcPolicyList(c.ChildPolicy, depth+1)
			pol.WRRLocality = true
		}
	default:
		return LBPolicy{}, false, nil
	}
	if err != nil {
		if _, ok := err.(*FieldError); !ok { // a JSON error: say whose
			err = fmt.Errorf("%s config: %w", name, err)
		}
		return LBPolicy{}, false, err
	}
	return pol, true, nil
}

// grpcPolicyList picks the first policy of a gRPC JSON policy list (each
// entry an object with one key, the policy's name) that this package
// implements, as gRPC picks the first it has registered.
func grpcPolicyList(list []map[string]json.RawMessage, depth int) (LBPolicy, error) {
	if depth >= maxPolicyDepth {
		return LBPolicy{}, fieldErrorf("childPolicy", "more than %d nested policy lists", maxPolicyDepth)
	}
	if list == nil {
		return LBPolicy{}, fieldErrorf("childPolicy", "must be set")
	}
	var names []string
	for i, entry := range list {
		if len(entry) != 1 {
			return LBPolicy{}, fieldErrorf(index("childPolicy", i), "has %d keys, want one: the policy's name", len(entry))
		}
		for name, js := range entry {
			pol, ok, err := grpcPolicy(name, js, depth)
			if err != nil {
				return LBPolicy{}, at(index("childPolicy", i), err)
			}
			if ok {
				return pol, nil
			}
			names = append(names, name)
		}
	}
	return LBPolicy{}, fieldErrorf("childPolicy", "no supported policy among [%s]", strings.Join(names, ", "))
}

func ringHashJSON(js []byte) (LBPolicy, error) {
	var c struct {
		MinRingSize       uint64 `json:"minRingSize"`
		MaxRingSize       uint64 `json:"maxRingSize"`
		RequestHashHeader string `json:"requestHashHeader"`
	}
	if err := json.Unmarshal(js, &c); err != nil {
		return LBPolicy{}, err
	}
	pol, err := ringHashPolicy(c.MinRingSize, c.MaxRingSize)
	if err != nil {
		return LBPolicy{}, err
	}
	h := strings.ToLower(c.RequestHashHeader)
	if h != "" {
		if err := checkHeaderKey(h); err != nil {
			return LBPolicy{}, fieldErrorf("requestHashHeader", "%v", err)
		}
	}
	pol.RequestHashHeader = h
	return pol, nil
}

// checkHeaderKey applies gRPC's rules for a metadata key, and refuses the
// binary headers a hash cannot read.
func checkHeaderKey(k string) error {
	if strings.HasPrefix(k, "grpc-") {
		return fmt.Errorf("%q: the grpc- prefix is reserved", k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q: character %q is not allowed in a header name", k, c)
		}
	}
	if strings.HasSuffix(k, "-bin") {
		return fmt.Errorf("%q: a binary header cannot be hashed", k)
	}
	return nil
}

func wrrJSON(js []byte) (LBPolicy, error) {
	var c struct {
		EnableOOB  bool     `json:"enableOobLoadReport"`
		OOBPeriod  *string  `json:"oobReportingPeriod"`
		Blackout   *string  `json:"blackoutPeriod"`
		Expiration *string  `json:"weightExpirationPeriod"`
		Update     *string  `json:"weightUpdatePeriod"`
		Penalty    *float64 `json:"errorUtilizationPenalty"`
	}
	if err := json.Unmarshal(js, &c); err != nil {
		return LBPolicy{}, err
	}
	w := defaultWRR
	w.OOBReportingPeriod = 10 * time.Second
	w.EnableOOBLoadReport = c.EnableOOB
	for _, d := range []struct {
		field string
		in    *string
		out   *time.Duration
	}{
		{"oobReportingPeriod", c.OOBPeriod, &w.OOBReportingPeriod},
		{"blackoutPeriod", c.Blackout, &w.BlackoutPeriod},
		{"weightExpirationPeriod", c.Expiration, &w.WeightExpirationPeriod},
		{"weightUpdatePeriod", c.Update, &w.WeightUpdatePeriod},
	} {
		if d.in != nil {
			v, err := jsonDuration(*d.in)
			if err != nil {
				return LBPolicy{}, fieldErrorf(d.field, "%v", err)
			}
			*d.out = v
		}
	}
	if c.Penalty != nil {
		w.ErrorUtilizationPenalty = *c.Penalty
	}
	return wrrPolicy(w)
}

// jsonDuration parses a duration as JSON service configs write them: a
// decimal number of seconds, optionally signed, with at most nine
// fractional digits, followed by "s".
func jsonDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration in seconds such as \"1.5s\"", s)
	num, ok := strings.CutSuffix(s, "s")
	if !ok {
		return 0, bad
	}
	neg := strings.HasPrefix(num, "-")
	if neg || strings.HasPrefix(num, "+") {
		num = num[1:]
	}
	whole, frac, _ := strings.Cut(num, ".")
	if whole+frac == "" || len(frac) > 9 || strings.Trim(whole+frac, "0123456789") != "" {
		return 0, bad
	}
	sec, err := strconv.ParseInt("0"+whole, 10, 64)
	if err != nil || sec > int64(math.MaxInt64/time.Second)-1 { // beyond time.Duration
		return 0, bad
	}
	ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	d := time.Duration(sec)*time.Second + time.Duration(ns)
	if neg {
		d = -d
	}
	return d, nil
}
