package resources

import (
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Decoders recycle their top-level messages (msgPool): a value decoded
// earlier must come out of many later decodes, of resources with the same
// fields set to other values, exactly as a fresh decode of its resource
// makes it, down to the sub-messages it keeps.
func TestRecycledMessagesLeaveDecodedValuesIntact(t *testing.T) {
	mkCluster := func(i int) *clusterv3.Cluster {
		c := edsCluster(fmt.Sprintf("cluster-%d", i), fmt.Sprintf("svc-%d", i))
		c.OutlierDetection = &clusterv3.OutlierDetection{
			Interval:           durationpb.New(time.Duration(i+1) * time.Second),
			MaxEjectionPercent: wrapperspb.UInt32(uint32(i%100 + 1)),
		}
		c.LrsReportEndpointMetrics = []string{fmt.Sprintf("cpu-%d", i), "mem"}
		c.TransportSocket = tlsSocket(upstreamTLS(fmt.Sprintf("sni-%d.example", i)))
		return c
	}
	mkCLA := func(i int) *endpointv3.ClusterLoadAssignment {
		ep := lbEndpoint("10.0.0.1", uint32(1000+i))
		ep.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"envoy.lb": {Fields: map[string]*structpb.Value{"i": structpb.NewNumberValue(float64(i))}},
		}}
		ep.GetEndpoint().Hostname = fmt.Sprintf("host-%d", i)
		return cla(fmt.Sprintf("svc-%d", i), locality(fmt.Sprintf("r-%d", i), 0, uint32(i+1), ep, lbEndpoint("10.0.0.2", uint32(2000+i))))
	}
	opts := cmp.Options{protocmp.Transform(), cmp.Exporter(func(reflect.Type) bool { return true })}

	_, c0, err := decodeMsg(ClusterType, mkCluster(0))
	if err != nil {
		t.Fatal(err)
	}
	_, e0, err := decodeMsg(EndpointsType, mkCLA(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 200; i++ {
		if _, _, err := decodeMsg(ClusterType, mkCluster(i)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := decodeMsg(EndpointsType, mkCLA(i)); err != nil {
			t.Fatal(err)
		}
		// A resource that fails to decode returns its message too.
		bad := mkCluster(i)
		bad.EdsClusterConfig = nil
		if _, _, err := decodeMsg(ClusterType, bad); err == nil {
			t.Fatal("a Cluster without eds_cluster_config decoded")
		}
	}
	_, c0again, err := decodeMsg(ClusterType, mkCluster(0))
	if err != nil {
		t.Fatal(err)
	}
	_, e0again, err := decodeMsg(EndpointsType, mkCLA(0))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c0again, c0, opts); diff != "" {
		t.Errorf("a Cluster changed after later decodes (-fresh +kept):\n%s", diff)
	}
	if diff := cmp.Diff(e0again, e0, opts); diff != "" {
		t.Errorf("an Endpoints changed after later decodes (-fresh +kept):\n%s", diff)
	}
	if !proto.Equal(c0.Raw(), mkCluster(0)) || !proto.Equal(e0.Raw(), mkCLA(0)) {
		t.Error("Raw of a value decoded earlier changed")
	}
}

// Uniqueness of addresses and localities is checked by a scan in small
// assignments and by a map in large ones: both find the same duplicates,
// and report them at the same place.
func TestDuplicatesFoundInSmallAndLargeAssignments(t *testing.T) {
	for _, n := range []int{2, maxScanned, maxScanned + 1, 3 * maxScanned} {
		eps := make([]*endpointv3.LbEndpoint, n)
		for i := range eps {
			eps[i] = lbEndpoint(fmt.Sprintf("10.0.%d.%d", i/256, i%256), 80)
		}
		eps[n-1] = lbEndpoint("10.0.0.0", 80) // the first's address
		_, _, err := decodeMsg(EndpointsType, cla("c", locality("r", 0, 1, eps...)))
		want := fmt.Sprintf("endpoints[0].lb_endpoints[%d].endpoint.address: duplicate address 10.0.0.0:80 in the assignment", n-1)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d addresses, the last a duplicate: error %v, want %q", n, err, want)
		}

		locs := make([]*endpointv3.LocalityLbEndpoints, n)
		for i := range locs {
			locs[i] = locality(fmt.Sprintf("r-%d", i), 0, 1, lbEndpoint("10.1.0.1", uint32(1000+i)))
		}
		locs[n-1].Locality.Region = "r-0"
		_, _, err = decodeMsg(EndpointsType, cla("c", locs...))
		want = fmt.Sprintf(`endpoints[%d].locality: duplicate locality {region="r-0" zone="" sub_zone=""} at priority 0`, n-1)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d localities, the last a duplicate: error %v, want %q", n, err, want)
		}

		locs[n-1].Locality.Region = fmt.Sprintf("r-%d", n-1)
		if _, e, err := decodeMsg(EndpointsType, cla("c", locs...)); err != nil || len(e.Localities) != n {
			t.Errorf("%d distinct localities: %v", n, err)
		}
	}
}

// joinHostPort spells addresses as net.JoinHostPort does.
func TestJoinHostPortIsNetJoinHostPort(t *testing.T) {
	for _, tt := range []struct {
		host string
		port uint32
	}{{"10.0.0.1", 80}, {"127.0.0.1", 65535}, {"2001:db8::1", 443}, {"fe80::1%eth0", 1}, {"svc.example.com", 8080}} {
		want := net.JoinHostPort(tt.host, strconv.FormatUint(uint64(tt.port), 10))
		if got := joinHostPort(tt.host, tt.port); got != want {
			t.Errorf("joinHostPort(%q, %d) = %q, want %q", tt.host, tt.port, got, want)
		}
	}
}
