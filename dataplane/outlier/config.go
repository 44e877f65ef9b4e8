package outlier

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// Config is a cluster's outlier_detection as gRFC A50 reads it (or, for
// an HTTP cluster, Envoy: ConfigOfHTTP), with its defaults filled in. At
// least one of the algorithms is on.
type Config struct {
	// Interval is how often the detector judges the endpoints; an
	// ejected endpoint stays out BaseEjectionTime times the number of its
	// ejections, at most max(BaseEjectionTime, MaxEjectionTime).
	Interval, BaseEjectionTime, MaxEjectionTime time.Duration
	// MaxEjectionPercent caps the share of the endpoints ejected at once.
	MaxEjectionPercent uint32
	// SuccessRate and FailurePercentage are the two algorithms, nil when
	// off.
	SuccessRate       *SuccessRate
	FailurePercentage *FailurePercentage
	// Consecutive5xx and ConsecutiveGatewayFailure are Envoy's
	// consecutive detectors (consecutive.go), nil when off; ConfigOf, for
	// gRPC, leaves them off.
	Consecutive5xx, ConsecutiveGatewayFailure *Consecutive
	// SplitLocalOrigin is Envoy's split_external_local_origin_errors
	// (HTTP only): requests the endpoint never answered (LocalOriginFailure)
	// are counted apart from the responses, by the detectors below,
	// rather than as gateway failures. ConfigOf leaves it off.
	SplitLocalOrigin bool
	// ConsecutiveLocalOrigin, LocalOriginSuccessRate and
	// LocalOriginFailurePercentage judge the locally originated outcomes
	// when SplitLocalOrigin (nil when off): consecutive_local_origin_failure,
	// and the interval algorithms with their own enforcing percentages
	// (enforcing_local_origin_success_rate,
	// enforcing_failure_percentage_local_origin) and the other fields
	// shared with SuccessRate and FailurePercentage.
	ConsecutiveLocalOrigin       *Consecutive
	LocalOriginSuccessRate       *SuccessRate
	LocalOriginFailurePercentage *FailurePercentage
}

// SuccessRate ejects the endpoints whose success rate is below the mean
// of the candidates' by more than StdevFactor/1000 standard deviations.
type SuccessRate struct {
	StdevFactor uint32
	// Enforcement is the chance, in percent, that an outlier found is
	// ejected.
	Enforcement uint32
	// MinimumHosts is how many endpoints must have RequestVolume requests
	// in the interval (the candidates) for the algorithm to run.
	MinimumHosts, RequestVolume uint32
}

// FailurePercentage ejects the endpoints whose share of failed requests,
// in percent, is above Threshold. The other fields are as SuccessRate's.
type FailurePercentage struct {
	Threshold, Enforcement, MinimumHosts, RequestVolume uint32
}

// ConfigOf returns the configuration of od, a Cluster's outlier_detection
// as package resources decoded and validated it (durations valid and not
// negative, percentages at most 100; so nothing here can fail). It is nil
// when od ejects nothing: unset, or both algorithms off.
func ConfigOf(od *clusterv3.OutlierDetection) *Config {
	if od == nil {
		return nil
	}
	c := &Config{
		Interval:           10 * time.Second,
		BaseEjectionTime:   30 * time.Second,
		MaxEjectionTime:    300 * time.Second,
		MaxEjectionPercent: u32(od.GetMaxEjectionPercent(), 10, od.MaxEjectionPercent != nil),
	}
	if d := od.GetInterval(); d != nil {
		c.Interval = d.AsDuration()
	}
	if d := od.GetBaseEjectionTime(); d != nil {
		c.BaseEjectionTime = d.AsDuration()
	}
	if d := od.GetMaxEjectionTime(); d != nil {
		c.MaxEjectionTime = d.AsDuration()
	}
	// The success rate is on unless enforcing_success_rate is 0; the
	// failure percentage only if enforcing_failure_percentage is set and
	// not 0 (gRFC A50).
	c.SuccessRate = successRateOf(od, u32(od.GetEnforcingSuccessRate(), 100, od.EnforcingSuccessRate != nil))
	c.FailurePercentage = failurePercentageOf(od, od.GetEnforcingFailurePercentage().GetValue())
	if c.SuccessRate == nil && c.FailurePercentage == nil {
		return nil
	}
	return c
}

// u32 reads a UInt32Value field, def when unset.
func u32(v interface{ GetValue() uint32 }, def uint32, set bool) uint32 {
	if !set {
		return def
	}
	return v.GetValue()
}

// successRateOf returns od's success rate parameters with enforcement
// e, nil (off) when e is 0.
func successRateOf(od *clusterv3.OutlierDetection, e uint32) *SuccessRate {
	if e == 0 {
		return nil
	}
	return &SuccessRate{
		StdevFactor:   u32(od.GetSuccessRateStdevFactor(), 1900, od.SuccessRateStdevFactor != nil),
		Enforcement:   e,
		MinimumHosts:  u32(od.GetSuccessRateMinimumHosts(), 5, od.SuccessRateMinimumHosts != nil),
		RequestVolume: u32(od.GetSuccessRateRequestVolume(), 100, od.SuccessRateRequestVolume != nil),
	}
}

// failurePercentageOf returns od's failure percentage parameters with
// enforcement e, nil (off) when e is 0.
func failurePercentageOf(od *clusterv3.OutlierDetection, e uint32) *FailurePercentage {
	if e == 0 {
		return nil
	}
	return &FailurePercentage{
		Threshold:     u32(od.GetFailurePercentageThreshold(), 85, od.FailurePercentageThreshold != nil),
		Enforcement:   e,
		MinimumHosts:  u32(od.GetFailurePercentageMinimumHosts(), 5, od.FailurePercentageMinimumHosts != nil),
		RequestVolume: u32(od.GetFailurePercentageRequestVolume(), 50, od.FailurePercentageRequestVolume != nil),
	}
}

// ConfigOfHTTP is ConfigOf for an HTTP cluster, as Envoy reads od: with
// its consecutive detectors too
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/cluster/v3/outlier_detection.proto).
// consecutive_5xx is on by default (5 in a row, enforcing_consecutive_5xx
// 100%); consecutive_gateway_failure counts by default (5) but ejects only
// if enforcing_consecutive_gateway_failure is set above its default of 0.
// A threshold of 0 turns its detector off: Envoy's run would never reach
// it. With split_external_local_origin_errors, the locally originated
// errors have detectors of their own, with Envoy's defaults
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/outlier#detection-types):
// consecutive_local_origin_failure 5 at enforcing 100%, the success rate
// at enforcing_local_origin_success_rate (100), the failure percentage at
// enforcing_failure_percentage_local_origin (0: off); without it those
// fields are ignored, as Envoy ignores them. The result is nil when od
// ejects nothing.
func ConfigOfHTTP(od *clusterv3.OutlierDetection) *Config {
	if od == nil {
		return nil
	}
	c := ConfigOf(od)
	if c == nil {
		// The interval fields, with neither interval algorithm on.
		c = ConfigOf(&clusterv3.OutlierDetection{Interval: od.Interval, BaseEjectionTime: od.BaseEjectionTime,
			MaxEjectionTime: od.MaxEjectionTime, MaxEjectionPercent: od.MaxEjectionPercent})
		c.SuccessRate = nil
	}
	consecutive := func(n interface{ GetValue() uint32 }, nSet bool, e interface{ GetValue() uint32 }, eSet bool, defE uint32) *Consecutive {
		threshold, enforcement := uint32(5), defE
		if nSet {
			threshold = n.GetValue()
		}
		if eSet {
			enforcement = e.GetValue()
		}
		if threshold == 0 || enforcement == 0 {
			return nil
		}
		return &Consecutive{Threshold: threshold, Enforcement: enforcement}
	}
	c.Consecutive5xx = consecutive(od.GetConsecutive_5Xx(), od.Consecutive_5Xx != nil,
		od.GetEnforcingConsecutive_5Xx(), od.EnforcingConsecutive_5Xx != nil, 100)
	c.ConsecutiveGatewayFailure = consecutive(od.GetConsecutiveGatewayFailure(), od.ConsecutiveGatewayFailure != nil,
		od.GetEnforcingConsecutiveGatewayFailure(), od.EnforcingConsecutiveGatewayFailure != nil, 0)
	if od.GetSplitExternalLocalOriginErrors() {
		c.SplitLocalOrigin = true
		c.ConsecutiveLocalOrigin = consecutive(od.GetConsecutiveLocalOriginFailure(), od.ConsecutiveLocalOriginFailure != nil,
			od.GetEnforcingConsecutiveLocalOriginFailure(), od.EnforcingConsecutiveLocalOriginFailure != nil, 100)
		c.LocalOriginSuccessRate = successRateOf(od, u32(od.GetEnforcingLocalOriginSuccessRate(), 100, od.EnforcingLocalOriginSuccessRate != nil))
		c.LocalOriginFailurePercentage = failurePercentageOf(od, od.GetEnforcingFailurePercentageLocalOrigin().GetValue())
	}
	if c.SuccessRate == nil && c.FailurePercentage == nil && c.Consecutive5xx == nil && c.ConsecutiveGatewayFailure == nil &&
		c.ConsecutiveLocalOrigin == nil && c.LocalOriginSuccessRate == nil && c.LocalOriginFailurePercentage == nil {
		return nil
	}
	return c
}
