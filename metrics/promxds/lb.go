package promxds

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/goxds/xds/metrics/internal/a91"
	"github.com/goxds/xds/metrics/internal/a94"
)

// The names of the outlier detection counters (gRFC A91) and the
// subchannel metrics (gRFC A94), as OpenTelemetry's Prometheus exporter
// spells grpc-go's: dots become underscores, counters end in "_total";
// open_connections, an up-down counter, is a gauge.
const (
	NameEjectionsEnforced   = "grpc_lb_outlier_detection_ejections_enforced_total"
	NameEjectionsUnenforced = "grpc_lb_outlier_detection_ejections_unenforced_total"

	NameDisconnections    = "grpc_subchannel_disconnections_total"
	NameAttemptsSucceeded = "grpc_subchannel_connection_attempts_succeeded_total"
	NameAttemptsFailed    = "grpc_subchannel_connection_attempts_failed_total"
	NameOpenConnections   = "grpc_subchannel_open_connections"
)

// The names of the HTTP client's connection metrics (a94's HTTP
// instruments, goxds.http.client.*), spelled as the exporter would.
const (
	NameHTTPDisconnections    = "goxds_http_client_disconnections_total"
	NameHTTPAttemptsSucceeded = "goxds_http_client_connection_attempts_succeeded_total"
	NameHTTPAttemptsFailed    = "goxds_http_client_connection_attempts_failed_total"
	NameHTTPOpenConnections   = "goxds_http_client_open_connections"
)

// OutlierCollector counts what goxds channels' outlier detection finds
// (gRFC A91): grpc_lb_outlier_detection_ejections_enforced_total and
// _unenforced_total, labelled grpc_target,
// grpc_lb_outlier_detection_detection_method (and _unenforced_reason) and
// grpc_lb_backend_service (the leaf cluster). It implements
// grpcxds.OutlierMetrics (give it to grpcxds.Options.OutlierMetrics) and
// prometheus.Collector (register it). Its methods are safe for
// concurrent use.
type OutlierCollector struct {
	enforced, unenforced *prometheus.CounterVec
}

// NewOutlierCollector makes the counters.
func NewOutlierCollector() *OutlierCollector {
	vec := func(name string, in a91.Instrument) *prometheus.CounterVec {
		var labels []string
		for _, k := range in.Labels {
			labels = append(labels, label(k))
		}
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: in.Description}, labels)
	}
	return &OutlierCollector{enforced: vec(NameEjectionsEnforced, a91.EjectionsEnforced),
		unenforced: vec(NameEjectionsUnenforced, a91.EjectionsUnenforced)}
}

// EjectionEnforced implements grpcxds.OutlierMetrics. A label value
// Prometheus refuses (not valid UTF-8) drops the measurement, as for the
// client's metrics.
func (c *OutlierCollector) EjectionEnforced(target, backendService, method string) {
	add(c.enforced, 1, target, method, backendService) // in a91's label order
}

// EjectionUnenforced implements grpcxds.OutlierMetrics.
func (c *OutlierCollector) EjectionUnenforced(target, backendService, method, reason string) {
	add(c.unenforced, 1, target, method, reason, backendService)
}

// Describe implements prometheus.Collector.
func (c *OutlierCollector) Describe(ch chan<- *prometheus.Desc) {
	c.enforced.Describe(ch)
	c.unenforced.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *OutlierCollector) Collect(ch chan<- prometheus.Metric) {
	c.enforced.Collect(ch)
	c.unenforced.Collect(ch)
}

// SubchannelCollector measures goxds channels' connections (gRFC A94):
// grpc_subchannel_connection_attempts_succeeded_total, _failed_total,
// grpc_subchannel_disconnections_total (with grpc_disconnect_error) and
// the gauge grpc_subchannel_open_connections, labelled grpc_target,
// grpc_lb_backend_service (the leaf cluster) and grpc_lb_locality. It
// implements grpcxds.SubchannelMetrics (give it to
// grpcxds.Options.SubchannelMetrics) and prometheus.Collector (register
// it); and httpxds.ConnectionMetrics, for one set of series across both
// clients, though HTTPConnectionCollector names HTTP connections better.
// Its methods are safe for concurrent use.
type SubchannelCollector struct{ connVecs }

// NewSubchannelCollector makes the metrics.
func NewSubchannelCollector() *SubchannelCollector {
	return &SubchannelCollector{newConnVecs(a94.All, [4]string{NameDisconnections, NameAttemptsSucceeded,
		NameAttemptsFailed, NameOpenConnections}, true)}
}

// HTTPConnectionCollector measures httpxds Transports' connections to
// their endpoints as SubchannelCollector measures a channel's
// subchannels (gRFC A94), under goxds's names:
// goxds_http_client_connection_attempts_succeeded_total, _failed_total,
// goxds_http_client_disconnections_total (with grpc_disconnect_error) and
// the gauge goxds_http_client_open_connections, labelled
// grpc_lb_backend_service (the leaf cluster) and grpc_lb_locality (no
// grpc_target: an HTTP client has no channel). It implements
// httpxds.ConnectionMetrics (give it to
// httpxds.TransportOptions.ConnectionMetrics) and prometheus.Collector
// (register it). Its methods are safe for concurrent use.
type HTTPConnectionCollector struct{ connVecs }

// NewHTTPConnectionCollector makes the metrics.
func NewHTTPConnectionCollector() *HTTPConnectionCollector {
	return &HTTPConnectionCollector{newConnVecs(a94.HTTP, [4]string{NameHTTPDisconnections,
		NameHTTPAttemptsSucceeded, NameHTTPAttemptsFailed, NameHTTPOpenConnections}, false)}
}

// connVecs are the four connection metrics, of a94.All or a94.HTTP (in
// that order, named names), and whether they are labelled with the
// target. Its methods are both collectors'.
type connVecs struct {
	disconnections, succeeded, failed *prometheus.CounterVec
	open                              *prometheus.GaugeVec
	target                            bool
}

func newConnVecs(ins []a94.Instrument, names [4]string, target bool) connVecs {
	labels := func(in a94.Instrument) []string {
		var out []string
		for _, k := range in.Labels {
			out = append(out, label(k))
		}
		return out
	}
	vec := func(i int) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: names[i], Help: ins[i].Description}, labels(ins[i]))
	}
	return connVecs{disconnections: vec(0), succeeded: vec(1), failed: vec(2), target: target,
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: names[3], Help: ins[3].Description}, labels(ins[3]))}
}

// values are the label values of a measurement, in the instruments'
// label order.
func (c *connVecs) values(target, backendService, locality string, more ...string) []string {
	if c.target {
		return append([]string{target, backendService, locality}, more...)
	}
	return append([]string{backendService, locality}, more...)
}

// ConnectionAttemptSucceeded implements grpcxds.SubchannelMetrics and
// httpxds.ConnectionMetrics (the HTTP collector records no target). A
// label value Prometheus refuses (not valid UTF-8: a locality or cluster
// name from the management server) drops the measurement.
func (c *connVecs) ConnectionAttemptSucceeded(target, backendService, locality string) {
	add(c.succeeded, 1, c.values(target, backendService, locality)...)
}

// ConnectionAttemptFailed implements grpcxds.SubchannelMetrics and
// httpxds.ConnectionMetrics.
func (c *connVecs) ConnectionAttemptFailed(target, backendService, locality string) {
	add(c.failed, 1, c.values(target, backendService, locality)...)
}

// Disconnection implements grpcxds.SubchannelMetrics and
// httpxds.ConnectionMetrics.
func (c *connVecs) Disconnection(target, backendService, locality, reason string) {
	add(c.disconnections, 1, c.values(target, backendService, locality, reason)...)
}

// OpenConnections implements grpcxds.SubchannelMetrics and
// httpxds.ConnectionMetrics.
func (c *connVecs) OpenConnections(target, backendService, locality string, delta int) {
	if g, err := c.open.GetMetricWithLabelValues(c.values(target, backendService, locality)...); err == nil {
		g.Add(float64(delta))
	}
}

// Describe implements prometheus.Collector.
func (c *connVecs) Describe(ch chan<- *prometheus.Desc) {
	c.succeeded.Describe(ch)
	c.failed.Describe(ch)
	c.disconnections.Describe(ch)
	c.open.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *connVecs) Collect(ch chan<- prometheus.Metric) {
	c.succeeded.Collect(ch)
	c.failed.Collect(ch)
	c.disconnections.Collect(ch)
	c.open.Collect(ch)
}

var (
	_ prometheus.Collector = (*OutlierCollector)(nil)
	_ prometheus.Collector = (*SubchannelCollector)(nil)
	_ prometheus.Collector = (*HTTPConnectionCollector)(nil)
)
