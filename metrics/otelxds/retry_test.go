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
)

var _ grpcxds.RetryMetrics = (*otelxds.RetryMetrics)(nil)

// Each retried call is one measurement of grpc.client.call.retries and one
// of grpc.client.call.retry_delay (seconds), labelled with its method and
// target, in gRFC A96's buckets.
func TestRetryMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelxds.NewRetryMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	m.CallRetried("goxds:///svc", "pkg.S/M", 2, 1500*time.Millisecond)
	m.CallRetried("goxds:///svc", "pkg.S/M", 7, 250*time.Millisecond)
	m.CallRetried("goxds:///svc", "pkg.S/Other", 1, 0)

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
	labels := attribute.NewSet(attribute.String("grpc.method", "pkg.S/M"), attribute.String("grpc.target", "goxds:///svc"))

	retries, ok := got["grpc.client.call.retries"].Data.(metricdata.Histogram[int64])
	if !ok || got["grpc.client.call.retries"].Unit != "{retry}" {
		t.Fatalf("grpc.client.call.retries: %+v", got["grpc.client.call.retries"])
	}
	found := false
	for _, dp := range retries.DataPoints {
		if !dp.Attributes.Equals(&labels) {
			continue
		}
		found = true
		// Buckets (-inf,1] (1,2] (2,3] (3,4] (4,5] (5,+inf): 2 and 7.
		want := []uint64{0, 1, 0, 0, 0, 1}
		if dp.Count != 2 || dp.Sum != 9 || len(dp.BucketCounts) != len(want) || !equalCounts(dp.BucketCounts, want) || len(dp.Bounds) != 5 {
			t.Errorf("retries of pkg.S/M: count %d sum %d bounds %v buckets %v; want 2, 9, [1..5], %v", dp.Count, dp.Sum, dp.Bounds, dp.BucketCounts, want)
		}
	}
	if !found || len(retries.DataPoints) != 2 {
		t.Errorf("retries data points %+v; want pkg.S/M and pkg.S/Other", retries.DataPoints)
	}

	delay, ok := got["grpc.client.call.retry_delay"].Data.(metricdata.Histogram[float64])
	if !ok || got["grpc.client.call.retry_delay"].Unit != "s" {
		t.Fatalf("grpc.client.call.retry_delay: %+v", got["grpc.client.call.retry_delay"])
	}
	for _, dp := range delay.DataPoints {
		if dp.Attributes.Equals(&labels) && (dp.Count != 2 || dp.Sum != 1.75 || len(dp.Bounds) != 41 || dp.Bounds[40] != 100) {
			t.Errorf("retry_delay of pkg.S/M: count %d sum %v bounds %v; want 2, 1.75, gRFC A66's 41 latency bounds", dp.Count, dp.Sum, dp.Bounds)
		}
	}
}

func equalCounts(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
