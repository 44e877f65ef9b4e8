package resources

import (
	"fmt"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// gRFC A95 splits an assignment in two: the ClusterLoadAssignment keeps the
// localities (weights, priorities, drops), and a locality may name an
// LbEndpointCollection resource that holds its endpoints, fetched on its
// own, possibly from another authority whose fallback follows server
// reachability alone. It is LEDS with list collections, which SotW can
// carry, instead of the glob collections of the original LEDS design.

// EndpointCollectionTypeURL is the type URL of LbEndpointCollection
// resources (gRFC A95).
const EndpointCollectionTypeURL = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpointCollection"

// lbEndpointTypeURL is the type an entry of a collection must hold.
const lbEndpointTypeURL = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint"

// EndpointCollectionType is the type of LbEndpointCollection resources,
// decoded into *EndpointCollection. The message has no name field: the
// resource is known by the name of the discovery.v3.Resource carrying it,
// so a server must send it wrapped (delta always does; go-control-plane's
// caches do so for SotW only with a TTL, and then without a name: with
// go-control-plane v0.14, serve collections over delta).
var EndpointCollectionType = NewType(TypeOptions[*EndpointCollection]{
	TypeURL:  EndpointCollectionTypeURL,
	TypeName: "LbEndpointCollection",
	Decode:   decodeEndpointCollection,
})

// EndpointCollection is a validated LbEndpointCollection: the endpoints of
// one locality (gRFC A95). Immutable and shared, like every decoded value.
type EndpointCollection struct {
	// Endpoints are the collection's entries, in order. Empty means the
	// locality has no endpoint: it is unreachable. No address appears
	// twice in a collection. An Endpoint's ProxyAddress is its own
	// metadata's; the locality's applies once the collection is put in
	// its place (Endpoints.WithCollections).
	Endpoints []Endpoint
	// raw is the message as received, for Raw.
	raw []byte
}

// ResourceName implements Resource. It is "": the message carries no name;
// its watchers know it by the name they watch.
func (c *EndpointCollection) ResourceName() string { return "" }

// Raw returns the message as received, unmarshalled again on each call:
// the caller owns it. Nil for a value not made by the decoder.
func (c *EndpointCollection) Raw() *endpointv3.LbEndpointCollection {
	if c == nil || c.raw == nil {
		return nil
	}
	m := new(endpointv3.LbEndpointCollection)
	if proto.Unmarshal(c.raw, m) != nil { // unmarshalled once already
		return nil
	}
	return m
}

// Proto implements Resource; it returns Raw.
func (c *EndpointCollection) Proto() proto.Message { return c.Raw() }

// decodeEndpointCollection validates an LbEndpointCollection: every entry
// an inline_entry whose resource is an LbEndpoint, valid as an entry of a
// ClusterLoadAssignment's lb_endpoints is (gRFC A95). Its name is the
// wrapper's: it returns "".
func decodeEndpointCollection(_ *DecodeContext, body *anypb.Any) (string, *EndpointCollection, error) {
	var m endpointv3.LbEndpointCollection
	if err := proto.Unmarshal(body.GetValue(), &m); err != nil {
		return "", nil, fmt.Errorf("unmarshal LbEndpointCollection: %v", err)
	}
	entries := m.GetEntries()
	lbes := make([]*endpointv3.LbEndpoint, len(entries))
	nAddr := 0
	for i, entry := range entries {
		lbe, err := collectionEntry(entry)
		if err != nil {
			return "", nil, at(index("entries", i), err)
		}
		lbes[i] = lbe
		nAddr += 1 + len(lbe.GetEndpoint().GetAdditionalAddresses())
	}
	b := newEndpointsBuilder(0, len(lbes), nAddr)
	var sum uint64
	for i, lbe := range lbes {
		path := index("entries", i) + ".inline_entry.resource"
		ep, err := b.endpoint(lbe)
		if err == nil {
			err = b.appendEndpoint(ep, &sum)
		}
		if err != nil {
			return "", nil, at(path, err)
		}
	}
	c := &EndpointCollection{raw: body.GetValue()}
	if len(b.endpoints) > 0 {
		c.Endpoints = b.endpoints
	}
	return "", c, nil
}

// collectionEntry returns the LbEndpoint of one entry of a collection.
func collectionEntry(entry *xdscorev3.CollectionEntry) (*endpointv3.LbEndpoint, error) {
	in := entry.GetInlineEntry()
	if in == nil {
		if entry.GetLocator() != nil {
			return nil, fieldErrorf("locator", "not supported: an entry must be an inline_entry")
		}
		return nil, fieldErrorf("inline_entry", "missing")
	}
	r := in.GetResource()
	switch {
	case r == nil:
		return nil, fieldErrorf("inline_entry.resource", "missing")
	case r.GetTypeUrl() != lbEndpointTypeURL:
		return nil, fieldErrorf("inline_entry.resource", "type_url %q, want %q", r.GetTypeUrl(), lbEndpointTypeURL)
	}
	lbe := new(endpointv3.LbEndpoint)
	if err := proto.Unmarshal(r.GetValue(), lbe); err != nil {
		return nil, fieldErrorf("inline_entry.resource", "unmarshal LbEndpoint: %v", err)
	}
	return lbe, nil
}

// collectionName validates a locality's leds_cluster_locality_config and
// returns the collection it names (gRFC A95): leds_config must be "self",
// and the name must not end with "/*", which would make it a glob
// collection, which needs the incremental protocol variants gRPC's A95
// leaves out.
func collectionName(lc *endpointv3.LedsClusterLocalityConfig) (string, error) {
	if lc.GetLedsConfig().GetSelf() == nil {
		return "", fieldErrorf("leds_config", "must be a ConfigSource with self set")
	}
	name := lc.GetLedsCollectionName()
	switch {
	case name == "":
		return "", fieldErrorf("leds_collection_name", "must not be empty")
	case strings.HasSuffix(name, "/*"):
		return "", fieldErrorf("leds_collection_name", "%q is a glob collection (it ends with \"/*\"); only list collections are supported", name)
	case strings.IndexByte(name, 0) >= 0:
		return "", fieldErrorf("leds_collection_name", "must not contain a NUL byte")
	}
	return name, nil
}

// Collections returns the names of the LbEndpointCollection resources the
// localities of e take their endpoints from, each once, in the order of
// the localities; nil when every locality has its endpoints inline.
func (e *Endpoints) Collections() []string {
	if e == nil {
		return nil
	}
	var names []string
	for i := range e.Localities {
		if n := e.Localities[i].EndpointCollection; n != "" && !contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

func contains(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}

// WithCollections returns e with the endpoints of each locality that names
// a collection taken from it: get returns the collection of a name, nil
// when it cannot be had (it does not exist, or was rejected before any
// version was accepted). A locality without its collection has no
// endpoint, as one whose collection is empty: it is unreachable (gRFC A95);
// the other localities are still used. Each endpoint gets its locality's
// ProxyAddress when it names none.
//
// An assignment lists an address once, and consumers count on it; but
// collections are fetched apart, and an endpoint that moves from one to
// another may be in both for a while. An endpoint with an address an
// earlier locality (in the order of Localities) has already listed is left
// out. e itself is returned when it names no collection.
func (e *Endpoints) WithCollections(get func(name string) *EndpointCollection) *Endpoints {
	if e == nil || e.Collections() == nil {
		return e
	}
	out := &Endpoints{Name: e.Name, Drops: e.Drops, raw: e.raw, Localities: make([]Locality, len(e.Localities))}
	seen := make(map[string]struct{})
	for i, loc := range e.Localities {
		if loc.EndpointCollection != "" {
			loc.Endpoints = nil
			if c := get(loc.EndpointCollection); c != nil {
				loc.Endpoints = placeEndpoints(c.Endpoints, loc.ProxyAddress, seen)
			}
		} else {
			loc.Endpoints = placeEndpoints(loc.Endpoints, "", seen)
		}
		out.Localities[i] = loc
	}
	return out
}

// placeEndpoints returns eps without those with an address in seen, each
// with proxy as its ProxyAddress if it has none, and adds their addresses
// to seen. It returns eps itself when it changes nothing.
func placeEndpoints(eps []Endpoint, proxy string, seen map[string]struct{}) []Endpoint {
	same := true
	for i := range eps {
		if (proxy != "" && eps[i].ProxyAddress == "") || anySeen(eps[i].Addresses, seen) {
			same = false
			break
		}
	}
	if same {
		for i := range eps {
			for _, a := range eps[i].Addresses {
				seen[a] = struct{}{}
			}
		}
		return eps
	}
	out := make([]Endpoint, 0, len(eps))
	for _, ep := range eps {
		if anySeen(ep.Addresses, seen) {
			continue
		}
		for _, a := range ep.Addresses {
			seen[a] = struct{}{}
		}
		if ep.ProxyAddress == "" {
			ep.ProxyAddress = proxy
		}
		out = append(out, ep)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func anySeen(addrs []string, seen map[string]struct{}) bool {
	for _, a := range addrs {
		if _, ok := seen[a]; ok {
			return true
		}
	}
	return false
}
