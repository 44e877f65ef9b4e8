package resources

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonfaultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The benchmark resources are typical of what a mesh control plane sends;
// the fuzz seed corpora hold them too.

func benchListener() *listenerv3.Listener {
	h := rdsHCM("route-config")
	h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(30 * time.Second)}
	h.HttpFilters = []*hcmv3.HttpFilter{
		namedFilter("envoy.filters.http.fault", benchFault(), false),
		namedFilter("envoy.filters.http.rbac", &anypb.Any{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"}, true),
		routerFilter(),
	}
	return listenerWith("example.com:443", h)
}

// benchFault is a fault filter config with every part gRPC applies.
func benchFault() *anypb.Any {
	return toAny(&faultv3.HTTPFault{
		Delay: &commonfaultv3.FaultDelay{
			FaultDelaySecifier: &commonfaultv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(time.Second)},
			Percentage:         &typev3.FractionalPercent{Numerator: 5, Denominator: typev3.FractionalPercent_TEN_THOUSAND},
		},
		Abort: &faultv3.FaultAbort{
			ErrorType:  &faultv3.FaultAbort_HttpStatus{HttpStatus: 503},
			Percentage: &typev3.FractionalPercent{Numerator: 1},
		},
		MaxActiveFaults: wrapperspb.UInt32(100),
	})
}

// benchRouteConfig has 10 virtual hosts of 10 routes each, with header
// matchers, a regex route, weighted clusters and hash policies.
func benchRouteConfig() *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{Name: "route-config"}
	for v := 0; v < 10; v++ {
		vh := &routev3.VirtualHost{
			Name:    fmt.Sprintf("vh-%d", v),
			Domains: []string{fmt.Sprintf("svc-%d.example.com", v), fmt.Sprintf("*.svc-%d.example.com", v)},
		}
		for r := 0; r < 10; r++ {
			route := prefixRoute(fmt.Sprintf("/pkg.Service%d/", r), fmt.Sprintf("cluster-%d-%d", v, r))
			switch r % 4 {
			case 1:
				route.Match.Headers = []*routev3.HeaderMatcher{
					{Name: "x-env", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
						MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "canary"}}}},
					{Name: "x-debug", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}},
				}
			case 2:
				route.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher(fmt.Sprintf("/pkg.Service%d/Get[A-Z][a-z]+", r))}
			case 3:
				route.GetRoute().ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
					Clusters: []*routev3.WeightedCluster_ClusterWeight{cw("blue", 90), cw("green", 10)},
				}}
				route.Match.RuntimeFraction = fraction(50, typev3.FractionalPercent_HUNDRED)
			}
			route.GetRoute().HashPolicy = []*routev3.RouteAction_HashPolicy{headerHash("x-user", nil)}
			route.GetRoute().Timeout = durationpb.New(5 * time.Second)
			vh.Routes = append(vh.Routes, route)
		}
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	return rc
}

func benchCluster() *clusterv3.Cluster {
	c := edsCluster("outbound|443||svc.example.com", "svc.example.com")
	c.TransportSocket = tlsSocket(upstreamTLS("svc.example.com"))
	c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{
		{Priority: corev3.RoutingPriority_DEFAULT, MaxRequests: wrapperspb.UInt32(4096)},
	}}
	c.OutlierDetection = &clusterv3.OutlierDetection{Interval: durationpb.New(10 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(50)}
	c.LoadBalancingPolicy = policies(wrr(&roundrobinv3.RoundRobin{}))
	c.LrsServer = selfSource()
	return c
}

// benchEndpoints has 3 priorities of 4 localities of 25 endpoints.
func benchEndpoints() *endpointv3.ClusterLoadAssignment {
	m := cla("svc.example.com")
	for p := 0; p < 3; p++ {
		for l := 0; l < 4; l++ {
			loc := locality(fmt.Sprintf("region-%d", l), uint32(p), 100)
			loc.Locality.Zone = fmt.Sprintf("zone-%d", p)
			for e := 0; e < 25; e++ {
				lbe := lbEndpoint(fmt.Sprintf("10.%d.%d.%d", p, l, e), 8080)
				lbe.HealthStatus = corev3.HealthStatus_HEALTHY
				loc.LbEndpoints = append(loc.LbEndpoints, lbe)
			}
			m.Endpoints = append(m.Endpoints, loc)
		}
	}
	m.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{
		drop("throttle", 1, typev3.FractionalPercent_HUNDRED),
	}}
	return m
}

func benchDecode[T Resource](b *testing.B, typ *Type[T], body *anypb.Any) {
	if _, _, err := typ.DecodeTyped(nil, body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body.GetValue())))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := typ.DecodeTyped(nil, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeListener(b *testing.B) { benchDecode(b, ListenerType, toAny(benchListener())) }

func BenchmarkDecodeRouteConfig(b *testing.B) {
	benchDecode(b, RouteConfigType, toAny(benchRouteConfig()))
}

func BenchmarkDecodeCluster(b *testing.B) { benchDecode(b, ClusterType, toAny(benchCluster())) }

func BenchmarkDecodeEndpoints(b *testing.B) { benchDecode(b, EndpointsType, toAny(benchEndpoints())) }

// The benchmark resources must themselves decode: a benchmark of an error
// path would measure the wrong thing.
func TestBenchResourcesDecode(t *testing.T) {
	// The optional RBAC filter is of a type not registered: left out.
	if _, l, err := decodeMsg(ListenerType, benchListener()); err != nil || len(l.HTTPFilters) != 2 {
		t.Errorf("listener: %v", err)
	}
	if _, rc, err := decodeMsg(RouteConfigType, benchRouteConfig()); err != nil || len(rc.ClusterNames()) != 2+10*8 {
		t.Errorf("route config: %v (%d clusters)", err, len(rc.ClusterNames()))
	}
	if _, c, err := decodeMsg(ClusterType, benchCluster()); err != nil || !c.LBPolicy.WRRLocality || c.MaxRequests != 4096 {
		t.Errorf("cluster: %v", err)
	}
	if _, e, err := decodeMsg(EndpointsType, benchEndpoints()); err != nil || len(e.Localities) != 12 {
		t.Errorf("endpoints: %v", err)
	}
}
