package otelxds_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/metrics/otelxds"
	"github.com/goxds/xds/xdsserver"
)

var (
	_ grpcxds.ExtProcMetrics   = (*otelxds.ExtProcMetrics)(nil)
	_ xdsserver.ExtProcMetrics = (*otelxds.ExtProcMetrics)(nil)
)

// Each event is one measurement, in seconds, of its side's histogram
// (grpc-go's names for the client's): the client's labelled with the
// target and backend service, the server's with none, in gRFC A66's
// latency buckets.
func TestExtProcMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelxds.NewExtProcMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	m.ClientExtProcDuration("goxds:///svc", "cluster-a", "client_headers", 1500*time.Millisecond)
	m.ClientExtProcDuration("goxds:///svc", "cluster-a", "client_headers", 250*time.Millisecond)
	m.ServerExtProcDuration("server_trailers", 2*time.Second)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, mm := range sm.Metrics {
			got[mm.Name] = mm
		}
	}
	check := func(name string, labels attribute.Set, count uint64, sum float64) {
		t.Helper()
		h, ok := got[name].Data.(metricdata.Histogram[float64])
		if !ok || got[name].Unit != "s" || len(h.DataPoints) != 1 {
			t.Fatalf("%s: %+v", name, got[name])
		}
		dp := h.DataPoints[0]
		if !dp.Attributes.Equals(&labels) || dp.Count != count || dp.Sum != sum || len(dp.Bounds) != 41 || dp.Bounds[40] != 100 {
			t.Errorf("%s: labels %v count %d sum %v bounds %v; want %v, %d, %v, gRFC A66's 41", name, dp.Attributes, dp.Count, dp.Sum, dp.Bounds, labels, count, sum)
		}
	}
	check("grpc.client_ext_proc.client_headers_duration",
		attribute.NewSet(attribute.String("grpc.target", "goxds:///svc"), attribute.String("grpc.lb.backend_service", "cluster-a")), 2, 1.75)
	check("grpc.server_ext_proc.server_trailers_duration", *attribute.EmptySet(), 1, 2)
	if _, ok := got["grpc.client_ext_proc.client_half_close_duration"]; ok {
		t.Errorf("an unmeasured histogram was exported: %+v", got["grpc.client_ext_proc.client_half_close_duration"])
	}
}
