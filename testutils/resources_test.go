package testutils

import (
	"fmt"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// checkHCM applies gRPC's client-side listener rules (gRFC A27, A39) and
// returns the HttpConnectionManager.
func checkHCM(t *testing.T, l *listenerv3.Listener) *hcmv3.HttpConnectionManager {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(hcm); err != nil {
		t.Fatalf("listener %q: api_listener is not an HttpConnectionManager: %v", l.GetName(), err)
	}
	filters := hcm.GetHttpFilters()
	if len(filters) == 0 {
		t.Fatalf("listener %q has no HTTP filters", l.GetName())
	}
	last := filters[len(filters)-1]
	if !last.GetTypedConfig().MessageIs(&routerv3.Router{}) {
		t.Fatalf("listener %q: last HTTP filter is %v, want the router", l.GetName(), last)
	}
	if rds := hcm.GetRds(); rds != nil && rds.GetConfigSource().GetAds() == nil {
		t.Fatalf("listener %q: RDS config source %v, want ads", l.GetName(), rds.GetConfigSource())
	}
	return hcm
}

func checkEDSCluster(t *testing.T, c *clusterv3.Cluster, name, service string) {
	t.Helper()
	if c.GetName() != name || c.GetType() != clusterv3.Cluster_EDS || c.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN ||
		c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil || c.GetEdsClusterConfig().GetServiceName() != service {
		t.Fatalf("cluster %v, want an ADS-fed round-robin EDS cluster %q for service %q", c, name, service)
	}
}

// endpointAddrs lists a ClusterLoadAssignment as "priority/zone/host:port".
func endpointAddrs(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, lle := range cla.GetEndpoints() {
		for _, lbe := range lle.GetLbEndpoints() {
			sa := lbe.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%d/%s/%s:%d", lle.GetPriority(), lle.GetLocality().GetZone(), sa.GetAddress(), sa.GetPortValue()))
		}
	}
	return out
}

func TestDefaultResources(t *testing.T) {
	res := DefaultResources(ResourceParams{ListenerName: "svc", ClusterNames: []string{"a", "b"}, Host: "10.0.0.1", Ports: []uint32{1, 2}})
	if len(res.Listeners) != 1 || len(res.Routes) != 1 || len(res.Clusters) != 2 || len(res.Endpoints) != 2 {
		t.Fatalf("got %d listeners, %d routes, %d clusters, %d endpoints; want 1, 1, 2, 2",
			len(res.Listeners), len(res.Routes), len(res.Clusters), len(res.Endpoints))
	}
	hcm := checkHCM(t, res.Listeners[0])
	if res.Listeners[0].GetName() != "svc" || hcm.GetRds().GetRouteConfigName() != "svc-route" {
		t.Fatalf("listener %q routes to %q, want svc → svc-route", res.Listeners[0].GetName(), hcm.GetRds().GetRouteConfigName())
	}
	rc := res.Routes[0]
	vh := rc.GetVirtualHosts()[0]
	wcs := vh.GetRoutes()[0].GetRoute().GetWeightedClusters().GetClusters()
	if rc.GetName() != "svc-route" || !slices.Equal(vh.GetDomains(), []string{"*"}) || len(wcs) != 2 ||
		wcs[0].GetName() != "a" || wcs[1].GetName() != "b" || wcs[0].GetWeight().GetValue() != 1 {
		t.Fatalf("route config %v, want svc-route splitting * evenly over a and b", rc)
	}
	for i, name := range []string{"a", "b"} {
		checkEDSCluster(t, res.Clusters[i], name, name)
		want := []string{"0//10.0.0.1:1", "0//10.0.0.1:2"}
		if got := endpointAddrs(res.Endpoints[i]); res.Endpoints[i].GetClusterName() != name || !slices.Equal(got, want) {
			t.Fatalf("endpoints of %q: %q named %q, want %q", name, got, res.Endpoints[i].GetClusterName(), want)
		}
	}

	def := DefaultResources(ResourceParams{})
	checkHCM(t, def.Listeners[0])
	if def.Listeners[0].GetName() != "listener" || def.Routes[0].GetName() != "listener-route" ||
		def.Routes[0].GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetCluster() != "listener-cluster" ||
		!slices.Equal(endpointAddrs(def.Endpoints[0]), []string{"0//127.0.0.1:8080"}) {
		t.Fatalf("defaults: %v", def)
	}
	checkEDSCluster(t, def.Clusters[0], "listener-cluster", "listener-cluster")
}

// Everything the builders make passes Envoy's own field constraints (the
// protoc-gen-validate rules compiled into the protos), Any payloads included.
func TestBuildersPassEnvoyValidation(t *testing.T) {
	type validator interface{ ValidateAll() error }
	res := DefaultResources(ResourceParams{ClusterNames: []string{"a", "b"}})
	msgs := []validator{
		ListenerInlineRoute("inline", RouteConfig("r", "*", "a")),
		LogicalDNSCluster("dns", "example.com", 443),
		AggregateCluster("agg", "a", "dns"),
		Endpoints("e", []EndpointSpec{{Host: "h", Port: 1, Weight: 2, Priority: 1, Locality: Locality{Region: "r"}}, {Host: "h", Port: 2}}),
	}
	for _, l := range res.Listeners {
		msgs = append(msgs, l, checkHCM(t, l))
	}
	for _, r := range res.Routes {
		msgs = append(msgs, r)
	}
	for _, c := range res.Clusters {
		msgs = append(msgs, c)
	}
	for _, e := range res.Endpoints {
		msgs = append(msgs, e)
	}
	msgs = append(msgs, checkHCM(t, msgs[0].(*listenerv3.Listener)))
	for _, m := range msgs {
		if err := m.ValidateAll(); err != nil {
			t.Errorf("%T fails validation: %v", m, err)
		}
	}
}

func TestListenerInlineRoute(t *testing.T) {
	rc := RouteConfig("inline", "example.com", "c")
	hcm := checkHCM(t, ListenerInlineRoute("l", rc))
	if !proto.Equal(hcm.GetRouteConfig(), rc) || hcm.GetRds() != nil {
		t.Fatalf("inline route %v, want %v", hcm.GetRouteConfig(), rc)
	}
}

func TestWeightedRouteConfig(t *testing.T) {
	rc := WeightedRouteConfig("r", "d", ClusterWeight{"x", 30}, ClusterWeight{"y", 70})
	var got []string
	for _, c := range rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetWeightedClusters().GetClusters() {
		got = append(got, fmt.Sprintf("%s=%d", c.GetName(), c.GetWeight().GetValue()))
	}
	if want := []string{"x=30", "y=70"}; !slices.Equal(got, want) {
		t.Fatalf("weights %q, want %q", got, want)
	}
	if m := rc.GetVirtualHosts()[0].GetRoutes()[0].GetMatch(); m.GetPrefix() != "/" {
		t.Fatalf("match %v, want prefix /", m)
	}
}

func TestClusterBuilders(t *testing.T) {
	checkEDSCluster(t, Cluster("c", ""), "c", "")

	dns := LogicalDNSCluster("dns", "example.com", 443)
	if dns.GetType() != clusterv3.Cluster_LOGICAL_DNS || dns.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN ||
		!slices.Equal(endpointAddrs(dns.GetLoadAssignment()), []string{"0//example.com:443"}) {
		t.Fatalf("logical DNS cluster %v", dns)
	}

	agg := AggregateCluster("agg", "p", "s")
	cfg := &aggregatev3.ClusterConfig{}
	ct := agg.GetClusterType()
	if ct.GetName() != "envoy.clusters.aggregate" || ct.GetTypedConfig().UnmarshalTo(cfg) != nil ||
		!slices.Equal(cfg.GetClusters(), []string{"p", "s"}) || agg.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN {
		t.Fatalf("aggregate cluster %v", agg)
	}
}

func TestEndpoints(t *testing.T) {
	cla := Endpoints("svc", []EndpointSpec{
		{Host: "h", Port: 1, Priority: 1, Locality: Locality{Zone: "z1"}},
		{Host: "h", Port: 2, Locality: Locality{Zone: "z1"}, Weight: 5, Health: corev3.HealthStatus_DRAINING},
		{Host: "h", Port: 3, Locality: Locality{Zone: "z2"}, LocalityWeight: 7},
		{Host: "h", Port: 4, Locality: Locality{Zone: "z1"}, LocalityWeight: 3},
	})
	if want := []string{"0/z1/h:2", "0/z1/h:4", "0/z2/h:3", "1/z1/h:1"}; !slices.Equal(endpointAddrs(cla), want) {
		t.Fatalf("endpoints %q, want %q", endpointAddrs(cla), want)
	}
	var weights []uint32
	for _, lle := range cla.GetEndpoints() {
		weights = append(weights, lle.GetLoadBalancingWeight().GetValue())
	}
	if want := []uint32{3, 7, 1}; !slices.Equal(weights, want) {
		t.Errorf("locality weights %v, want %v", weights, want)
	}
	first := cla.GetEndpoints()[0].GetLbEndpoints()
	if first[0].GetLoadBalancingWeight().GetValue() != 5 || first[0].GetHealthStatus() != corev3.HealthStatus_DRAINING ||
		first[1].GetLoadBalancingWeight() != nil {
		t.Errorf("endpoint weight and health not carried: %v", first)
	}
}

func TestResponseBuilders(t *testing.T) {
	resp := SotWResponse(resourcev3.ClusterType, "v", "n", Cluster("a", ""), WrapResource("b", "1", time.Second, Cluster("b", "")))
	if resp.GetTypeUrl() != resourcev3.ClusterType || resp.GetVersionInfo() != "v" || resp.GetNonce() != "n" || len(resp.GetResources()) != 2 {
		t.Fatalf("SotWResponse = %v", resp)
	}
	if !resp.GetResources()[1].MessageIs(&discoveryv3.Resource{}) {
		t.Fatalf("wrapped resource has type %q", resp.GetResources()[1].GetTypeUrl())
	}
	hb := WrapResource("b", "1", time.Second, nil)
	if hb.GetResource() != nil || hb.GetTtl().AsDuration() != time.Second || WrapResource("c", "", 0, nil).GetTtl() != nil {
		t.Fatalf("WrapResource heartbeat = %v", hb)
	}
	d := DeltaResponse(resourcev3.ClusterType, "n", []string{"gone"}, hb)
	if d.GetNonce() != "n" || !slices.Equal(d.GetRemovedResources(), []string{"gone"}) || len(d.GetResources()) != 1 {
		t.Fatalf("DeltaResponse = %v", d)
	}
}
