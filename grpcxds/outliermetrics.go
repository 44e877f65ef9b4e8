package grpcxds

import "github.com/goxds/xds/dataplane/outlier"

// OutlierMetrics records what gRFC A91 measures of the channels' outlier
// detection (gRFC A50): each outlier one of its two algorithms finds at
// the end of an interval, ejected (grpc.lb.outlier_detection.
// ejections_enforced) or left in (ejections_unenforced, with why).
// metrics/otelxds and metrics/promxds implement it.
//
// target is the channel's canonical target (grpc.target, as for
// RetryMetrics); backendService the leaf cluster the outlier serves
// (gRFC A89's grpc.lb.backend_service, the leaf under an aggregate
// cluster too); method "success_rate" or "failure_percentage"; reason
// "enforcement_percentage" (the algorithm's enforcing percentage drew
// against the ejection) or "max_ejection_overflow" (max_ejection_percent
// of the endpoints are out already). An endpoint found again while
// ejected is not counted: its ejection runs on.
//
// Implementations must be safe for concurrent use. They are called from
// the goroutine of the detector's interval timer, with no lock of the
// channel held.
type OutlierMetrics interface {
	EjectionEnforced(target, backendService, method string)
	EjectionUnenforced(target, backendService, method, reason string)
}

// outlierMetricsLocked returns what the channel's detectors report to:
// the Builder's OutlierMetrics with the channel's target; nil if it has
// none (cs nil: a balancer the goxds resolver did not configure).
func (b *xdsBalancer) outlierMetricsLocked(cs *channelState) outlier.Metrics {
	if cs == nil || cs.b.outlierMetrics == nil {
		return nil
	}
	return outlier.WithTarget(cs.b.outlierMetrics, b.bopts.Target.String())
}
