package resources

import (
	"fmt"
	"reflect"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// wireCases are assignments of the usual shape, which decodeEndpointsWire
// must decode, and others it must leave to the generated message.
func wireCases() (usual, others map[string][]byte) {
	m := func(msg proto.Message) []byte {
		b, err := proto.Marshal(msg)
		if err != nil {
			panic(err)
		}
		return b
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	unhealthy := lbEndpoint("127.1.0.3", 3)
	unhealthy.HealthStatus = corev3.HealthStatus_UNHEALTHY
	weighted := lbEndpoint("10.0.0.1", 80)
	weighted.LoadBalancingWeight = wrapperspb.UInt32(7)
	weighted.GetEndpoint().Hostname = "backend-1"
	udp := lbEndpoint("10.0.0.2", 80)
	udp.GetEndpoint().GetAddress().GetSocketAddress().Protocol = corev3.SocketAddress_UDP
	zoned := locality("r", 1, 2, weighted, udp)
	zoned.Locality.Zone, zoned.Locality.SubZone = "z", "s"
	bareLoc := locality("", 0, 1, lbEndpoint("127.1.0.1", 1), lbEndpoint("127.1.0.2", 2), unhealthy)
	bareLoc.Locality = &corev3.Locality{}
	many := func(n int) *endpointv3.ClusterLoadAssignment {
		c := cla("many")
		for i := range n {
			c.Endpoints = append(c.Endpoints, locality(fmt.Sprint("r", i), 0, 1, lbEndpoint(fmt.Sprintf("10.0.%d.1", i), 80), lbEndpoint(fmt.Sprintf("10.0.%d.2", i), 80)))
		}
		return c
	}
	usual = map[string][]byte{
		"load test":           m(cla("cluster-000042", bareLoc)),
		"priorities and more": m(cla("c", locality("r", 0, 3, lbEndpoint("10.0.0.9", 1)), zoned)),
		"IPv6, host names":    m(cla("c", locality("r", 0, 1, lbEndpoint("2001:0db8::0001", 443), lbEndpoint("::1", 1), lbEndpoint("backend.example.com.", 8080)))),
		"locality of weight 0": m(cla("c", locality("r", 0, 1, lbEndpoint("10.0.0.1", 1)),
			locality("r", 0, 0, lbEndpoint("10.0.0.1", 1)))),
		"no endpoints":   m(cla("c", locality("r", 0, 1))),
		"no localities":  m(cla("c")),
		"many":           m(many(40)),
		"unknown health": m(cla("c", locality("r", 0, 1, &endpointv3.LbEndpoint{HealthStatus: 99, HostIdentifier: lbEndpoint("10.0.0.1", 1).HostIdentifier}))),
	}

	withMeta := lbEndpoint("10.0.0.1", 1)
	withMeta.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"x": {}}}
	locMeta := locality("r", 0, 1, lbEndpoint("10.0.0.1", 1))
	locMeta.Metadata = &corev3.Metadata{}
	extra := lbEndpoint("10.0.0.1", 1)
	extra.GetEndpoint().AdditionalAddresses = []*endpointv3.Endpoint_AdditionalAddress{{Address: socketAddr("10.0.0.2", 1)}}
	named := lbEndpoint("10.0.0.1", 1)
	named.GetEndpoint().GetAddress().GetSocketAddress().PortSpecifier = &corev3.SocketAddress_NamedPort{NamedPort: "http"}
	resolver := lbEndpoint("10.0.0.1", 1)
	resolver.GetEndpoint().GetAddress().GetSocketAddress().ResolverName = "dns"
	zeroWeight := lbEndpoint("10.0.0.1", 1)
	zeroWeight.LoadBalancingWeight = wrapperspb.UInt32(0)
	pipe := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/p"}}}}}}
	byName := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_EndpointName{EndpointName: "e"}}
	noLocality := locality("r", 0, 1, lbEndpoint("10.0.0.1", 1))
	noLocality.Locality = nil
	drops := cla("c", locality("r", 0, 1, lbEndpoint("10.0.0.1", 1)))
	drops.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{
		{Category: "lb", DropPercentage: &typev3.FractionalPercent{Numerator: 5}}}}
	good := m(cla("c", locality("r", 0, 1, lbEndpoint("10.0.0.1", 1))))
	badUTF8 := protowire.AppendTag(nil, claClusterName, protowire.BytesType)
	badUTF8 = protowire.AppendBytes(badUTF8, []byte{'c', 0xff})
	others = map[string][]byte{
		"endpoint metadata":     m(cla("c", locality("r", 0, 1, withMeta))),
		"locality metadata":     m(cla("c", locMeta)),
		"drop policy":           m(drops),
		"additional addresses":  m(cla("c", locality("r", 0, 1, extra))),
		"named port":            m(cla("c", locality("r", 0, 1, named))),
		"resolver name":         m(cla("c", locality("r", 0, 1, resolver))),
		"endpoint weight 0":     m(cla("c", locality("r", 0, 1, zeroWeight))),
		"pipe":                  m(cla("c", locality("r", 0, 1, pipe))),
		"endpoint name":         m(cla("c", locality("r", 0, 1, byName))),
		"no locality":           m(cla("c", noLocality)),
		"no name":               m(cla("", locality("r", 0, 1, lbEndpoint("10.0.0.1", 1)))),
		"duplicate address":     m(cla("c", locality("r", 0, 1, lbEndpoint("10.0.0.1", 1), lbEndpoint("10.0.0.1", 1)))),
		"duplicate locality":    m(cla("c", locality("r", 0, 1, lbEndpoint("10.0.0.1", 1)), locality("r", 0, 1, lbEndpoint("10.0.0.2", 1)))),
		"priority gap":          m(cla("c", locality("r", 1, 1, lbEndpoint("10.0.0.1", 1)))),
		"port 0":                m(cla("c", locality("r", 0, 1, lbEndpoint("10.0.0.1", 0)))),
		"bad host":              m(cla("c", locality("r", 0, 1, lbEndpoint("not a host", 1)))),
		"name twice":            cat(good, m(cla("d"))),
		"locality merged":       cat(m(cla("", locality("r", 0, 1, lbEndpoint("10.0.0.1", 1)))), good),
		"unknown field":         protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), good...), 99, protowire.VarintType), 1),
		"fixed32 field":         protowire.AppendFixed32(protowire.AppendTag(append([]byte(nil), good...), 1, protowire.Fixed32Type), 1),
		"cluster name a varint": protowire.AppendVarint(protowire.AppendTag(nil, claClusterName, protowire.VarintType), 1),
		"truncated":             good[:len(good)-2],
		"not UTF-8":             badUTF8,
		"empty":                 {},
	}
	return usual, others
}

// decodeEndpoints agrees with the generated message on every case, and
// takes the wire path exactly for the usual ones.
func TestEndpointsWireMatchesMessage(t *testing.T) {
	usual, others := wireCases()
	check := func(name string, b []byte, wantWire bool) {
		t.Run(name, func(t *testing.T) {
			if got := decodeEndpointsWire(b) != nil; got != wantWire {
				t.Errorf("decoded from the wire: %v, want %v", got, wantWire)
			}
			body := &anypb.Any{TypeUrl: EndpointsTypeURL, Value: b}
			gotName, got, gotErr := decodeEndpoints(nil, body)
			wantName, want, wantErr := decodeEndpointsMessage(body, false)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || gotName != wantName {
				t.Fatalf("got %q, %v; the message gives %q, %v", gotName, gotErr, wantName, wantErr)
			}
			if wantWire && wantErr != nil {
				t.Fatalf("a usual case fails: %v", wantErr)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform(), cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
				t.Errorf("value (-message +decoded):\n%s", diff)
			}
		})
	}
	for name, b := range usual {
		check(name, b, true)
	}
	for name, b := range others {
		check(name, b, false)
	}
}

// Whatever decodeEndpointsWire accepts, the generated message decodes to
// the same value.
func FuzzEndpointsWireMatchesMessage(f *testing.F) {
	usual, others := wireCases()
	for _, b := range usual {
		f.Add(b)
	}
	for _, b := range others {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := decodeEndpointsWire(b)
		if e == nil {
			return
		}
		name, want, err := decodeEndpointsMessage(&anypb.Any{TypeUrl: EndpointsTypeURL, Value: b}, false)
		if err != nil {
			t.Fatalf("decoded from the wire, but the message fails: %v", err)
		}
		if name != e.Name {
			t.Fatalf("name %q, the message's %q", e.Name, name)
		}
		if diff := cmp.Diff(want, e, protocmp.Transform(), cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
			t.Fatalf("value (-message +wire):\n%s", diff)
		}
	})
}

// An assignment of the usual shape allocates only what its value keeps:
// the value, its name, one backing array each for localities, endpoints
// and addresses, and each address (before, through the generated message:
// 40 allocations, 2,256 B; BenchmarkDecodeEndpoints3). The scratch is
// reused here as the pool reuses it (under -race the pool drops some).
func TestEndpointsWireAllocatesWhatItKeeps(t *testing.T) {
	loc := locality("", 0, 1, lbEndpoint("127.1.0.1", 10042), lbEndpoint("127.1.0.2", 20042), lbEndpoint("127.1.0.3", 30042))
	loc.Locality = &corev3.Locality{}
	b, err := proto.Marshal(cla("cluster-000042", loc))
	if err != nil {
		t.Fatal(err)
	}
	s := new(claScratch)
	allocs := testing.AllocsPerRun(100, func() {
		s.localities, s.endpoints = s.localities[:0], s.endpoints[:0]
		name, ok := s.read(b)
		if !ok {
			t.Fatal("not read")
		}
		if _, ok := s.build(name); !ok {
			t.Fatal("not built")
		}
	})
	if allocs > 8 {
		t.Errorf("%v allocations per decode, want at most 8", allocs)
	}
}
