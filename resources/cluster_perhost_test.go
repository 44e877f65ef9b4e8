package resources

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// perHost sets the cluster's per_host_thresholds.
func perHost(ts ...*clusterv3.CircuitBreakers_Thresholds) func(c *clusterv3.Cluster) {
	return func(c *clusterv3.Cluster) {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{PerHostThresholds: ts}
	}
}

func TestDecodeClusterPerHostThresholds(t *testing.T) {
	def := corev3.RoutingPriority_DEFAULT
	high := corev3.RoutingPriority_HIGH
	tests := []struct {
		name    string
		edit    func(c *clusterv3.Cluster)
		want    uint32
		wantErr string
	}{
		{name: "unset", edit: func(*clusterv3.Cluster) {}},
		{name: "no per-host thresholds", edit: maxRequests(def, 5)},
		{name: "DEFAULT", edit: perHost(&clusterv3.CircuitBreakers_Thresholds{Priority: def, MaxConnections: wrapperspb.UInt32(3)}), want: 3},
		{name: "first DEFAULT counts", edit: perHost(
			&clusterv3.CircuitBreakers_Thresholds{Priority: high, MaxConnections: wrapperspb.UInt32(0)},
			&clusterv3.CircuitBreakers_Thresholds{Priority: def, MaxConnections: wrapperspb.UInt32(4)},
			&clusterv3.CircuitBreakers_Thresholds{Priority: def, MaxConnections: wrapperspb.UInt32(0)}), want: 4},
		{name: "DEFAULT without max_connections", edit: perHost(
			&clusterv3.CircuitBreakers_Thresholds{Priority: def, MaxRequests: wrapperspb.UInt32(2)},
			&clusterv3.CircuitBreakers_Thresholds{Priority: def, MaxConnections: wrapperspb.UInt32(6)})},
		{name: "large", edit: perHost(&clusterv3.CircuitBreakers_Thresholds{Priority: def, MaxConnections: wrapperspb.UInt32(1 << 20)}), want: 1 << 20},
		{name: "zero", edit: perHost(
			&clusterv3.CircuitBreakers_Thresholds{Priority: high, MaxConnections: wrapperspb.UInt32(1)},
			&clusterv3.CircuitBreakers_Thresholds{Priority: def, MaxConnections: wrapperspb.UInt32(0)}),
			wantErr: "circuit_breakers.per_host_thresholds[1].max_connections: must be at least 1, got 0"},
	}
	for _, on := range []bool{true, false} {
		if on {
			t.Setenv(EnvConnectionScaling, "True")
		} else {
			t.Setenv(EnvConnectionScaling, "")
		}
		for _, tt := range tests {
			in := edsCluster("c", "")
			tt.edit(in)
			_, c, err := decodeMsg(ClusterType, in)
			switch {
			case !on && err != nil:
				t.Errorf("%s, scaling off: %v; want the thresholds ignored", tt.name, err)
			case !on && c.MaxConnectionsPerHost != 0:
				t.Errorf("%s, scaling off: MaxConnectionsPerHost = %d, want 0", tt.name, c.MaxConnectionsPerHost)
			case !on:
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("%s: %v", tt.name, err)
			case c.MaxConnectionsPerHost != tt.want:
				t.Errorf("%s: MaxConnectionsPerHost = %d, want %d", tt.name, c.MaxConnectionsPerHost, tt.want)
			}
		}
	}
}
