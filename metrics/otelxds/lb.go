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
	ins := &instruments{meter: mp.Meter(ScopeName)}
	m := &OutlierMetrics{enforced: ins.counter(a91.EjectionsEnforced), unenforced: ins.counter(a91.EjectionsUnenforced)}
	if err := errors.Join(ins.errs...); err != nil {
		return nil, err
	}
	return m, nil
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
// grpcxds.Options.SubchannelMetrics. It implements
// httpxds.ConnectionMetrics too, for one set of series across both
// clients (an HTTP client's with an empty grpc.target), though
// HTTPConnectionMetrics names HTTP connections better. Its methods are
// safe for concurrent use.
type SubchannelMetrics struct{ c connInstruments }

// NewSubchannelMetrics makes the four instruments on a meter of mp. It
// fails only if mp refuses an instrument.
func NewSubchannelMetrics(mp metric.MeterProvider) (*SubchannelMetrics, error) {
	c, err := newConnInstruments(mp, a94.All, true)
	if err != nil {
		return nil, err
	}
	return &SubchannelMetrics{c}, nil
}

// ConnectionAttemptSucceeded implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) ConnectionAttemptSucceeded(target, backendService, locality string) {
	m.c.succeeded.Add(context.Background(), 1, m.c.attrs(target, backendService, locality))
}

// ConnectionAttemptFailed implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) ConnectionAttemptFailed(target, backendService, locality string) {
	m.c.failed.Add(context.Background(), 1, m.c.attrs(target, backendService, locality))
}

// Disconnection implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) Disconnection(target, backendService, locality, reason string) {
	m.c.disconnection(target, backendService, locality, reason)
}

// OpenConnections implements grpcxds.SubchannelMetrics.
func (m *SubchannelMetrics) OpenConnections(target, backendService, locality string, delta int) {
	m.c.open.Add(context.Background(), int64(delta), m.c.attrs(target, backendService, locality))
}

// HTTPConnectionMetrics measures httpxds Transports' connections to their
// endpoints as SubchannelMetrics measures a channel's subchannels (gRFC
// A94), on instruments of goxds's: the counters
// goxds.http.client.connection_attempts_succeeded,
// .connection_attempts_failed and .disconnections (with
// grpc.disconnect_error), and the up-down counter
// goxds.http.client.open_connections, labelled grpc.lb.backend_service
// (the leaf cluster) and grpc.lb.locality (no grpc.target: an HTTP
// client has no channel). It implements httpxds.ConnectionMetrics: give
// it to httpxds.TransportOptions.ConnectionMetrics. Its methods are safe
// for concurrent use.
type HTTPConnectionMetrics struct{ c connInstruments }

// NewHTTPConnectionMetrics makes the four instruments on a meter of mp.
// It fails only if mp refuses an instrument.
func NewHTTPConnectionMetrics(mp metric.MeterProvider) (*HTTPConnectionMetrics, error) {
	c, err := newConnInstruments(mp, a94.HTTP, false)
	if err != nil {
		return nil, err
	}
	return &HTTPConnectionMetrics{c}, nil
}

// ConnectionAttemptSucceeded implements httpxds.ConnectionMetrics; the
// target is not recorded.
func (m *HTTPConnectionMetrics) ConnectionAttemptSucceeded(target, backendService, locality string) {
	m.c.succeeded.Add(context.Background(), 1, m.c.attrs(target, backendService, locality))
}

// ConnectionAttemptFailed implements httpxds.ConnectionMetrics.
func (m *HTTPConnectionMetrics) ConnectionAttemptFailed(target, backendService, locality string) {
	m.c.failed.Add(context.Background(), 1, m.c.attrs(target, backendService, locality))
}

// Disconnection implements httpxds.ConnectionMetrics.
func (m *HTTPConnectionMetrics) Disconnection(target, backendService, locality, reason string) {
	m.c.disconnection(target, backendService, locality, reason)
}

// OpenConnections implements httpxds.ConnectionMetrics.
func (m *HTTPConnectionMetrics) OpenConnections(target, backendService, locality string, delta int) {
	m.c.open.Add(context.Background(), int64(delta), m.c.attrs(target, backendService, locality))
}

// connInstruments are the four connection instruments, of a94.All or
// a94.HTTP (in that order), and whether they record the target.
type connInstruments struct {
	disconnections, succeeded, failed metric.Int64Counter
	open                              metric.Int64UpDownCounter
	target                            bool
}

func newConnInstruments(mp metric.MeterProvider, ins []a94.Instrument, target bool) (connInstruments, error) {
	if mp == nil {
		return connInstruments{}, errors.New("otelxds: nil MeterProvider")
	}
	m := &instruments{meter: mp.Meter(ScopeName)}
	c := connInstruments{disconnections: m.counter(ins[0]), succeeded: m.counter(ins[1]), failed: m.counter(ins[2]),
		open: m.upDown(ins[3]), target: target}
	if err := errors.Join(m.errs...); err != nil {
		return connInstruments{}, err
	}
	return c, nil
}

func (c *connInstruments) attrs(target, backendService, locality string, more ...attribute.KeyValue) metric.MeasurementOption {
	kvs := make([]attribute.KeyValue, 0, 4)
	if c.target {
		kvs = append(kvs, attribute.String(a94.KeyTarget, target))
	}
	kvs = append(kvs, attribute.String(a94.KeyBackendService, backendService), attribute.String(a94.KeyLocality, locality))
	return metric.WithAttributes(append(kvs, more...)...)
}

func (c *connInstruments) disconnection(target, backendService, locality, reason string) {
	c.disconnections.Add(context.Background(), 1,
		c.attrs(target, backendService, locality, attribute.String(a94.KeyDisconnectError, reason)))
}
