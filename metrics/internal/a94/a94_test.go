package a94_test

import (
	"slices"
	"testing"

	_ "google.golang.org/grpc" // registers grpc-go's subchannel metrics
	estats "google.golang.org/grpc/experimental/stats"

	"github.com/goxds/xds/metrics/internal/a94"
)

// Every instrument is named and described as grpc-go (the version in
// go.mod) registers it, with its labels among grpc-go's: a dashboard
// built on grpc-go's subchannel metrics finds goxds's under the same
// names. A grpc-go upgrade that changes one fails here.
func TestInstrumentsAreGRPCGos(t *testing.T) {
	for _, in := range a94.All {
		d := estats.DescriptorForMetric(estats.Metric(in.Name))
		if d == nil {
			t.Errorf("grpc-go registers no metric %q", in.Name)
			continue
		}
		unit := d.Unit
		if in.Name == a94.OpenConnections.Name {
			unit = "{connection}" // gRFC A94's; grpc-go's "{attempt}" is a slip
		}
		all := append(slices.Clone(d.Labels), d.OptionalLabels...)
		for _, l := range in.Labels {
			if !slices.Contains(all, l) {
				t.Errorf("%s: label %q; grpc-go has %q", in.Name, l, all)
			}
		}
		if d.Description != in.Description || unit != in.Unit || !slices.Equal(d.Labels, in.Labels[:len(d.Labels)]) {
			t.Errorf("%s: description %q, unit %q, labels %q; grpc-go has %q, %q, %q then %q",
				in.Name, in.Description, in.Unit, in.Labels, d.Description, d.Unit, d.Labels, d.OptionalLabels)
		}
	}
}
