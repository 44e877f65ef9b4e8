package resources

import (
	"math"
	"reflect"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func weighted(lbe *endpointv3.LbEndpoint, w uint32) *endpointv3.LbEndpoint {
	lbe.LoadBalancingWeight = wrapperspb.UInt32(w)
	return lbe
}

func withExtra(lbe *endpointv3.LbEndpoint, addrs ...*corev3.Address) *endpointv3.LbEndpoint {
	for _, a := range addrs {
		lbe.GetEndpoint().AdditionalAddresses = append(lbe.GetEndpoint().AdditionalAddresses, &endpointv3.Endpoint_AdditionalAddress{Address: a})
	}
	return lbe
}

func drop(category string, n uint32, d typev3.FractionalPercent_DenominatorType) *endpointv3.ClusterLoadAssignment_Policy_DropOverload {
	return &endpointv3.ClusterLoadAssignment_Policy_DropOverload{
		Category:       category,
		DropPercentage: &typev3.FractionalPercent{Numerator: n, Denominator: d},
	}
}

func TestDecodeEndpointsRules(t *testing.T) {
	ep := lbEndpoint
	tests := []struct {
		name    string
		locs    []*endpointv3.LocalityLbEndpoints
		drops   []*endpointv3.ClusterLoadAssignment_Policy_DropOverload
		wantErr string
	}{
		{name: "one endpoint", locs: []*endpointv3.LocalityLbEndpoints{locality("r", 0, 1, ep("10.0.0.1", 80))}},
		{name: "no localities"},
		{name: "contiguous priorities", locs: []*endpointv3.LocalityLbEndpoints{
			locality("a", 1, 1, ep("10.0.0.1", 80)), locality("b", 0, 1, ep("10.0.0.2", 80)), locality("c", 1, 1),
		}},
		{name: "same locality at two priorities", locs: []*endpointv3.LocalityLbEndpoints{
			locality("a", 0, 1, ep("10.0.0.1", 80)), locality("a", 1, 1, ep("10.0.0.2", 80)),
		}},
		{name: "unweighted localities are ignored, with their endpoints and priorities", locs: []*endpointv3.LocalityLbEndpoints{
			locality("a", 0, 1, ep("10.0.0.1", 80)), locality("a", 0, 0, ep("10.0.0.1", 80), ep("", 0)), locality("b", 7, 0),
		}},
		{name: "locality without id", locs: []*endpointv3.LocalityLbEndpoints{{LoadBalancingWeight: wrapperspb.UInt32(1)}},
			wantErr: "endpoints[0].locality: missing"},
		{name: "duplicate locality", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1), locality("b", 0, 1), locality("a", 0, 2)},
			wantErr: `endpoints[2].locality: duplicate locality {region="a" zone="" sub_zone=""} at priority 0`},
		{name: "priority gap", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1), locality("b", 2, 1)},
			wantErr: "endpoints: priorities must run from 0 without gaps: priority 1 is missing"},
		{name: "priorities start above 0", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 1, 1)},
			wantErr: "priority 0 is missing"},
		{name: "huge priority", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1), locality("b", math.MaxUint32, 1)},
			wantErr: "priority 1 is missing"},
		{name: "locality weights overflow", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, math.MaxUint32), locality("b", 0, 1)},
			wantErr: "endpoints[1].load_balancing_weight: sum of locality weights at priority 0 exceeds 4294967295"},
		{name: "locality weights at the limit", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, math.MaxUint32-1), locality("b", 0, 1)}},
		{name: "endpoint weights overflow", locs: []*endpointv3.LocalityLbEndpoints{
			locality("a", 0, 1, weighted(ep("10.0.0.1", 80), math.MaxUint32), ep("10.0.0.2", 80)),
		}, wantErr: "endpoints[0].lb_endpoints[1].load_balancing_weight: sum of endpoint weights in the locality exceeds 4294967295"},
		{name: "endpoint weight 0", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, weighted(ep("10.0.0.1", 80), 0))},
			wantErr: "endpoints[0].lb_endpoints[0].load_balancing_weight: must be above 0"},
		{name: "named endpoint", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_EndpointName{EndpointName: "e"}})},
			wantErr: "endpoints[0].lb_endpoints[0].endpoint_name: not supported"},
		{name: "no endpoint", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, &endpointv3.LbEndpoint{})},
			wantErr: "endpoints[0].lb_endpoints[0].endpoint: missing"},
		{name: "no address", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{}}})},
			wantErr: "endpoints[0].lb_endpoints[0].endpoint.address: missing"},
		{name: "pipe address", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/s"}}}}}})},
			wantErr: "endpoints[0].lb_endpoints[0].endpoint.address: want a socket_address"},
		{name: "host names and ipv6", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1,
			ep("backend-1.svc.cluster.local", 80), ep("backend_2.", 80), ep("2001:db8::1", 80), ep("fe80::1%eth0", 80))}},
		{name: "empty host", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("", 80))},
			wantErr: `endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address: "" is neither an IP address nor a host name`},
		{name: "bad host", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("bad host", 80))},
			wantErr: `"bad host" is neither an IP address nor a host name`},
		{name: "bracketed ipv6", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("[::1]", 80))},
			wantErr: `"[::1]" is neither an IP address nor a host name`},
		{name: "empty label", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("a..b", 80))},
			wantErr: "is neither an IP address nor a host name"},
		{name: "port 0", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("10.0.0.1", 0))},
			wantErr: "endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value: 0 is not a valid port"},
		{name: "port above 65535", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("10.0.0.1", 65536))},
			wantErr: "port_value: 65536 is not a valid port"},
		{name: "port 65535", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("10.0.0.1", 65535))}},
		{name: "duplicate address in a locality", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("10.0.0.1", 80), ep("10.0.0.1", 80))},
			wantErr: "endpoints[0].lb_endpoints[1].endpoint.address: duplicate address 10.0.0.1:80 in the assignment"},
		{name: "duplicate address across priorities", locs: []*endpointv3.LocalityLbEndpoints{
			locality("a", 0, 1, ep("10.0.0.1", 80)), locality("b", 1, 1, ep("10.0.0.1", 80)),
		}, wantErr: "endpoints[1].lb_endpoints[0].endpoint.address: duplicate address"},
		{name: "same host, other port", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("10.0.0.1", 80), ep("10.0.0.1", 81))}},
		{name: "duplicate ipv6 in two spellings", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1, ep("2001:db8::1", 80), ep("2001:DB8:0::1", 80))},
			wantErr: "duplicate address [2001:db8::1]:80"},
		{name: "additional addresses", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1,
			withExtra(ep("10.0.0.1", 80), socketAddr("2001:db8::1", 80)))}},
		{name: "additional address duplicates another endpoint", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1,
			ep("10.0.0.2", 80), withExtra(ep("10.0.0.1", 80), socketAddr("10.0.0.2", 80)))},
			wantErr: "endpoints[0].lb_endpoints[1].endpoint.additional_addresses[0].address: duplicate address 10.0.0.2:80"},
		{name: "bad additional address", locs: []*endpointv3.LocalityLbEndpoints{locality("a", 0, 1,
			withExtra(ep("10.0.0.1", 80), socketAddr("10.0.0.3", 0)))},
			wantErr: "endpoints[0].lb_endpoints[0].endpoint.additional_addresses[0].address.socket_address.port_value: 0 is not a valid port"},
		{name: "drops", drops: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{drop("lb", 5, typev3.FractionalPercent_HUNDRED)}},
		{name: "drop without category", drops: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{drop("", 5, typev3.FractionalPercent_HUNDRED)},
			wantErr: "policy.drop_overloads[0].category: must not be empty"},
		{name: "drop with unknown denominator", drops: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{
			drop("a", 5, typev3.FractionalPercent_HUNDRED), drop("b", 5, 9)},
			wantErr: "policy.drop_overloads[1].drop_percentage: unknown denominator 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := cla("svc", tt.locs...)
			if tt.drops != nil {
				in.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: tt.drops}
			}
			name, v, err := decodeMsg(EndpointsType, in)
			checkErr(t, err, tt.wantErr)
			if name != "svc" {
				t.Errorf("name = %q, want svc", name)
			}
			if err == nil && (v.Name != "svc" || v.Raw() == nil) {
				t.Errorf("value %+v does not reflect the input", v)
			}
		})
	}
}

func TestDecodeEndpointsEmptyName(t *testing.T) {
	name, _, err := decodeMsg(EndpointsType, cla(""))
	checkErr(t, err, "ClusterLoadAssignment: cluster_name: must not be empty")
	if name != "" {
		t.Errorf("name = %q", name)
	}
	_, _, err = EndpointsType.DecodeTyped(nil, &anypb.Any{TypeUrl: EndpointsTypeURL, Value: []byte{0x0a, 0x01}})
	checkErr(t, err, "unmarshal ClusterLoadAssignment")
}

func TestDecodeEndpointsValue(t *testing.T) {
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb": {}}}
	e1 := weighted(lbEndpoint("10.0.0.1", 80), 3)
	e1.HealthStatus = corev3.HealthStatus_DRAINING
	e1.Metadata = md
	e1.GetEndpoint().Hostname = "one.example"
	e2 := withExtra(lbEndpoint("2001:db8:0:0::2", 443), socketAddr("10.0.0.2", 443), socketAddr("host.example", 8080))
	e2.HealthStatus = corev3.HealthStatus(99)
	in := cla("svc",
		locality("ignored", 0, 0, lbEndpoint("10.9.9.9", 1)),
		&endpointv3.LocalityLbEndpoints{
			Locality:            &corev3.Locality{Region: "r", Zone: "z", SubZone: "s"},
			LoadBalancingWeight: wrapperspb.UInt32(10),
			Priority:            1,
			LbEndpoints:         []*endpointv3.LbEndpoint{e1, e2},
		},
		locality("p0", 0, 5),
	)
	in.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{
		drop("a", 5, typev3.FractionalPercent_HUNDRED),
		drop("b", 5, typev3.FractionalPercent_TEN_THOUSAND),
		drop("c", 5, typev3.FractionalPercent_MILLION),
		drop("d", 200, typev3.FractionalPercent_HUNDRED),
		{Category: "e"},
	}}
	_, v, err := decodeMsg(EndpointsType, in)
	if err != nil {
		t.Fatal(err)
	}
	wantDrops := []DropOverload{{"a", 50000}, {"b", 500}, {"c", 5}, {"d", 1000000}, {"e", 0}}
	if !reflect.DeepEqual(v.Drops, wantDrops) {
		t.Errorf("Drops = %v, want %v", v.Drops, wantDrops)
	}
	if len(v.Localities) != 2 {
		t.Fatalf("got %d localities, want 2 (weight 0 ignored)", len(v.Localities))
	}
	l := v.Localities[0]
	if l.ID != (LocalityID{"r", "z", "s"}) || l.Weight != 10 || l.Priority != 1 || len(l.Endpoints) != 2 {
		t.Errorf("locality = %+v", l)
	}
	if p0 := v.Localities[1]; p0.ID.Region != "p0" || p0.Priority != 0 || p0.Weight != 5 || len(p0.Endpoints) != 0 {
		t.Errorf("second locality = %+v", p0)
	}
	got1 := l.Endpoints[0]
	want1 := Endpoint{Addresses: []string{"10.0.0.1:80"}, Hostname: "one.example", HealthStatus: HealthStatusDraining, Weight: 3, Metadata: got1.Metadata}
	if !reflect.DeepEqual(got1, want1) || got1.Metadata.GetFilterMetadata()["envoy.lb"] == nil {
		t.Errorf("endpoint 0 = %+v, want %+v", got1, want1)
	}
	got2 := l.Endpoints[1]
	if want := []string{"[2001:db8::2]:443", "10.0.0.2:443", "host.example:8080"}; !reflect.DeepEqual(got2.Addresses, want) {
		t.Errorf("endpoint 1 addresses = %v, want %v", got2.Addresses, want)
	}
	if got2.Weight != 1 || got2.HealthStatus != HealthStatusUnknown || got2.Metadata != nil {
		t.Errorf("endpoint 1 = %+v", got2)
	}
	// The slices cut from shared arrays must not reach into each other.
	if cap(got1.Addresses) != 1 || cap(l.Endpoints) != 2 {
		t.Errorf("slices share capacity: addresses cap %d, endpoints cap %d", cap(got1.Addresses), cap(l.Endpoints))
	}
	if v.ResourceName() != "svc" || !proto.Equal(v.Proto(), v.Raw()) {
		t.Error("ResourceName/Proto do not reflect the value")
	}
}

func TestHealthStatus(t *testing.T) {
	for s := corev3.HealthStatus_UNKNOWN; s <= corev3.HealthStatus_DEGRADED; s++ {
		if got := healthStatusOf(s); got.String() != s.String() {
			t.Errorf("%v maps to %v", s, got)
		}
	}
	for _, s := range []corev3.HealthStatus{-1, 6, 100} {
		if got := healthStatusOf(s); got != HealthStatusUnknown {
			t.Errorf("%d maps to %v, want UNKNOWN", s, got)
		}
	}
	if HealthStatus(9).String() != "HealthStatus(9)" {
		t.Error(HealthStatus(9).String())
	}
}

func TestValidHostname(t *testing.T) {
	for _, h := range []string{"a", "a.b", "a-b.c_d", "a.", "xn--bcher-kva.example", string(make63('a')) + ".com"} {
		if !validHostname(h) {
			t.Errorf("validHostname(%q) = false", h)
		}
	}
	for _, h := range []string{"", ".", ".a", "a..b", "a b", "a/b", "a:b", string(make63('a')) + "a.com", longName()} {
		if validHostname(h) {
			t.Errorf("validHostname(%q) = true", h)
		}
	}
}

func make63(c byte) []byte {
	b := make([]byte, 63)
	for i := range b {
		b[i] = c
	}
	return b
}

func longName() string {
	s := ""
	for len(s) < 254 {
		s += "abcdefghi."
	}
	return s + "x"
}
