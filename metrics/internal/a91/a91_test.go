package a91_test

import (
	"slices"
	"testing"

	estats "google.golang.org/grpc/experimental/stats"
	_ "google.golang.org/grpc/xds" // registers grpc-go's outlier detection metrics

	"github.com/goxds/xds/metrics/internal/a91"
)

// Both counters are named, described and unit-ed as grpc-go (the version
// in go.mod) registers them, with grpc-go's labels in its order, then
// grpc.lb.backend_service (gRFC A91's optional label, which grpc-go does
// not record). A grpc-go upgrade that changes one fails here.
func TestInstrumentsAreGRPCGos(t *testing.T) {
	for _, in := range []a91.Instrument{a91.EjectionsEnforced, a91.EjectionsUnenforced} {
		d := estats.DescriptorForMetric(estats.Metric(in.Name))
		if d == nil {
			t.Errorf("grpc-go registers no metric %q", in.Name)
			continue
		}
		want := append(slices.Clone(d.Labels), a91.KeyBackendService)
		if d.Description != in.Description || d.Unit != in.Unit || !slices.Equal(want, in.Labels) {
			t.Errorf("%s: description %q, unit %q, labels %q; grpc-go has %q, %q, %q",
				in.Name, in.Description, in.Unit, in.Labels, d.Description, d.Unit, want)
		}
	}
}
