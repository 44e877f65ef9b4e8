package watchers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// printSnapshot is a small tree with one element of each kind the printer
// knows: an RDS route configuration with two virtual hosts, a skipped
// route, a route to a cluster, weighted clusters, a direct response, an
// aggregate cluster with a leaf in error, a LOGICAL_DNS cluster, drops, and
// a cluster no route names.
func printSnapshot() *watchers.Snapshot {
	rr := resources.LBPolicy{Kind: resources.LBRoundRobin, WRRLocality: true}
	vh := &resources.VirtualHost{
		Name:    "svc",
		Domains: []string{"svc", "svc.example.com"},
		Routes: []*resources.Route{
			{PathMatch: resources.PathMatchExact, Path: "/pkg.Svc/Get", RuntimeFraction: -1, Action: resources.RouteActionRoute,
				WeightedClusters: []resources.WeightedCluster{{Name: "a", Weight: 90}, {Name: "dns", Weight: 10}}},
			{Name: "canary", Prefix: "/pkg.Svc/", CaseInsensitive: true, RuntimeFraction: 250000, Action: resources.RouteActionRoute, Cluster: "agg"},
			{Prefix: "/", RuntimeFraction: -1, Action: resources.RouteActionRoute, Cluster: "a"},
			{Prefix: "", RuntimeFraction: -1, Action: resources.RouteActionDirectResponse},
		},
		SkippedRoutes: []resources.SkippedRoute{{Index: 1, Name: "by-header", Reason: "cluster_header is not supported"}},
	}
	rc := &resources.RouteConfig{Name: "svc-routes", VirtualHosts: []*resources.VirtualHost{vh, {Name: "other"}}}
	a := &resources.Cluster{Name: "a", Kind: resources.ClusterKindEDS, ServiceName: "a-eds", LBPolicy: rr}
	clusters := map[string]*watchers.ClusterConfig{
		"a": {Name: "a", Cluster: a, Endpoints: &resources.Endpoints{
			Name: "a-eds",
			Localities: []resources.Locality{
				{ID: resources.LocalityID{Region: "r1", Zone: "z1"}, Weight: 2, Endpoints: []resources.Endpoint{
					{Addresses: []string{"10.0.0.1:8080"}, HealthStatus: resources.HealthStatusHealthy, Weight: 1},
					{Addresses: []string{"10.0.0.2:8080"}, HealthStatus: resources.HealthStatusDraining, Weight: 3},
				}},
				{ID: resources.LocalityID{Region: "r2"}, Weight: 1, Priority: 1, Endpoints: []resources.Endpoint{
					{Addresses: []string{"[2001:db8::1]:8080"}, HealthStatus: resources.HealthStatusUnknown, Weight: 1},
				}},
			},
			Drops: []resources.DropOverload{{Category: "throttle", PerMillion: 5000}},
		}},
		"dns": {Name: "dns", DNSAddress: "dns.example.com:443", Cluster: &resources.Cluster{
			Name: "dns", Kind: resources.ClusterKindLogicalDNS, DNSHost: "dns.example.com", DNSPort: 443,
			LBPolicy: resources.LBPolicy{Kind: resources.LBPickFirst},
		}},
		"agg": {Name: "agg", Leaves: []string{"primary", "a"}, Cluster: &resources.Cluster{
			Name: "agg", Kind: resources.ClusterKindAggregate, AggregateChildren: []string{"primary", "a"},
		}},
		"primary": {Name: "primary", Err: errors.New(`cluster "primary": resource does not exist`)},
		"rls-target": {Name: "rls-target", Cluster: &resources.Cluster{
			Name: "rls-target", Kind: resources.ClusterKindEDS,
			LBPolicy: resources.LBPolicy{Kind: resources.LBRingHash, MinRingSize: 1024, MaxRingSize: 4096},
		}, Err: errors.New(`endpoints "rls-target": resource does not exist`)},
	}
	return &watchers.Snapshot{
		Listener: &resources.Listener{Name: "svc", RouteConfigName: "svc-routes",
			HTTPFilters: []resources.HTTPFilter{{Name: "fault"}, {Name: "router"}}},
		RouteConfig: rc,
		VirtualHost: vh,
		Clusters:    watchers.NewClusterMap(clusters),
	}
}

const printSnapshotWant = `listener "svc" http_filters=[fault router]
  route_config "svc-routes" (RDS) virtual_hosts=2
    virtual_host "svc" domains=[svc svc.example.com]
      route path "/pkg.Svc/Get" -> weighted_clusters
        cluster "a" weight=90 EDS service_name="a-eds" drops=["throttle" 0.5%] lb=round_robin in wrr_locality
          locality {region="r1" zone="z1" sub_zone=""} weight=2 priority=0
            endpoint 10.0.0.1:8080 HEALTHY
            endpoint 10.0.0.2:8080 DRAINING weight=3
          locality {region="r2" zone="" sub_zone=""} weight=1 priority=1
            endpoint [2001:db8::1]:8080 UNKNOWN
        cluster "dns" weight=10 LOGICAL_DNS dns.example.com:443 lb=pick_first
      route #1 "by-header" skipped: cluster_header is not supported
      route "canary" prefix "/pkg.Svc/" case_insensitive runtime_fraction=25% -> cluster "agg"
        cluster "agg" AGGREGATE [primary a]
          cluster "primary"  error: cluster "primary": resource does not exist
          cluster "a" EDS service_name="a-eds" drops=["throttle" 0.5%] lb=round_robin in wrr_locality
            locality {region="r1" zone="z1" sub_zone=""} weight=2 priority=0
              endpoint 10.0.0.1:8080 HEALTHY
              endpoint 10.0.0.2:8080 DRAINING weight=3
            locality {region="r2" zone="" sub_zone=""} weight=1 priority=1
              endpoint [2001:db8::1]:8080 UNKNOWN
      route prefix "/" -> cluster "a"
        cluster "a" EDS service_name="a-eds" drops=["throttle" 0.5%] lb=round_robin in wrr_locality
          locality {region="r1" zone="z1" sub_zone=""} weight=2 priority=0
            endpoint 10.0.0.1:8080 HEALTHY
            endpoint 10.0.0.2:8080 DRAINING weight=3
          locality {region="r2" zone="" sub_zone=""} weight=1 priority=1
            endpoint [2001:db8::1]:8080 UNKNOWN
      route prefix "" -> direct_response
  other_clusters (named by no route)
    cluster "rls-target" EDS lb=ring_hash{min_ring_size=1024 max_ring_size=4096}  error: endpoints "rls-target": resource does not exist
`

// TestSnapshotPrint holds the text of a small tree, printed by WriteTo, by
// String and so by fmt.Print, which printed the snapshot's pointers before.
func TestSnapshotPrint(t *testing.T) {
	s := printSnapshot()
	var buf bytes.Buffer
	n, err := s.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, buf.Len())
	}
	if got := buf.String(); got != printSnapshotWant {
		t.Errorf("WriteTo wrote\n%s\nwant\n%s", got, printSnapshotWant)
	}
	if got := fmt.Sprint(s); got != printSnapshotWant {
		t.Errorf("fmt.Sprint(snapshot) =\n%s\nwant\n%s", got, printSnapshotWant)
	}
}

// TestSnapshotTreeJSON holds the structured form a CLI's JSON output or an
// HTML page reads: kinds, names apart from the text, errors apart.
func TestSnapshotTreeJSON(t *testing.T) {
	tree := printSnapshot().Tree()
	other := tree.Children[1]
	if other.Kind != watchers.TreeOtherClusters || len(other.Children) != 1 {
		t.Fatalf("listener's second child = %+v, want other_clusters with one cluster", other)
	}
	got, err := json.Marshal(other.Children[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"cluster","name":"rls-target","text":"\"rls-target\" EDS lb=ring_hash{min_ring_size=1024 max_ring_size=4096}","error":"endpoints \"rls-target\": resource does not exist"}`
	if string(got) != want {
		t.Errorf("JSON of a cluster in error:\n got %s\nwant %s", got, want)
	}
	vh := tree.Children[0].Children[0]
	var kinds, names []string
	for _, r := range vh.Children {
		kinds = append(kinds, string(r.Kind))
		names = append(names, r.Name)
	}
	if fmt.Sprint(kinds) != "[route route route route route]" || fmt.Sprint(names) != "[ by-header canary  ]" {
		t.Errorf("virtual host's children: kinds %q names %q", kinds, names)
	}
	ep := vh.Children[0].Children[0].Children[0].Children[1]
	if ep.Kind != watchers.TreeEndpoint || ep.Name != "10.0.0.2:8080" || ep.Line() != "endpoint 10.0.0.2:8080 DRAINING weight=3" {
		t.Errorf("second endpoint = %+v, line %q", ep, ep.Line())
	}
}

// TestSnapshotPrintPartial prints snapshots made by hand with parts
// missing, and a nil one, without panicking.
func TestSnapshotPrintPartial(t *testing.T) {
	for _, tc := range []struct {
		s    *watchers.Snapshot
		want string
	}{
		{nil, "listener (none)\n"},
		{&watchers.Snapshot{}, "listener (none)\n  route_config (none)\n"},
		{
			&watchers.Snapshot{
				Listener:    &resources.Listener{Name: "l", InlineRouteConfig: &resources.RouteConfig{}},
				RouteConfig: &resources.RouteConfig{},
				VirtualHost: &resources.VirtualHost{Name: "vh", Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "gone", RuntimeFraction: -1}}},
			},
			"listener \"l\"\n  route_config \"\" (inline)\n    virtual_host \"vh\" domains=[]\n      route prefix \"\" -> cluster \"gone\"\n        cluster \"gone\"  error: not in the snapshot\n",
		},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("String() =\n%s\nwant\n%s", got, tc.want)
		}
	}
}
