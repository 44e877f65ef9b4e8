package otelxds

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goxds/xds/metrics/internal/a93"
)

// ExtProcMetrics records how long the events of RPCs spend in external
// processing filters (gRFC A93) on OpenTelemetry histograms, in seconds
// with gRFC A66's latency buckets: grpc.client_ext_proc.*_duration as
// grpc-go names them, labelled grpc.target and grpc.lb.backend_service,
// for channels (it implements grpcxds.ExtProcMetrics: give it to
// grpcxds.Options.ExtProcMetrics), and grpc.server_ext_proc.*_duration,
// with no label, for servers (it implements xdsserver.ExtProcMetrics:
// give it to xdsserver.WithExtProcMetrics). Its methods are safe for
// concurrent use.
type ExtProcMetrics struct {
	client, server map[string]metric.Float64Histogram
}

// NewExtProcMetrics makes the eight histograms on a meter of mp. It fails
// only if mp refuses an instrument.
func NewExtProcMetrics(mp metric.MeterProvider) (*ExtProcMetrics, error) {
	if mp == nil {
		return nil, errors.New("otelxds: nil MeterProvider")
	}
	meter := mp.Meter(ScopeName)
	m := &ExtProcMetrics{client: map[string]metric.Float64Histogram{}, server: map[string]metric.Float64Histogram{}}
	var errs []error
	for _, e := range a93.Events {
		for _, side := range []struct {
			in   a93.Instrument
			into map[string]metric.Float64Histogram
		}{{a93.Client(e), m.client}, {a93.Server(e), m.server}} {
			h, err := meter.Float64Histogram(side.in.Name, metric.WithDescription(side.in.Description),
				metric.WithUnit(side.in.Unit), metric.WithExplicitBucketBoundaries(a93.Bounds...))
			errs = append(errs, err)
			side.into[e] = h
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// ClientExtProcDuration implements grpcxds.ExtProcMetrics.
func (m *ExtProcMetrics) ClientExtProcDuration(target, backendService string, event string, d time.Duration) {
	if h, ok := m.client[event]; ok {
		h.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String(a93.KeyTarget, target),
			attribute.String(a93.KeyBackendService, backendService)))
	}
}

// ServerExtProcDuration implements xdsserver.ExtProcMetrics.
func (m *ExtProcMetrics) ServerExtProcDuration(event string, d time.Duration) {
	if h, ok := m.server[event]; ok {
		h.Record(context.Background(), d.Seconds())
	}
}
