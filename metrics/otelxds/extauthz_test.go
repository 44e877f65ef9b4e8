package otelxds_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/metrics/otelxds"
	"github.com/goxds/xds/xdsserver"
)

var (
	_ grpcxds.ExtAuthzMetrics   = (*otelxds.ExtAuthzMetrics)(nil)
	_ xdsserver.ExtAuthzMetrics = (*otelxds.ExtAuthzMetrics)(nil)
)

// collectSums returns the sums of the counters mp's reader holds, by name
// and then by attribute set.
func collectSums(t *testing.T, reader *sdkmetric.ManualReader) map[string]map[attribute.Distinct]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[attribute.Distinct]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mm := range sm.Metrics {
			sum, ok := mm.Data.(metricdata.Sum[int64])
			if !ok || !sum.IsMonotonic || mm.Unit == "" {
				t.Fatalf("%s: %T %+v, want a monotonic int64 sum with a unit", mm.Name, mm.Data, mm)
			}
			out[mm.Name] = map[attribute.Distinct]int64{}
			for _, dp := range sum.DataPoints {
				out[mm.Name][dp.Attributes.Equivalent()] = dp.Value
			}
		}
	}
	return out
}

// Each check counts once on the counter of its outcome: the client's
// labelled with the channel's target and the RPC's cluster, the server's
// with none (gRFC A92).
func TestExtAuthzMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelxds.NewExtAuthzMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	m.ClientExtAuthz("goxds:///svc", "cluster-a", "allowed")
	m.ClientExtAuthz("goxds:///svc", "cluster-a", "allowed")
	m.ClientExtAuthz("goxds:///svc", "cluster-b", "denied")
	m.ClientExtAuthz("goxds:///svc", "cluster-a", "filter_disabled")
	m.ClientExtAuthz("goxds:///svc", "", "failed")
	m.ClientExtAuthz("goxds:///svc", "cluster-a", "bogus") // dropped
	m.ServerExtAuthz("denied")
	m.ServerExtAuthz("failed")
	m.ServerExtAuthz("failed")

	got := collectSums(t, reader)
	labels := func(cluster string) attribute.Distinct {
		s := attribute.NewSet(attribute.String("grpc.target", "goxds:///svc"), attribute.String("grpc.lb.backend_service", cluster))
		return s.Equivalent()
	}
	empty := attribute.NewSet()
	none := empty.Equivalent()
	for name, want := range map[string]map[attribute.Distinct]int64{
		"grpc.client_ext_authz.allowed_rpcs":         {labels("cluster-a"): 2},
		"grpc.client_ext_authz.denied_rpcs":          {labels("cluster-b"): 1},
		"grpc.client_ext_authz.filter_disabled_rpcs": {labels("cluster-a"): 1},
		"grpc.client_ext_authz.failed_rpcs":          {labels(""): 1},
		"grpc.server_ext_authz.denied_rpcs":          {none: 1},
		"grpc.server_ext_authz.failed_rpcs":          {none: 2},
	} {
		if g := got[name]; len(g) != len(want) || g[firstKey(want)] != want[firstKey(want)] {
			t.Errorf("%s: %v, want %v", name, g, want)
		}
	}
	if len(got) != 6 {
		t.Errorf("%d counters with data, want 6: %v", len(got), got)
	}
}

// The HTTP side's counters have goxds's names, and the client's no
// grpc.target.
func TestHTTPExtAuthzMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelxds.NewHTTPExtAuthzMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	m.ClientExtAuthz("", "cluster-a", "denied")
	m.ServerExtAuthz("allowed")
	got := collectSums(t, reader)
	set, empty := attribute.NewSet(attribute.String("grpc.lb.backend_service", "cluster-a")), attribute.NewSet()
	if got["goxds.http.client_ext_authz.denied_requests"][set.Equivalent()] != 1 || got["goxds.http.server_ext_authz.allowed_requests"][empty.Equivalent()] != 1 || len(got) != 2 {
		t.Errorf("counters %v", got)
	}
}

func firstKey(m map[attribute.Distinct]int64) attribute.Distinct {
	for k := range m {
		return k
	}
	return attribute.Distinct{}
}
