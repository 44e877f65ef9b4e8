package otelxds

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goxds/xds/metrics/internal/a96"
)

// RetryMetrics records the retries of goxds channels (gRFC A96) on
// OpenTelemetry histograms: grpc.client.call.retries and
// grpc.client.call.retry_delay, labelled grpc.method and grpc.target. It
// implements grpcxds.RetryMetrics: give it to grpcxds.Options.RetryMetrics.
// goxds retries in its interceptors, where grpc-go's own OpenTelemetry
// plugin sees each attempt as a call and counts no retry; transparent
// retries are gRPC's own, which no interceptor sees, so
// grpc.client.call.transparent_retries is not recorded. Its methods are
// safe for concurrent use.
type RetryMetrics struct {
	retries metric.Int64Histogram
	delay   metric.Float64Histogram
}

// NewRetryMetrics makes the two histograms on a meter of mp, with gRFC
// A96's names, units and bucket boundaries. It fails only if mp refuses
// an instrument.
func NewRetryMetrics(mp metric.MeterProvider) (*RetryMetrics, error) {
	if mp == nil {
		return nil, errors.New("otelxds: nil MeterProvider")
	}
	meter := mp.Meter(ScopeName)
	retries, err1 := meter.Int64Histogram(a96.Retries.Name, metric.WithDescription(a96.Retries.Description),
		metric.WithUnit(a96.Retries.Unit), metric.WithExplicitBucketBoundaries(a96.Retries.Bounds...))
	delay, err2 := meter.Float64Histogram(a96.RetryDelay.Name, metric.WithDescription(a96.RetryDelay.Description),
		metric.WithUnit(a96.RetryDelay.Unit), metric.WithExplicitBucketBoundaries(a96.RetryDelay.Bounds...))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return &RetryMetrics{retries: retries, delay: delay}, nil
}

// CallRetried implements grpcxds.RetryMetrics: one measurement of each
// histogram per retried call.
func (m *RetryMetrics) CallRetried(target, method string, retries int, delay time.Duration) {
	attrs := metric.WithAttributes(attribute.String(a96.KeyMethod, method), attribute.String(a96.KeyTarget, target))
	ctx := context.Background()
	m.retries.Record(ctx, int64(retries), attrs)
	m.delay.Record(ctx, delay.Seconds(), attrs)
}
