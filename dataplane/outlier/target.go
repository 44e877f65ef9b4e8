package outlier

// TargetMetrics is Metrics with the client's target first, as the
// adapters' OutlierMetrics take it (grpcxds.OutlierMetrics: the channel's
// grpc.target; httpxds.OutlierMetrics: "", an HTTP client having none).
type TargetMetrics interface {
	EjectionEnforced(target, backendService, method string)
	EjectionUnenforced(target, backendService, method, reason string)
}

// WithTarget returns the Metrics that reports to m with target; nil if m
// is nil (nothing is measured).
func WithTarget(m TargetMetrics, target string) Metrics {
	if m == nil {
		return nil
	}
	return targetSink{m: m, target: target}
}

// targetSink is WithTarget's Metrics.
type targetSink struct {
	m      TargetMetrics
	target string
}

func (s targetSink) EjectionEnforced(backendService, method string) {
	s.m.EjectionEnforced(s.target, backendService, method)
}

func (s targetSink) EjectionUnenforced(backendService, method, reason string) {
	s.m.EjectionUnenforced(s.target, backendService, method, reason)
}
