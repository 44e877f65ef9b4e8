package a94_test

import (
	"slices"
	"strings"
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

// Each HTTP instrument is its gRPC counterpart's, renamed: the same unit,
// and the same labels less grpc.target.
func TestHTTPInstrumentsMirrorA94(t *testing.T) {
	if len(a94.HTTP) != len(a94.All) {
		t.Fatalf("%d HTTP instruments, %d gRPC ones", len(a94.HTTP), len(a94.All))
	}
	for i, h := range a94.HTTP {
		g := a94.All[i]
		if h.Unit != g.Unit || !slices.Equal(h.Labels, g.Labels[1:]) || g.Labels[0] != a94.KeyTarget {
			t.Errorf("%s: unit %q, labels %q; %s has %q, %q", h.Name, h.Unit, h.Labels, g.Name, g.Unit, g.Labels)
		}
		if _, suffix, _ := strings.Cut(g.Name, "grpc.subchannel."); h.Name != "goxds.http.client."+suffix {
			t.Errorf("%s: want goxds.http.client.%s, the counterpart of %s", h.Name, suffix, g.Name)
		}
	}
}
