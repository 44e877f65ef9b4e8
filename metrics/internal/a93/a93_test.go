package a93_test

import (
	"slices"
	"testing"

	estats "google.golang.org/grpc/experimental/stats"
	_ "google.golang.org/grpc/xds" // registers grpc-go's ext_proc filter's metrics

	"github.com/goxds/xds/metrics/internal/a93"
)

// The client's histograms are named, described and unit-ed as grpc-go
// (the version in go.mod) registers them, with its labels, then
// grpc.lb.backend_service (gRFC A93's optional label, which grpc-go does
// not record); the server's have the same words under
// grpc.server_ext_proc and no label. A grpc-go upgrade that changes one
// fails here.
func TestInstrumentsAreGRPCGos(t *testing.T) {
	for _, e := range a93.Events {
		in := a93.Client(e)
		d := estats.DescriptorForMetric(estats.Metric(in.Name))
		if d == nil {
			t.Errorf("grpc-go registers no metric %q", in.Name)
			continue
		}
		want := append(slices.Clone(d.Labels), a93.KeyBackendService)
		if d.Description != in.Description || d.Unit != in.Unit || !slices.Equal(want, in.Labels) {
			t.Errorf("%s: description %q, unit %q, labels %q; grpc-go has %q, %q, %q",
				in.Name, in.Description, in.Unit, in.Labels, d.Description, d.Unit, want)
		}
		s := a93.Server(e)
		if s.Name != "grpc.server_ext_proc."+e+"_duration" || s.Description != in.Description || s.Unit != "s" || len(s.Labels) != 0 {
			t.Errorf("server's %v: %+v", e, s)
		}
	}
}
