package a78_test

import (
	"slices"
	"testing"

	estats "google.golang.org/grpc/experimental/stats"
	_ "google.golang.org/grpc/xds" // registers grpc-go's xDS client metrics

	"github.com/goxds/xds/metrics/internal/a78"
)

// Every instrument is spelt exactly as grpc-go (the version in go.mod)
// registers it: a dashboard built on grpc-go's xDS client metrics finds
// goxds's under the same names, units and labels. A grpc-go upgrade that
// changes one fails here.
func TestInstrumentsAreGRPCGos(t *testing.T) {
	for _, in := range a78.All {
		d := estats.DescriptorForMetric(estats.Metric(in.Name))
		if d == nil {
			t.Errorf("grpc-go registers no metric %q", in.Name)
			continue
		}
		if d.Description != in.Description || d.Unit != in.Unit || !slices.Equal(d.Labels, in.Labels) {
			t.Errorf("%s: description %q, unit %q, labels %q; grpc-go has %q, %q, %q",
				in.Name, in.Description, in.Unit, in.Labels, d.Description, d.Unit, d.Labels)
		}
	}
}

func TestResourceType(t *testing.T) {
	for typeURL, want := range map[string]string{
		"type.googleapis.com/envoy.config.listener.v3.Listener":                "ListenerResource",
		"type.googleapis.com/envoy.config.route.v3.RouteConfiguration":         "RouteConfigResource",
		"type.googleapis.com/envoy.config.cluster.v3.Cluster":                  "ClusterResource",
		"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment":   "EndpointsResource",
		"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret": "envoy.extensions.transport_sockets.tls.v3.Secret",
		"example.com/acme.Widget":                                              "acme.Widget",
		"bare":                                                                 "bare",
	} {
		if got := a78.ResourceType(typeURL); got != want {
			t.Errorf("ResourceType(%q) = %q, want %q", typeURL, got, want)
		}
	}
}
