package promxds

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/metrics/internal/a78"
)

// The metric names: gRFC A78's instruments named as OpenTelemetry's
// Prometheus exporter names grpc-go's (dots to underscores, "_total" on
// counters; the units are annotations, which add no suffix).
const (
	NameResourceUpdatesValid   = "grpc_xds_client_resource_updates_valid_total"
	NameResourceUpdatesInvalid = "grpc_xds_client_resource_updates_invalid_total"
	NameServerFailure          = "grpc_xds_client_server_failure_total"
	NameConnected              = "grpc_xds_client_connected"
	NameResources              = "grpc_xds_client_resources"
)

// Options configures New. The zero value is ready to use.
type Options struct {
	// Target is the grpc_target label of every metric. grpc-go keeps an
	// xDS client per channel target and puts that target there; a goxds
	// client serves every watch and channel of the program that uses it,
	// so it has no target of its own: name it, for instance after the
	// listener it follows, or the channel target if it serves one channel
	// ("goxds:///my-service"). Empty: "#goxds".
	Target string
	// ResourceTypeLabel gives the grpc_xds_resource_type label of a type
	// URL. Nil: grpc-go's names for the types it knows ("ListenerResource",
	// "RouteConfigResource", "ClusterResource", "EndpointsResource"), the
	// message name (the type URL without "type.googleapis.com/", as gRFC
	// A78 spells types) for the others.
	ResourceTypeLabel func(typeURL string) string
}

// Collector is a prometheus.Collector of a goxds client's metrics. It
// implements [client.Metrics]: give it to the client in
// [client.Options].Metrics, call [Collector.Observe] with the client so
// that the resources gauge can count its cache, and register it on your
// registry (it registers itself nowhere). One Collector serves one client.
// Its methods are safe for concurrent use.
type Collector struct {
	typeLabel func(string) string

	valid, invalid, failures *prometheus.CounterVec
	connectedDesc            *prometheus.Desc
	resourcesDesc            *prometheus.Desc

	connected a78.ConnectedSet
	client    a78.ClientRef
}

// New returns a Collector of the metrics of gRFC A78.
func New(opts Options) *Collector {
	target := opts.Target
	if target == "" {
		target = a78.DefaultTarget
	}
	constLabels := prometheus.Labels{label(a78.KeyTarget): target}
	c := &Collector{typeLabel: opts.ResourceTypeLabel}
	if c.typeLabel == nil {
		c.typeLabel = a78.ResourceType
	}
	counter := func(name string, in a78.Instrument) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: in.Description, ConstLabels: constLabels}, labels(in))
	}
	c.valid = counter(NameResourceUpdatesValid, a78.ResourceUpdatesValid)
	c.invalid = counter(NameResourceUpdatesInvalid, a78.ResourceUpdatesInvalid)
	c.failures = counter(NameServerFailure, a78.ServerFailure)
	c.connectedDesc = prometheus.NewDesc(NameConnected, a78.Connected.Description, labels(a78.Connected), constLabels)
	c.resourcesDesc = prometheus.NewDesc(NameResources, a78.Resources.Description, labels(a78.Resources), constLabels)
	return c
}

// label is the Prometheus spelling of an attribute key.
func label(key string) string {
	b := []byte(key)
	for i, ch := range b {
		if ch == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// labels are the variable labels of in: all but the target, which is
// constant.
func labels(in a78.Instrument) []string {
	var out []string
	for _, k := range in.Labels {
		if k != a78.KeyTarget {
			out = append(out, label(k))
		}
	}
	return out
}

// Observe makes c the client whose cache grpc_xds_client_resources counts,
// by authority, resource type and cache state
// ([client.Client.ResourceCounts]). Until then it has no value.
func (c *Collector) Observe(cl *client.Client) { c.client.Set(cl) }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.valid.Describe(ch)
	c.invalid.Describe(ch)
	c.failures.Describe(ch)
	ch <- c.connectedDesc
	ch <- c.resourcesDesc
}

// Collect implements prometheus.Collector. The gauges are read now, from
// what the client last reported and from its cache.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.valid.Collect(ch)
	c.invalid.Collect(ch)
	c.failures.Collect(ch)
	for _, s := range c.connected.Snapshot() {
		v := 0.0
		if s.Connected {
			v = 1
		}
		gauge(ch, c.connectedDesc, v, s.Server)
	}
	for _, rc := range c.client.Counts() {
		// In the order of the instrument's labels: authority, cache
		// state, resource type.
		gauge(ch, c.resourcesDesc, float64(rc.Count), rc.Authority, rc.CacheState, c.typeLabel(rc.TypeURL))
	}
}

// gauge sends a gauge sample, unless Prometheus refuses a label value (one
// not valid UTF-8): as add does, the sample is dropped, so that neither a
// panic nor a failed scrape comes of what a server or file said.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labelValues ...string) {
	if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labelValues...); err == nil {
		ch <- m
	}
}

// ResourceUpdates implements [client.Metrics]: it adds to
// grpc_xds_client_resource_updates_valid_total and _invalid_total.
func (c *Collector) ResourceUpdates(server, typeURL string, valid, invalid int) {
	typ := c.typeLabel(typeURL)
	if valid > 0 {
		add(c.valid, float64(valid), server, typ)
	}
	if invalid > 0 {
		add(c.invalid, float64(invalid), server, typ)
	}
}

// ServerFailure implements [client.Metrics]: it counts one
// grpc_xds_client_server_failure_total.
func (c *Collector) ServerFailure(server string) { add(c.failures, 1, server) }

// Connected implements [client.Metrics]: grpc_xds_client_connected reports
// it on collection.
func (c *Collector) Connected(server string, connected bool) { c.connected.Set(server, connected) }

// add adds v to the counter of labelValues. A label value Prometheus
// refuses (not valid UTF-8) drops the measurement: it cannot be exported,
// and the client must not panic for what a server or file said.
func add(vec *prometheus.CounterVec, v float64, labelValues ...string) {
	if m, err := vec.GetMetricWithLabelValues(labelValues...); err == nil {
		m.Add(v)
	}
}

var (
	_ client.Metrics       = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)
