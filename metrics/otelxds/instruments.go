package otelxds

import (
	"go.opentelemetry.io/otel/metric"

	"github.com/goxds/xds/metrics/internal/instrument"
)

// instruments makes the instruments of one gRFC table on a meter,
// keeping the first refusals it meets for errors.Join.
type instruments struct {
	meter metric.Meter
	errs  []error
}

// counter is in as an Int64Counter.
func (m *instruments) counter(in instrument.Instrument) metric.Int64Counter {
	c, err := m.meter.Int64Counter(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	m.errs = append(m.errs, err)
	return c
}

// upDown is in as an Int64UpDownCounter.
func (m *instruments) upDown(in instrument.Instrument) metric.Int64UpDownCounter {
	c, err := m.meter.Int64UpDownCounter(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	m.errs = append(m.errs, err)
	return c
}

// gauge is in as an Int64ObservableGauge, read when the reader collects.
func (m *instruments) gauge(in instrument.Instrument) metric.Int64ObservableGauge {
	g, err := m.meter.Int64ObservableGauge(in.Name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	m.errs = append(m.errs, err)
	return g
}
