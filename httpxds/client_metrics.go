package httpxds

// OutlierMetrics records what gRFC A91 measures of the Transport's
// outlier detection: each outlier found, ejected
// (grpc.lb.outlier_detection.ejections_enforced) or left in
// (ejections_unenforced, with why). Its methods are those of
// grpcxds.OutlierMetrics, so the same recorders serve both clients:
// metrics/otelxds's NewOutlierMetrics and metrics/promxds's
// NewOutlierCollector implement it.
//
// target is "" (the label's value when a measurement has no channel):
// an HTTP client has no channel target, and a Transport's clusters are
// shared by every host it routes, so no URL host names the clusters an
// ejection is of. backendService is the leaf cluster the endpoint serves;
// method is "consecutive_5xx" or "consecutive_gateway_failure" (Envoy's
// detectors, reported the moment the request that completed the run ends)
// or "success_rate" or "failure_percentage" (at an interval's end); reason
// is "enforcement_percentage" (the detector's enforcing percentage drew
// against the ejection) or "max_ejection_overflow" (max_ejection_percent
// of the endpoints are out already). An endpoint found again while
// ejected is not counted.
//
// Implementations must be safe for concurrent use. They are called from
// the goroutine of the request that completed a run or of an interval's
// timer, with no lock of the Transport held.
type OutlierMetrics interface {
	EjectionEnforced(target, backendService, method string)
	EjectionUnenforced(target, backendService, method, reason string)
}

// outlierSink is the outlier.Metrics the Transport's detectors report to:
// OutlierMetrics with the empty target.
type outlierSink struct{ m OutlierMetrics }

func (s outlierSink) EjectionEnforced(backendService, method string) {
	s.m.EjectionEnforced("", backendService, method)
}

func (s outlierSink) EjectionUnenforced(backendService, method, reason string) {
	s.m.EjectionUnenforced("", backendService, method, reason)
}
