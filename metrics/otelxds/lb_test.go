package otelxds_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/internal/metricstest"
	"github.com/goxds/xds/metrics/otelxds"
)

var (
	_ grpcxds.OutlierMetrics    = (*otelxds.OutlierMetrics)(nil)
	_ grpcxds.SubchannelMetrics = (*otelxds.SubchannelMetrics)(nil)
)

// sums collects reader and returns each int64 sum's points by their
// attributes, and each instrument's unit and monotonicity.
func sums(t *testing.T, reader *sdkmetric.ManualReader) (map[string]map[attribute.Distinct]int64, map[string]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	points, kinds := map[string]map[attribute.Distinct]int64{}, map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelxds.ScopeName {
			t.Errorf("meter %q, want %q", sm.Scope.Name, otelxds.ScopeName)
		}
		for _, m := range sm.Metrics {
			s, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s: %T, want an int64 sum", m.Name, m.Data)
			}
			kind := "updown"
			if s.IsMonotonic {
				kind = "counter"
			}
			kinds[m.Name] = m.Unit + " " + kind
			points[m.Name] = map[attribute.Distinct]int64{}
			for _, dp := range s.DataPoints {
				points[m.Name][dp.Attributes.Equivalent()] = dp.Value
			}
		}
	}
	return points, kinds
}

func attrsOf(kv ...string) attribute.Distinct {
	var out []attribute.KeyValue
	for i := 0; i < len(kv); i += 2 {
		out = append(out, attribute.String(kv[i], kv[i+1]))
	}
	s := attribute.NewSet(out...)
	return s.Equivalent()
}

// gRFC A91: each outlier goxds's outlier detection finds, driven on a
// fake clock, is one count of grpc.lb.outlier_detection.ejections_enforced
// or _unenforced, by target, detection method, reason and backend
// service.
func TestOutlierMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelxds.NewOutlierMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	heard := metricstest.RunOutlier(t, m)
	want := map[string]map[attribute.Distinct]int64{
		"grpc.lb.outlier_detection.ejections_enforced":   {},
		"grpc.lb.outlier_detection.ejections_unenforced": {},
	}
	for k, n := range heard {
		if k.Reason == "" {
			want["grpc.lb.outlier_detection.ejections_enforced"][attrsOf("grpc.target", k.Target,
				"grpc.lb.backend_service", k.BackendService, "grpc.lb.outlier_detection.detection_method", k.Method)] = int64(n)
			continue
		}
		want["grpc.lb.outlier_detection.ejections_unenforced"][attrsOf("grpc.target", k.Target,
			"grpc.lb.backend_service", k.BackendService, "grpc.lb.outlier_detection.detection_method", k.Method,
			"grpc.lb.outlier_detection.unenforced_reason", k.Reason)] = int64(n)
	}
	got, kinds := sums(t, reader)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b attribute.Distinct) bool { return a == b })); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
	for name, kind := range kinds {
		if kind != "{ejection} counter" {
			t.Errorf("%s: %s, want {ejection} counter", name, kind)
		}
	}
}

// gRFC A94: a real goxds channel's connection attempts (succeeded against
// a server, failed against a closed port), disconnections (a server
// stopped: "unknown"; an endpoint leaving the configuration: "subchannel
// shutdown") and open connections, by target, backend service and
// locality, read back at each stage exactly as the channel reported them.
func TestSubchannelMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelxds.NewSubchannelMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	metricstest.RunSubchannel(t, m, func(t *testing.T, s metricstest.ConnStage) {
		conn := func(k metricstest.ConnKey) attribute.Distinct {
			return attrsOf("grpc.target", k.Target, "grpc.lb.backend_service", k.BackendService, "grpc.lb.locality", k.Locality)
		}
		series := func(m map[metricstest.ConnKey]int) map[attribute.Distinct]int64 {
			out := map[attribute.Distinct]int64{}
			for k, v := range m {
				out[conn(k)] = int64(v)
			}
			return out
		}
		want := map[string]map[attribute.Distinct]int64{
			"grpc.subchannel.connection_attempts_succeeded": series(s.Succeeded),
			"grpc.subchannel.connection_attempts_failed":    series(s.Failed),
			"grpc.subchannel.open_connections":              series(s.Open),
		}
		if len(s.Disconnections) > 0 {
			d := map[attribute.Distinct]int64{}
			for k, v := range s.Disconnections {
				d[attrsOf("grpc.target", k.Target, "grpc.lb.backend_service", k.BackendService, "grpc.lb.locality", k.Locality,
					"grpc.disconnect_error", k.Reason)] = int64(v)
			}
			want["grpc.subchannel.disconnections"] = d
		}
		got, kinds := sums(t, reader)
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b attribute.Distinct) bool { return a == b })); diff != "" {
			t.Errorf("stage %s (-want +got):\n%s", s.Name, diff)
		}
		wantKinds := map[string]string{
			"grpc.subchannel.connection_attempts_succeeded": "{attempt} counter",
			"grpc.subchannel.connection_attempts_failed":    "{attempt} counter",
			"grpc.subchannel.open_connections":              "{connection} updown",
		}
		if len(s.Disconnections) > 0 {
			wantKinds["grpc.subchannel.disconnections"] = "{disconnection} counter"
		}
		if diff := cmp.Diff(wantKinds, kinds); diff != "" {
			t.Errorf("stage %s: instruments (-want +got):\n%s", s.Name, diff)
		}
	})
}

// The HTTP client's connection metrics are A94's under goxds's names
// (goxds.http.client.*), with the same units, kinds and labels less
// grpc.target, which an HTTP client has none of.
func TestHTTPConnectionMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelxds.NewHTTPConnectionMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	const loc = `{region="r", zone="z", sub_zone=""}`
	m.ConnectionAttemptSucceeded("", "c", loc)
	m.OpenConnections("", "c", loc, 1)
	m.ConnectionAttemptSucceeded("", "c", loc)
	m.OpenConnections("", "c", loc, 1)
	m.ConnectionAttemptFailed("", "d", loc)
	m.Disconnection("", "c", loc, "connection reset")
	m.OpenConnections("", "c", loc, -1)
	c, d := attrsOf("grpc.lb.backend_service", "c", "grpc.lb.locality", loc), attrsOf("grpc.lb.backend_service", "d", "grpc.lb.locality", loc)
	want := map[string]map[attribute.Distinct]int64{
		"goxds.http.client.connection_attempts_succeeded": {c: 2},
		"goxds.http.client.connection_attempts_failed":    {d: 1},
		"goxds.http.client.open_connections":              {c: 1},
		"goxds.http.client.disconnections": {attrsOf("grpc.lb.backend_service", "c", "grpc.lb.locality", loc,
			"grpc.disconnect_error", "connection reset"): 1},
	}
	got, kinds := sums(t, reader)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b attribute.Distinct) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	wantKinds := map[string]string{
		"goxds.http.client.connection_attempts_succeeded": "{attempt} counter",
		"goxds.http.client.connection_attempts_failed":    "{attempt} counter",
		"goxds.http.client.open_connections":              "{connection} updown",
		"goxds.http.client.disconnections":                "{disconnection} counter",
	}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("instruments (-want +got):\n%s", diff)
	}
	if _, err := otelxds.NewHTTPConnectionMetrics(nil); err == nil {
		t.Error("NewHTTPConnectionMetrics(nil): no error")
	}
}
