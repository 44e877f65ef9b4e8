package resources

import (
	"reflect"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
)

// a95 is the decode context of a client with gRFC A95 on.
var a95 = &DecodeContext{Bootstrap: &bootstrap.Config{EndpointFallback: true}}

// ledsLocality is a locality whose endpoints are the collection name, with
// lb_endpoints the gRFC says to ignore.
func ledsLocality(region string, priority, weight uint32, name string, ignored ...*endpointv3.LbEndpoint) *endpointv3.LocalityLbEndpoints {
	l := locality(region, priority, weight, ignored...)
	l.LbConfig = &endpointv3.LocalityLbEndpoints_LedsClusterLocalityConfig{LedsClusterLocalityConfig: &endpointv3.LedsClusterLocalityConfig{
		LedsConfig: selfSource(), LedsCollectionName: name,
	}}
	return l
}

// collection is an LbEndpointCollection of the inline entries eps.
func collection(eps ...*endpointv3.LbEndpoint) *endpointv3.LbEndpointCollection {
	c := &endpointv3.LbEndpointCollection{}
	for _, ep := range eps {
		c.Entries = append(c.Entries, &xdscorev3.CollectionEntry{ResourceSpecifier: &xdscorev3.CollectionEntry_InlineEntry_{
			InlineEntry: &xdscorev3.CollectionEntry_InlineEntry{Resource: toAny(ep)},
		}})
	}
	return c
}

func decodeCollection(t *testing.T, m proto.Message) (*EndpointCollection, error) {
	t.Helper()
	name, c, err := EndpointCollectionType.DecodeTyped(nil, toAny(m))
	if name != "" {
		t.Fatalf("decoded name %q: the message has none", name)
	}
	return c, err
}

// With A95 on, a locality's leds_cluster_locality_config names its
// collection and its lb_endpoints are ignored; off, the config is ignored
// and lb_endpoints are the endpoints, as before A95.
func TestEndpointsLedsLocality(t *testing.T) {
	m := cla("c", locality("inline", 0, 1, lbEndpoint("10.0.0.1", 80)),
		ledsLocality("leds", 0, 2, "xdstp://ep/envoy.config.endpoint.v3.LbEndpointCollection/c/leds", lbEndpoint("10.0.0.2", 80)))
	_, on, err := EndpointsType.DecodeTyped(a95, toAny(m))
	if err != nil {
		t.Fatal(err)
	}
	if got := on.Localities[1]; got.EndpointCollection != "xdstp://ep/envoy.config.endpoint.v3.LbEndpointCollection/c/leds" || got.Endpoints != nil || got.Weight != 2 {
		t.Errorf("A95 on: locality %+v, want the collection, no endpoints, weight 2", got)
	}
	if got := on.Collections(); !reflect.DeepEqual(got, []string{"xdstp://ep/envoy.config.endpoint.v3.LbEndpointCollection/c/leds"}) {
		t.Errorf("Collections() = %q", got)
	}
	if got := on.Localities[0]; got.EndpointCollection != "" || len(got.Endpoints) != 1 {
		t.Errorf("A95 on: inline locality %+v", got)
	}
	_, off, err := EndpointsType.DecodeTyped(&DecodeContext{Bootstrap: &bootstrap.Config{}}, toAny(m))
	if err != nil {
		t.Fatal(err)
	}
	if got := off.Localities[1]; got.EndpointCollection != "" || len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "10.0.0.2:80" {
		t.Errorf("A95 off: locality %+v, want its lb_endpoints", got)
	}
	if off.Collections() != nil {
		t.Errorf("A95 off: Collections() = %q", off.Collections())
	}
}

func TestEndpointsLedsLocalityErrors(t *testing.T) {
	withSource := func(src *corev3.ConfigSource) *endpointv3.LocalityLbEndpoints {
		l := ledsLocality("r", 0, 1, "coll")
		l.GetLedsClusterLocalityConfig().LedsConfig = src
		return l
	}
	for _, tc := range []struct {
		name string
		loc  *endpointv3.LocalityLbEndpoints
		want string
	}{
		{"ads source", withSource(adsSource()), `ClusterLoadAssignment "c": endpoints[0].leds_cluster_locality_config.leds_config: must be a ConfigSource with self set`},
		{"no source", withSource(nil), `endpoints[0].leds_cluster_locality_config.leds_config: must be a ConfigSource with self set`},
		{"glob", ledsLocality("r", 0, 1, "xdstp://ep/envoy.config.endpoint.v3.LbEndpoint/c/*"), `endpoints[0].leds_cluster_locality_config.leds_collection_name: "xdstp://ep/envoy.config.endpoint.v3.LbEndpoint/c/*" is a glob collection (it ends with "/*"); only list collections are supported`},
		{"empty name", ledsLocality("r", 0, 1, ""), `endpoints[0].leds_cluster_locality_config.leds_collection_name: must not be empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := EndpointsType.DecodeTyped(a95, toAny(cla("c", tc.loc)))
			checkErr(t, err, tc.want)
		})
	}
}

func TestDecodeEndpointCollection(t *testing.T) {
	c, err := decodeCollection(t, collection(lbEndpoint("10.0.0.1", 80), weighted(lbEndpoint("10.0.0.2", 81), 3)))
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{{Addresses: []string{"10.0.0.1:80"}, Weight: 1}, {Addresses: []string{"10.0.0.2:81"}, Weight: 3}}
	if !reflect.DeepEqual(c.Endpoints, want) {
		t.Errorf("Endpoints = %+v, want %+v", c.Endpoints, want)
	}
	if got := c.Raw(); len(got.GetEntries()) != 2 {
		t.Errorf("Raw() = %v", got)
	}
	empty, err := decodeCollection(t, collection())
	if err != nil || empty.Endpoints != nil {
		t.Errorf("empty collection: %+v, %v; want no endpoints (an unreachable locality)", empty, err)
	}
}

func TestDecodeEndpointCollectionErrors(t *testing.T) {
	loc := &endpointv3.LbEndpointCollection{Entries: []*xdscorev3.CollectionEntry{{ResourceSpecifier: &xdscorev3.CollectionEntry_Locator{
		Locator: &xdscorev3.ResourceLocator{Id: "x"},
	}}}}
	wrongType := collection(lbEndpoint("10.0.0.1", 80))
	wrongType.Entries[0].GetInlineEntry().Resource = toAny(&endpointv3.Endpoint{})
	badBytes := collection(lbEndpoint("10.0.0.1", 80))
	badBytes.Entries[0].GetInlineEntry().Resource = &anypb.Any{TypeUrl: lbEndpointTypeURL, Value: []byte{0xff}}
	noResource := collection(lbEndpoint("10.0.0.1", 80))
	noResource.Entries[0].GetInlineEntry().Resource = nil
	for _, tc := range []struct {
		name string
		m    *endpointv3.LbEndpointCollection
		want string
	}{
		{"locator", loc, "LbEndpointCollection: entries[0].locator: not supported: an entry must be an inline_entry"},
		{"nothing", &endpointv3.LbEndpointCollection{Entries: []*xdscorev3.CollectionEntry{{}}}, "entries[0].inline_entry: missing"},
		{"no resource", noResource, "entries[0].inline_entry.resource: missing"},
		{"wrong type", wrongType, `entries[0].inline_entry.resource: type_url "type.googleapis.com/envoy.config.endpoint.v3.Endpoint", want "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint"`},
		{"bad bytes", badBytes, "entries[0].inline_entry.resource: unmarshal LbEndpoint"},
		{"bad endpoint", collection(lbEndpoint("10.0.0.1", 80), lbEndpoint("not a host!", 80)), `entries[1].inline_entry.resource.endpoint.address.socket_address.address: "not a host!" is neither an IP address nor a host name`},
		{"zero weight", collection(weighted(lbEndpoint("10.0.0.1", 80), 0)), "entries[0].inline_entry.resource.load_balancing_weight: must be above 0"},
		{"duplicate", collection(lbEndpoint("10.0.0.1", 80), lbEndpoint("10.0.0.1", 80)), "entries[1].inline_entry.resource.endpoint.address: duplicate address 10.0.0.1:80"},
		{"weights overflow", collection(weighted(lbEndpoint("10.0.0.1", 80), 1<<31), weighted(lbEndpoint("10.0.0.2", 80), 1<<31)), "entries[1].inline_entry.resource.load_balancing_weight: sum of endpoint weights in the locality exceeds 4294967295"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeCollection(t, tc.m)
			checkErr(t, err, tc.want)
		})
	}
}

// WithCollections puts each collection in its locality: a missing one
// leaves the locality empty, an address an earlier locality lists is left
// out, and the locality's proxy applies to endpoints naming none.
func TestEndpointsWithCollections(t *testing.T) {
	ep := func(addr string) Endpoint { return Endpoint{Addresses: []string{addr}, Weight: 1} }
	e := &Endpoints{Name: "c", Localities: []Locality{
		{ID: LocalityID{Region: "inline"}, Weight: 1, Endpoints: []Endpoint{ep("10.0.0.1:80")}},
		{ID: LocalityID{Region: "a"}, Weight: 1, EndpointCollection: "A", ProxyAddress: "10.9.9.9:3128"},
		{ID: LocalityID{Region: "b"}, Weight: 1, EndpointCollection: "B"},
		{ID: LocalityID{Region: "missing"}, Weight: 1, EndpointCollection: "M"},
	}}
	colls := map[string]*EndpointCollection{
		"A": {Endpoints: []Endpoint{ep("10.0.0.2:80"), {Addresses: []string{"10.0.0.3:80"}, Weight: 2, ProxyAddress: "10.8.8.8:3128"}}},
		"B": {Endpoints: []Endpoint{ep("10.0.0.1:80"), ep("10.0.0.3:80"), ep("10.0.0.4:80")}},
	}
	got := e.WithCollections(func(name string) *EndpointCollection { return colls[name] })
	want := [][]Endpoint{
		{ep("10.0.0.1:80")},
		{{Addresses: []string{"10.0.0.2:80"}, Weight: 1, ProxyAddress: "10.9.9.9:3128"}, {Addresses: []string{"10.0.0.3:80"}, Weight: 2, ProxyAddress: "10.8.8.8:3128"}},
		{ep("10.0.0.4:80")},
		nil,
	}
	for i, loc := range got.Localities {
		if !reflect.DeepEqual(loc.Endpoints, want[i]) {
			t.Errorf("locality %v: endpoints %+v, want %+v", loc.ID, loc.Endpoints, want[i])
		}
		if loc.EndpointCollection != e.Localities[i].EndpointCollection {
			t.Errorf("locality %v: collection %q, want it kept", loc.ID, loc.EndpointCollection)
		}
	}
	if e.Localities[1].Endpoints != nil {
		t.Error("WithCollections modified its receiver")
	}
	inline := &Endpoints{Name: "c", Localities: []Locality{{Weight: 1, Endpoints: []Endpoint{ep("10.0.0.1:80")}}}}
	if inline.WithCollections(nil) != inline {
		t.Error("an assignment naming no collection is not returned as it is")
	}
}
