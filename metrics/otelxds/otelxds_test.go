package otelxds_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/goxds/xds/internal/metricstest"
	"github.com/goxds/xds/metrics/otelxds"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collected is one collection: per instrument, its value per attribute
// set, the set written "k=v,k=v" in key order.
type collected map[string]map[string]int64

func collect(t *testing.T, r *sdkmetric.ManualReader) (collected, map[string]metricdata.Metrics) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := collected{}
	meta := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelxds.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelxds.ScopeName)
		}
		for _, m := range sm.Metrics {
			meta[m.Name] = m
			vals := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s is not a cumulative monotonic sum", m.Name)
				}
				for _, p := range d.DataPoints {
					vals[attrs(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					vals[attrs(p.Attributes)] = p.Value
				}
			default:
				t.Errorf("%s has data %T", m.Name, m.Data)
			}
			out[m.Name] = vals
		}
	}
	return out, meta
}

func attrs(s attribute.Set) string {
	var kvs []string
	for _, kv := range s.ToSlice() {
		kvs = append(kvs, string(kv.Key)+"="+kv.Value.Emit())
	}
	sort.Strings(kvs)
	return strings.Join(kvs, ",")
}

// The adapter, fed by a real client of go-control-plane's server through a
// valid update, a NACKed one and the server's failure, reports what the
// client counted, under grpc-go's instrument names, units, descriptions
// and attributes.
func TestOTelMetricsOfARealClient(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := otelxds.New(mp, otelxds.Options{Target: "goxds:///svc"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	const target = "grpc.target=goxds:///svc"
	metricstest.Run(t, m, m.Observe, func(t *testing.T, s metricstest.Stage) {
		got, meta := collect(t, reader)
		server := "grpc.xds.server=" + s.Server
		cds := "grpc.xds.resource_type=ClusterResource"
		switch s.Name {
		case metricstest.StageValid:
			want := collected{
				"grpc.xds_client.resource_updates_valid": {join(target, server, cds): s.Valid},
				"grpc.xds_client.connected":              {join(target, server): 1},
				"grpc.xds_client.resources": {
					join("grpc.xds.authority=#old", "grpc.xds.cache_state=acked", cds, target): 1,
				},
			}
			wantCollected(t, s.Name, got, want)
		case metricstest.StageNACKed:
			if v := got["grpc.xds_client.resource_updates_invalid"][join(target, server, cds)]; v < 1 {
				t.Errorf("%s: invalid updates %d, want at least 1", s.Name, v)
			}
			if v := got["grpc.xds_client.resources"][join("grpc.xds.authority=#old", "grpc.xds.cache_state=nacked_but_cached", cds, target)]; v != 1 {
				t.Errorf("%s: resources nacked_but_cached %d, want 1 (%v)", s.Name, v, got["grpc.xds_client.resources"])
			}
		case metricstest.StageFailed:
			// The server is gone: nothing moves any more, and each value
			// must be exactly what the client reported.
			want := collected{
				"grpc.xds_client.resource_updates_valid":   {join(target, server, cds): s.Valid},
				"grpc.xds_client.resource_updates_invalid": {join(target, server, cds): s.Invalid},
				"grpc.xds_client.server_failure":           {join(target, server): 1},
				"grpc.xds_client.connected":                {join(target, server): 0},
				"grpc.xds_client.resources": {
					join("grpc.xds.authority=#old", "grpc.xds.cache_state=nacked_but_cached", cds, target): 1,
				},
			}
			wantCollected(t, s.Name, got, want)
			wantMeta(t, meta)
			t.Logf("client reported %d valid, %d invalid, %d failures", s.Valid, s.Invalid, s.Failures)
		}
	})
	// Closed, the gauges stop; the counters stay.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := collect(t, reader)
	if len(got["grpc.xds_client.connected"])+len(got["grpc.xds_client.resources"]) != 0 || len(got["grpc.xds_client.server_failure"]) != 1 {
		t.Errorf("after Close: %v, want the counters only", got)
	}
}

func join(kvs ...string) string {
	sort.Strings(kvs)
	return strings.Join(kvs, ",")
}

func wantCollected(t *testing.T, stage string, got, want collected) {
	t.Helper()
	for name, w := range want {
		if fmt.Sprint(got[name]) != fmt.Sprint(w) {
			t.Errorf("%s: %s = %v, want %v", stage, name, got[name], w)
		}
	}
}

// wantMeta checks each instrument's description and unit against
// grpc-go's.
func wantMeta(t *testing.T, meta map[string]metricdata.Metrics) {
	t.Helper()
	for _, in := range wantInstruments {
		m, ok := meta[in.Name]
		if !ok {
			t.Errorf("no %s", in.Name)
			continue
		}
		if m.Description != in.Description || m.Unit != in.Unit {
			t.Errorf("%s: description %q unit %q, want %q %q", in.Name, m.Description, m.Unit, in.Description, in.Unit)
		}
	}
}

// wantInstruments are grpc-go's instruments, as its OpenTelemetry plugin
// shows them (metrics/internal/a78 holds the adapter's copy to grpc-go's
// registry).
var wantInstruments = []struct{ Name, Description, Unit string }{
	{"grpc.xds_client.resource_updates_valid", "A counter of resources received that were considered valid. The counter will be incremented even for resources that have not changed.", "{resource}"},
	{"grpc.xds_client.resource_updates_invalid", "A counter of resources received that were considered invalid.", "{resource}"},
	{"grpc.xds_client.server_failure", "A counter of xDS servers going from healthy to unhealthy. A server goes unhealthy when we have a connectivity failure or when the ADS stream fails without seeing a response message, as per gRFC A57.", "{failure}"},
	{"grpc.xds_client.connected", "A metric that is 1 if the xDS Client has a working ADS stream to the server, 0 otherwise.", "{connected}"},
	{"grpc.xds_client.resources", "Counts of xDS resources.", "{resource}"},
}
