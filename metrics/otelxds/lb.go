package otelxds

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goxds/xds/metrics/internal/a91"
	"github.com/goxds/xds/metrics/internal/a94"
)

// OutlierMetrics counts what goxds channels' outlier detection finds
// (gRFC A91) on two OpenTelemetry counters,
// grpc.lb.outlier_detection.ejections_enforced and
// grpc.lb.outlier_detection.ejections_unenforced, as grpc-go names them,
// labelled grpc.target, grpc.lb.outlier_detection.detection_method (and
// .unenforced_reason) and grpc.lb.backend_service (the leaf cluster). It
// implements grpcxds.OutlierMetrics: give it to
// grpcxds.Options.OutlierMetrics. Its methods are safe for concurrent
// use.
type OutlierMetrics struct {
	enforced, unenforced metric.Int64Counter
}

// NewOutlierMetrics makes the two counters on a meter of mp. It fails
// only if mp refuses an instrument.
func NewOutlierMetrics(mp metric.MeterProvider) (*OutlierMetrics, error) {
	if mp == nil {
		return nil, errors.New("otelxds: nil MeterProvider")
	}
	meter := mp.Meter(ScopeName)
	enforced, err1 := meter.Int64Counter(a91.EjectionsEnforced.Name,
		metric.WithDescription(a91.EjectionsEnforced.Description), metric.WithUnit(a91.EjectionsEnforced.Unit))
	unenforced, err2 := meter.Int64Counter(a91.EjectionsUnenforced.Name,
		metric.WithDescription(a91.EjectionsUnenforced.Description), metric.WithUnit(a91.EjectionsUnenforced.Unit))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return &OutlierMetrics{enforced: enforced, unenforced: unenforced}, nil
}

// EjectionEnforced implements grpcxds.OutlierMetrics.
func (m *OutlierMetrics) EjectionEnforced(target, backendService, method string) {
	m.enforced.Add(context.Background(), 1, metric.WithAttributes(attribute.String(a91.KeyTarget, target),
		attribute.String(a91.KeyDetectionMethod, method), attribute.String(a91.KeyBackendService, backendService)))
}

// EjectionUnenforced implements grpcxds.OutlierMetrics.
func (m *OutlierMetrics) EjectionUnenforced(target, backendService, method, reason string) {
	m.unenforced.Add(context.Background(), 1, metric.WithAttributes(attribute.String(a91.KeyTarget, target),
		attribute.String(a91.KeyDetectionMethod, method), attribute.String(a91.KeyUnenforcedReason, reason),
		attribute.String(a91.KeyBackendService, backendService)))
}

// SubchannelMetrics measures goxds channels' connections (gRFC A94) on
// OpenTelemetry instruments named as grpc-go names its subchannel
// metrics: the counters grpc.subchannel.connection_attempts_succeeded,
// .connection_attempts_failed and .disconnections (with
// grpc.disconnect_error), and the up-down counter
// grpc.subchannel.open_connections, labelled grpc.target,
// grpc.lb.backend_service (the leaf cluster) and grpc.lb.locality. It
// implements grpcxds.SubchannelMetrics: give it to
// grpcxds.Options.SubchannelMetrics. Its methods are safe for concurrent
// use.
type SubchannelMetrics struct {
	succeeded, failed, disconnections metric.Int64Counter
	open                              metric.Int64UpDownCounter
}

// NewSubchannelMetrics makes the four instruments on a meter of mp. It
// fails only if mp refuses an instrument.
func NewSubchannelMetrics(mp metric.MeterProvider) (*SubchannelMetrics, error) {
	if mp == nil {
		return nil, errors.New("otelxds: nil MeterProvider")
	}
	meter := mp.Meter(ScopeName)
	var errs []error
	counter := func(in a94.Instrument) metric.Int64Counter {
		c, err := meter.Int64Counter(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
		errs = append(errs, err)
		return c
	}
	m := &SubchannelMetrics{succeeded: counter(a94.AttemptsSucceeded), failed: counter(a94.AttemptsFailed),
		disconnections: counter(a94.Disconnections)}
	open, err := meter.Int64UpDownCounter(a94.OpenConnections.Name,
		metric.WithDescription(a94.OpenConnections.Description), metric.WithUnit(a94.OpenConnections.Unit))
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	m.open = open
	return m, nil
}

func subchannelAttrs(target, backendService, locality string, more ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{attribute.String(a94.KeyTarget, target),
		attribute.String(a94.KeyBackendService, backendService), attribute.String(a94.KeyLocality, locality)}, more...)...)
}

// ConnectionAttemptSucceeded implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) ConnectionAttemptSucceeded(target, backendService, locality string) {
	m.succeeded.Add(context.Background(), 1, subchannelAttrs(target, backendService, locality))
}

// ConnectionAttemptFailed implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) ConnectionAttemptFailed(target, backendService, locality string) {
	m.failed.Add(context.Background(), 1, subchannelAttrs(target, backendService, locality))
}

// Disconnection implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) Disconnection(target, backendService, locality, reason string) {
	m.disconnections.Add(context.Background(), 1,
		subchannelAttrs(target, backendService, locality, attribute.String(a94.KeyDisconnectError, reason)))
}

// OpenConnections implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) OpenConnections(target, backendService, locality string, delta int) {
	m.open.Add(context.Background(), int64(delta), subchannelAttrs(target, backendService, locality))
}
