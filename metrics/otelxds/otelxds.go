package otelxds

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/metrics/internal/a78"
)

// ScopeName is the instrumentation scope of the instruments: the meter
// they come from.
const ScopeName = "github.com/goxds/xds/metrics/otelxds"

// Options configures New. The zero value is ready to use.
type Options struct {
	// Target is the grpc.target attribute of every measurement. grpc-go
	// keeps an xDS client per channel target and puts that target there;
	// a goxds client serves every watch and channel of the program that
	// uses it, so it has no target of its own: name it, for instance after
	// the listener it follows, or the channel target if it serves one
	// channel ("goxds:///my-service"). Empty: "#goxds".
	Target string
	// ResourceTypeLabel gives the grpc.xds.resource_type attribute of a
	// type URL. Nil: grpc-go's names for the types it knows
	// ("ListenerResource", "RouteConfigResource", "ClusterResource",
	// "EndpointsResource"), the message name (the type URL without
	// "type.googleapis.com/", as gRFC A78 spells types) for the others.
	ResourceTypeLabel func(typeURL string) string
}

// Metrics records a goxds client's measurements on OpenTelemetry
// instruments. It implements [client.Metrics]: give it to the client in
// [client.Options].Metrics, then call [Metrics.Observe] with the client so
// that the resources gauge can count its cache. One Metrics serves one
// client. Its methods are safe for concurrent use.
type Metrics struct {
	target    attribute.KeyValue
	typeLabel func(string) string

	valid, invalid, failures metric.Int64Counter
	connected                a78.ConnectedSet
	client                   a78.ClientRef

	// reg is the gauges' callback registration; Close unregisters it.
	reg       metric.Registration
	closeOnce sync.Once
	closeErr  error
}

// New makes the instruments of gRFC A78 on a meter of mp, with the names,
// units, descriptions and attributes grpc-go's OpenTelemetry plugin gives
// them. It fails only if mp refuses an instrument.
func New(mp metric.MeterProvider, opts Options) (*Metrics, error) {
	if mp == nil {
		return nil, errors.New("otelxds: nil MeterProvider")
	}
	target := opts.Target
	if target == "" {
		target = a78.DefaultTarget
	}
	m := &Metrics{target: attribute.String(a78.KeyTarget, target), typeLabel: opts.ResourceTypeLabel}
	if m.typeLabel == nil {
		m.typeLabel = a78.ResourceType
	}
	meter := mp.Meter(ScopeName)
	ins := &instruments{meter: meter}
	m.valid = ins.counter(a78.ResourceUpdatesValid)
	m.invalid = ins.counter(a78.ResourceUpdatesInvalid)
	m.failures = ins.counter(a78.ServerFailure)
	// The two gauges are asynchronous, as grpc-go's are: read when the
	// reader collects, so they cost nothing between collections.
	connected := ins.gauge(a78.Connected)
	resources := ins.gauge(a78.Resources)
	if err := errors.Join(ins.errs...); err != nil {
		return nil, err
	}
	var err error
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m.observe(o, connected, resources)
		return nil
	}, connected, resources)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Observe makes c the client whose cache the grpc.xds_client.resources
// gauge counts, by authority, resource type and cache state
// ([client.Client.ResourceCounts]). Until then the gauge has no value.
func (m *Metrics) Observe(c *client.Client) { m.client.Set(c) }

// Close stops the gauges: a closed client's servers and cache are no
// longer reported. The counters keep what they counted.
func (m *Metrics) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.reg.Unregister() })
	return m.closeErr
}

func (m *Metrics) observe(o metric.Observer, connected, resources metric.Int64Observable) {
	for _, s := range m.connected.Snapshot() {
		v := int64(0)
		if s.Connected {
			v = 1
		}
		o.ObserveInt64(connected, v, metric.WithAttributes(m.target, attribute.String(a78.KeyServer, s.Server)))
	}
	for _, rc := range m.client.Counts() {
		o.ObserveInt64(resources, int64(rc.Count), metric.WithAttributes(m.target,
			attribute.String(a78.KeyAuthority, rc.Authority),
			attribute.String(a78.KeyCacheState, rc.CacheState),
			attribute.String(a78.KeyResourceType, m.typeLabel(rc.TypeURL))))
	}
}

// ResourceUpdates implements [client.Metrics]: it adds to
// grpc.xds_client.resource_updates_valid and _invalid.
func (m *Metrics) ResourceUpdates(server, typeURL string, valid, invalid int) {
	if valid == 0 && invalid == 0 {
		return
	}
	attrs := metric.WithAttributes(m.target, attribute.String(a78.KeyServer, server),
		attribute.String(a78.KeyResourceType, m.typeLabel(typeURL)))
	ctx := context.Background()
	if valid > 0 {
		m.valid.Add(ctx, int64(valid), attrs)
	}
	if invalid > 0 {
		m.invalid.Add(ctx, int64(invalid), attrs)
	}
}

// ServerFailure implements [client.Metrics]: it counts one
// grpc.xds_client.server_failure.
func (m *Metrics) ServerFailure(server string) {
	m.failures.Add(context.Background(), 1, metric.WithAttributes(m.target, attribute.String(a78.KeyServer, server)))
}

// Connected implements [client.Metrics]: grpc.xds_client.connected reports
// it on collection.
func (m *Metrics) Connected(server string, connected bool) { m.connected.Set(server, connected) }

var _ client.Metrics = (*Metrics)(nil)
