package promxds

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/goxds/xds/metrics/internal/a92"
)

// The names of the external authorization counters (gRFC A92), as
// OpenTelemetry's Prometheus exporter spells them: dots become
// underscores, counters end in "_total"; then httpxds's (goxds.http.*).
const (
	NameClientExtAuthzAllowed        = "grpc_client_ext_authz_allowed_rpcs_total"
	NameClientExtAuthzDenied         = "grpc_client_ext_authz_denied_rpcs_total"
	NameClientExtAuthzFilterDisabled = "grpc_client_ext_authz_filter_disabled_rpcs_total"
	NameClientExtAuthzFailed         = "grpc_client_ext_authz_failed_rpcs_total"
	NameServerExtAuthzAllowed        = "grpc_server_ext_authz_allowed_rpcs_total"
	NameServerExtAuthzDenied         = "grpc_server_ext_authz_denied_rpcs_total"
	NameServerExtAuthzFilterDisabled = "grpc_server_ext_authz_filter_disabled_rpcs_total"
	NameServerExtAuthzFailed         = "grpc_server_ext_authz_failed_rpcs_total"

	NameHTTPClientExtAuthzAllowed        = "goxds_http_client_ext_authz_allowed_requests_total"
	NameHTTPClientExtAuthzDenied         = "goxds_http_client_ext_authz_denied_requests_total"
	NameHTTPClientExtAuthzFilterDisabled = "goxds_http_client_ext_authz_filter_disabled_requests_total"
	NameHTTPClientExtAuthzFailed         = "goxds_http_client_ext_authz_failed_requests_total"
	NameHTTPServerExtAuthzAllowed        = "goxds_http_server_ext_authz_allowed_requests_total"
	NameHTTPServerExtAuthzDenied         = "goxds_http_server_ext_authz_denied_requests_total"
	NameHTTPServerExtAuthzFilterDisabled = "goxds_http_server_ext_authz_filter_disabled_requests_total"
	NameHTTPServerExtAuthzFailed         = "goxds_http_server_ext_authz_failed_requests_total"
)

// ExtAuthzCollector counts the outcomes of goxds's external
// authorization checks (gRFC A92), client and server side:
// grpc_client_ext_authz_{allowed,denied,filter_disabled,failed}_rpcs_total,
// labelled grpc_target and grpc_lb_backend_service, and
// grpc_server_ext_authz_*_rpcs_total with no label. It implements
// grpcxds.ExtAuthzMetrics (give it to grpcxds.Options.ExtAuthzMetrics),
// xdsserver.ExtAuthzMetrics (xdsserver.RecordExtAuthz) and
// prometheus.Collector (register it); NewHTTPExtAuthzCollector makes one
// for httpxds. Its methods are safe for concurrent use.
type ExtAuthzCollector struct {
	client, server [4]*prometheus.CounterVec
	http           bool // the HTTP side's: no grpc_target
}

// NewExtAuthzCollector makes the counters.
func NewExtAuthzCollector() *ExtAuthzCollector {
	return newExtAuthzCollector(a92.Client, a92.Server,
		[4]string{NameClientExtAuthzAllowed, NameClientExtAuthzDenied, NameClientExtAuthzFilterDisabled, NameClientExtAuthzFailed},
		[4]string{NameServerExtAuthzAllowed, NameServerExtAuthzDenied, NameServerExtAuthzFilterDisabled, NameServerExtAuthzFailed}, false)
}

// NewHTTPExtAuthzCollector makes the counters of httpxds's checks of
// HTTP requests, under goxds's names
// (goxds_http_client_ext_authz_*_requests_total, labelled
// grpc_lb_backend_service, and goxds_http_server_ext_authz_*_requests_total),
// which gRPC's RPCs do not share. It implements httpxds.ExtAuthzMetrics
// and httpxds.ServerExtAuthzMetrics.
func NewHTTPExtAuthzCollector() *ExtAuthzCollector {
	return newExtAuthzCollector(a92.HTTPClient, a92.HTTPServer,
		[4]string{NameHTTPClientExtAuthzAllowed, NameHTTPClientExtAuthzDenied, NameHTTPClientExtAuthzFilterDisabled, NameHTTPClientExtAuthzFailed},
		[4]string{NameHTTPServerExtAuthzAllowed, NameHTTPServerExtAuthzDenied, NameHTTPServerExtAuthzFilterDisabled, NameHTTPServerExtAuthzFailed}, true)
}

func newExtAuthzCollector(client, server [4]a92.Instrument, clientNames, serverNames [4]string, http bool) *ExtAuthzCollector {
	vec := func(name string, in a92.Instrument) *prometheus.CounterVec {
		var labels []string
		for _, k := range in.Labels {
			labels = append(labels, label(k))
		}
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: in.Description}, labels)
	}
	c := &ExtAuthzCollector{http: http}
	for i := range client {
		c.client[i] = vec(clientNames[i], client[i])
		c.server[i] = vec(serverNames[i], server[i])
	}
	return c
}

// ClientExtAuthz implements grpcxds.ExtAuthzMetrics. A label value
// Prometheus refuses (not valid UTF-8), or an outcome that is none of the four, drops
// the measurement.
func (c *ExtAuthzCollector) ClientExtAuthz(target, backendService, outcome string) {
	i := a92.Index(outcome)
	if i < 0 {
		return
	}
	if c.http {
		add(c.client[i], 1, backendService)
		return
	}
	add(c.client[i], 1, target, backendService) // in a92's label order
}

// ServerExtAuthz implements xdsserver.ExtAuthzMetrics.
func (c *ExtAuthzCollector) ServerExtAuthz(outcome string) {
	i := a92.Index(outcome)
	if i < 0 {
		return
	}
	add(c.server[i], 1)
}

// Describe implements prometheus.Collector.
func (c *ExtAuthzCollector) Describe(ch chan<- *prometheus.Desc) {
	for i := range c.client {
		c.client[i].Describe(ch)
		c.server[i].Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *ExtAuthzCollector) Collect(ch chan<- prometheus.Metric) {
	for i := range c.client {
		c.client[i].Collect(ch)
		c.server[i].Collect(ch)
	}
}

var _ prometheus.Collector = (*ExtAuthzCollector)(nil)
