package otelxds

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goxds/xds/metrics/internal/a92"
)

// ExtAuthzMetrics counts the outcomes of goxds's external authorization
// checks (gRFC A92) on OpenTelemetry counters, client and server side:
// grpc.client_ext_authz.allowed_rpcs, .denied_rpcs,
// .filter_disabled_rpcs and .failed_rpcs, labelled grpc.target and
// grpc.lb.backend_service, and grpc.server_ext_authz.* with no label. It
// implements grpcxds.ExtAuthzMetrics (give it to
// grpcxds.Options.ExtAuthzMetrics) and xdsserver.ExtAuthzMetrics
// (xdsserver.RecordExtAuthz); NewHTTPExtAuthzMetrics makes one for
// httpxds. Its methods are safe for concurrent use.
type ExtAuthzMetrics struct {
	client, server [4]metric.Int64Counter
	// http: the HTTP side's counters, whose client ones have no
	// grpc.target.
	http bool
}

// NewExtAuthzMetrics makes the eight counters on a meter of mp, with
// gRFC A92's names, descriptions and units. It fails only if mp refuses
// an instrument.
func NewExtAuthzMetrics(mp metric.MeterProvider) (*ExtAuthzMetrics, error) {
	return newExtAuthzMetrics(mp, a92.Client, a92.Server, false)
}

// NewHTTPExtAuthzMetrics makes the counters of httpxds's checks of HTTP
// requests, under goxds's names (goxds.http.client_ext_authz.*_requests,
// labelled grpc.lb.backend_service, and goxds.http.server_ext_authz.*,
// with no label): gRFC A92's count RPCs of gRPC channels and servers,
// which a process with both kinds of client would mix with its HTTP
// requests. It implements httpxds.ExtAuthzMetrics and
// httpxds.ServerExtAuthzMetrics.
func NewHTTPExtAuthzMetrics(mp metric.MeterProvider) (*ExtAuthzMetrics, error) {
	return newExtAuthzMetrics(mp, a92.HTTPClient, a92.HTTPServer, true)
}

func newExtAuthzMetrics(mp metric.MeterProvider, client, server [4]a92.Instrument, http bool) (*ExtAuthzMetrics, error) {
	if mp == nil {
		return nil, errors.New("otelxds: nil MeterProvider")
	}
	ins := &instruments{meter: mp.Meter(ScopeName)}
	m := &ExtAuthzMetrics{http: http}
	for i := range client {
		m.client[i] = ins.counter(client[i])
		m.server[i] = ins.counter(server[i])
	}
	if err := errors.Join(ins.errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// ClientExtAuthz implements grpcxds.ExtAuthzMetrics: one RPC's check
// counted by its outcome. An outcome that is none of a92.Outcomes is dropped.
func (m *ExtAuthzMetrics) ClientExtAuthz(target, backendService, outcome string) {
	i := a92.Index(outcome)
	if i < 0 {
		return
	}
	attrs := metric.WithAttributes(attribute.String(a92.KeyTarget, target), attribute.String(a92.KeyBackendService, backendService))
	if m.http {
		attrs = metric.WithAttributes(attribute.String(a92.KeyBackendService, backendService))
	}
	m.client[i].Add(context.Background(), 1, attrs)
}

// ServerExtAuthz implements xdsserver.ExtAuthzMetrics.
func (m *ExtAuthzMetrics) ServerExtAuthz(outcome string) {
	i := a92.Index(outcome)
	if i < 0 {
		return
	}
	m.server[i].Add(context.Background(), 1)
}
