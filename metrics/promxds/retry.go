package promxds

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/goxds/xds/metrics/internal/a96"
)

// The names of the retry histograms (gRFC A96), as OpenTelemetry's
// Prometheus exporter spells grpc-go's: dots become underscores, the
// seconds unit a suffix.
const (
	NameCallRetries    = "grpc_client_call_retries"
	NameCallRetryDelay = "grpc_client_call_retry_delay_seconds"
)

// RetryCollector collects the retries of goxds channels (gRFC A96) as two
// Prometheus histograms, labelled grpc_method and grpc_target, with the
// gRFC's buckets. It implements grpcxds.RetryMetrics (give it to
// grpcxds.Options.RetryMetrics) and prometheus.Collector (register it).
// grpc.client.call.transparent_retries is not collected: transparent
// retries are gRPC's own, below the interceptors where goxds retries. Its
// methods are safe for concurrent use.
type RetryCollector struct {
	retries, delay *prometheus.HistogramVec
}

// NewRetryCollector makes the histograms.
func NewRetryCollector() *RetryCollector {
	labels := []string{label(a96.KeyMethod), label(a96.KeyTarget)}
	return &RetryCollector{
		retries: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameCallRetries,
			Help: a96.Retries.Description, Buckets: a96.Retries.Bounds}, labels),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameCallRetryDelay,
			Help: a96.RetryDelay.Description, Buckets: a96.RetryDelay.Bounds}, labels),
	}
}

// CallRetried implements grpcxds.RetryMetrics. A label value Prometheus
// refuses (not valid UTF-8) drops the measurement, as for the client's
// metrics.
func (c *RetryCollector) CallRetried(target, method string, retries int, delay time.Duration) {
	if h, err := c.retries.GetMetricWithLabelValues(method, target); err == nil {
		h.Observe(float64(retries))
	}
	if h, err := c.delay.GetMetricWithLabelValues(method, target); err == nil {
		h.Observe(delay.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (c *RetryCollector) Describe(ch chan<- *prometheus.Desc) {
	c.retries.Describe(ch)
	c.delay.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *RetryCollector) Collect(ch chan<- prometheus.Metric) {
	c.retries.Collect(ch)
	c.delay.Collect(ch)
}

var _ prometheus.Collector = (*RetryCollector)(nil)
