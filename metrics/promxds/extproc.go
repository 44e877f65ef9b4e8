package promxds

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/goxds/xds/metrics/internal/a93"
)

// ExtProcCollector collects how long the events of RPCs spend in external
// processing filters (gRFC A93) as Prometheus histograms, in seconds with
// gRFC A66's latency buckets, named as OpenTelemetry's Prometheus
// exporter spells grpc-go's (dots become underscores, the unit a suffix:
// grpc_client_ext_proc_client_headers_duration_seconds): the client's,
// labelled grpc_target and grpc_lb_backend_service (it implements
// grpcxds.ExtProcMetrics: give it to grpcxds.Options.ExtProcMetrics),
// and the server's, grpc_server_ext_proc_*_duration_seconds, with no
// label (it implements xdsserver.ExtProcMetrics: give it to
// xdsserver.WithExtProcMetrics). It implements prometheus.Collector
// (register it). Its methods are safe for concurrent use.
type ExtProcCollector struct {
	client map[string]*prometheus.HistogramVec
	server map[string]prometheus.Histogram
}

// NewExtProcCollector makes the histograms.
func NewExtProcCollector() *ExtProcCollector {
	c := &ExtProcCollector{client: map[string]*prometheus.HistogramVec{}, server: map[string]prometheus.Histogram{}}
	for _, e := range a93.Events {
		in := a93.Client(e)
		c.client[e] = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: promName(in),
			Help: in.Description, Buckets: a93.Bounds}, []string{label(a93.KeyTarget), label(a93.KeyBackendService)})
		in = a93.Server(e)
		c.server[e] = prometheus.NewHistogram(prometheus.HistogramOpts{Name: promName(in), Help: in.Description, Buckets: a93.Bounds})
	}
	return c
}

// promName is a histogram's name in seconds as Prometheus spells it.
func promName(in a93.Instrument) string {
	return strings.ReplaceAll(in.Name, ".", "_") + "_seconds"
}

// ClientExtProcDuration implements grpcxds.ExtProcMetrics. A label value
// Prometheus refuses (not valid UTF-8) drops the measurement, as for the
// client's other metrics.
func (c *ExtProcCollector) ClientExtProcDuration(target, backendService string, event string, d time.Duration) {
	if v, ok := c.client[event]; ok {
		if h, err := v.GetMetricWithLabelValues(target, backendService); err == nil {
			h.Observe(d.Seconds())
		}
	}
}

// ServerExtProcDuration implements xdsserver.ExtProcMetrics.
func (c *ExtProcCollector) ServerExtProcDuration(event string, d time.Duration) {
	if h, ok := c.server[event]; ok {
		h.Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (c *ExtProcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, e := range a93.Events {
		c.client[e].Describe(ch)
		c.server[e].Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *ExtProcCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range a93.Events {
		c.client[e].Collect(ch)
		c.server[e].Collect(ch)
	}
}

var _ prometheus.Collector = (*ExtProcCollector)(nil)
