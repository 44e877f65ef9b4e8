package resources

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// EndpointsType is the built-in EDS type: ClusterLoadAssignment resources,
// decoded into *Endpoints.
var EndpointsType = NewType(TypeOptions[*Endpoints]{
	TypeURL: EndpointsTypeURL,
	Decode:  decodeEndpoints,
})

// Endpoints is a validated ClusterLoadAssignment. Like every decoded value
// it is immutable and shared: callers must not modify it.
type Endpoints struct {
	// Name is the resource name, the assignment's cluster_name.
	Name string
	// Localities are the localities with a weight above 0, in the order
	// received; those without a weight are left out, as gRPC does. Their
	// priorities run from 0 without gaps.
	Localities []Locality
	// Drops are policy.drop_overloads in order.
	Drops []DropOverload
	// raw is the serialized message as received, unmarshalled again by
	// Raw: kept as bytes because the decoded message, which few callers
	// read, is about ten times larger (see docs/PERFORMANCE.md).
	raw []byte
}

// DropOverload is one category of requests to drop.
type DropOverload struct {
	Category string
	// PerMillion is the share of requests to drop, 0 to 1,000,000.
	PerMillion uint32
}

// LocalityID identifies a locality.
type LocalityID struct {
	Region, Zone, SubZone string
}

// String returns the LocalityID as text, for logs and errors.
func (id LocalityID) String() string {
	return fmt.Sprintf("{region=%q zone=%q sub_zone=%q}", id.Region, id.Zone, id.SubZone)
}

// Locality is one locality's endpoints at one priority.
type Locality struct {
	ID LocalityID
	// Weight is the locality's load_balancing_weight, above 0.
	Weight uint32
	// Priority is 0 for the highest priority.
	Priority uint32
	// Endpoints are the locality's endpoints. For a locality of an
	// EndpointCollection they are nil as decoded, and filled from the
	// collection by Endpoints.WithCollections.
	Endpoints []Endpoint
	// EndpointCollection names the LbEndpointCollection resource holding
	// the locality's endpoints (gRFC A95: leds_cluster_locality_config's
	// leds_collection_name), "" when they are inline. Set only when the
	// decoding client has A95 on (bootstrap.Config.EndpointFallback);
	// otherwise leds_cluster_locality_config is ignored and the locality's
	// lb_endpoints are its endpoints, as before A95.
	EndpointCollection string
	// ProxyAddress is the HTTP CONNECT proxy ("ip:port") the locality's
	// metadata names under ProxyAddressMetadataKey, "" if none (gRFC A86).
	// Each Endpoint.ProxyAddress already falls back to it.
	ProxyAddress string
}

// Endpoint is one backend.
type Endpoint struct {
	// Addresses are "host:port" strings (net.JoinHostPort): the address
	// first, then additional_addresses. Hosts are IP addresses (IPv6 in
	// canonical form) or host names; ports are 1 to 65535. No address
	// appears twice in an assignment.
	Addresses []string
	// Hostname is the endpoint's hostname field, used for logs and
	// authority rewriting, not for connecting.
	Hostname     string
	HealthStatus HealthStatus
	// Weight is load_balancing_weight, 1 when unset, never 0.
	Weight uint32
	// Metadata is the endpoint's metadata as received, nil when unset.
	Metadata *corev3.Metadata
	// ProxyAddress is the HTTP CONNECT proxy ("ip:port") the endpoint's
	// metadata names under ProxyAddressMetadataKey, else its locality's,
	// else "" (gRFC A86). It applies only when the cluster's HTTP11Proxy is
	// set.
	ProxyAddress string
}

// HealthStatus is an endpoint's health as the management server sees it.
type HealthStatus int

// The values are those of envoy.config.core.v3.HealthStatus; any other
// value received is HealthStatusUnknown.
const (
	HealthStatusUnknown HealthStatus = iota
	HealthStatusHealthy
	HealthStatusUnhealthy
	HealthStatusDraining
	HealthStatusTimeout
	HealthStatusDegraded
)

// String returns the HealthStatus as text, for logs and errors.
func (h HealthStatus) String() string {
	switch h {
	case HealthStatusUnknown:
		return "UNKNOWN"
	case HealthStatusHealthy:
		return "HEALTHY"
	case HealthStatusUnhealthy:
		return "UNHEALTHY"
	case HealthStatusDraining:
		return "DRAINING"
	case HealthStatusTimeout:
		return "TIMEOUT"
	case HealthStatusDegraded:
		return "DEGRADED"
	}
	return "HealthStatus(" + strconv.Itoa(int(h)) + ")"
}

func healthStatusOf(s corev3.HealthStatus) HealthStatus {
	if s < 0 || s > corev3.HealthStatus_DEGRADED {
		return HealthStatusUnknown
	}
	return HealthStatus(s)
}

// ResourceName implements Resource.
func (e *Endpoints) ResourceName() string {
	if e == nil {
		return ""
	}
	return e.Name
}

// Raw returns the message as received, for the fields Endpoints does not
// model. It is unmarshalled from the bytes received on each call: the
// caller owns the result. It returns nil for a value not made by the
// decoder.
func (e *Endpoints) Raw() *endpointv3.ClusterLoadAssignment {
	if e == nil || e.raw == nil {
		return nil
	}
	m := new(endpointv3.ClusterLoadAssignment)
	// These bytes were unmarshalled once already: this cannot fail.
	if proto.Unmarshal(e.raw, m) != nil {
		return nil
	}
	return m
}

// Proto implements Resource; it returns Raw.
func (e *Endpoints) Proto() proto.Message { return e.Raw() }

// endpointsMsgs recycles decodeEndpoints's messages (see msgPool).
var endpointsMsgs msgPool[endpointv3.ClusterLoadAssignment, *endpointv3.ClusterLoadAssignment]

func decodeEndpoints(ctx *DecodeContext, body *anypb.Any) (string, *Endpoints, error) {
	// The wire path declines leds_cluster_locality_config (a field it
	// does not read), so collections are the message path's alone.
	if e := decodeEndpointsWire(body.GetValue()); e != nil {
		return e.Name, e, nil
	}
	return decodeEndpointsMessage(body, ctx.endpointFallback())
}

// decodeEndpointsMessage decodes any assignment, through the generated
// message; decodeEndpointsWire must agree with it. leds: gRFC A95 is on,
// and a locality may name an LbEndpointCollection.
func decodeEndpointsMessage(body *anypb.Any, leds bool) (string, *Endpoints, error) {
	m := endpointsMsgs.get()
	defer endpointsMsgs.put(m)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal ClusterLoadAssignment: %v", err)
	}
	name := m.GetClusterName()
	if name == "" {
		return "", nil, fieldErrorf("cluster_name", "must not be empty")
	}
	e, err := newEndpoints(m, leds)
	if err != nil {
		return name, nil, err
	}
	e.raw = body.GetValue()
	return name, e, nil
}

type localityKey struct {
	priority uint32
	id       LocalityID
}

// endpointsBuilder holds the state of one decode: the backing arrays every
// locality's slices are cut from, and what must be unique.
type endpointsBuilder struct {
	localities []Locality
	endpoints  []Endpoint
	addrs      []string
	// seenAddrs and seenLocs are nil for an assignment of few addresses
	// or localities, which are then checked by a scan of addrs or
	// localities: the maps were most of what decoding a small assignment
	// allocated (docs/PERFORMANCE.md).
	seenAddrs map[string]struct{}
	seenLocs  map[localityKey]struct{}
}

// newEndpointsBuilder returns a builder with room for exactly nLoc
// localities, nEp endpoints and nAddr addresses.
func newEndpointsBuilder(nLoc, nEp, nAddr int) endpointsBuilder {
	b := endpointsBuilder{
		localities: make([]Locality, 0, nLoc),
		endpoints:  make([]Endpoint, 0, nEp),
		addrs:      make([]string, 0, nAddr),
	}
	if nAddr > maxScanned {
		b.seenAddrs = make(map[string]struct{}, nAddr)
	}
	if nLoc > maxScanned {
		b.seenLocs = make(map[localityKey]struct{}, nLoc)
	}
	return b
}

// priorities sums the weights of an assignment's localities by priority.
// It is apart from endpointsBuilder, whose slices the value keeps, so that
// its table can stay on the caller's stack (newPriorities).
type priorities struct {
	weight []uint64 // sum of locality weights per priority < len
	tooBig bool     // some priority >= number of localities: a gap
}

// newPriorities returns the table for n localities, in small when it fits.
func newPriorities(small []uint64, n int) priorities {
	if n > len(small) {
		return priorities{weight: make([]uint64, n)}
	}
	return priorities{weight: small[:n]}
}

// maxScanned is the most addresses or localities whose uniqueness is
// checked by a scan rather than a map: a scan of up to maxScanned strings
// is cheaper than building the map.
const maxScanned = 16

// newEndpoints validates an assignment and builds its value. The usual
// assignment never gets here: decodeEndpointsWire (endpoints_wire.go)
// applies the same rules to it, read from its bytes. A rule changed here
// must change there too, or make that path decline what it concerns
// (TestEndpointsWireMatchesMessage). leds: a locality may name an
// LbEndpointCollection (gRFC A95), and its lb_endpoints are then ignored.
func newEndpoints(m *endpointv3.ClusterLoadAssignment, leds bool) (*Endpoints, error) {
	e := &Endpoints{Name: m.GetClusterName()}
	if err := e.setDrops(m.GetPolicy().GetDropOverloads()); err != nil {
		return nil, err
	}
	// Count first so that every slice is one exact allocation.
	var nLoc, nEp, nAddr int
	for _, l := range m.GetEndpoints() {
		if l.GetLoadBalancingWeight().GetValue() == 0 {
			continue
		}
		nLoc++
		if leds && l.GetLedsClusterLocalityConfig() != nil {
			continue
		}
		for _, lbe := range l.GetLbEndpoints() {
			nEp++
			nAddr += 1 + len(lbe.GetEndpoint().GetAdditionalAddresses())
		}
	}
	b := newEndpointsBuilder(nLoc, nEp, nAddr)
	var prioSmall [maxScanned]uint64 // on the stack
	prio := newPriorities(prioSmall[:], nLoc)
	for i, l := range m.GetEndpoints() {
		weight := l.GetLoadBalancingWeight().GetValue()
		if weight == 0 {
			continue
		}
		if err := b.locality(l, weight, &prio, leds); err != nil {
			return nil, at(index("endpoints", i), err)
		}
	}
	e.Localities = b.localities
	return e, prio.check()
}

func (e *Endpoints) setDrops(in []*endpointv3.ClusterLoadAssignment_Policy_DropOverload) error {
	if len(in) == 0 {
		return nil
	}
	e.Drops = make([]DropOverload, len(in))
	for i, d := range in {
		path := index("policy.drop_overloads", i)
		if d.GetCategory() == "" {
			return fieldErrorf(path+".category", "must not be empty")
		}
		pm, err := perMillion(d.GetDropPercentage())
		if err != nil {
			return at(path+".drop_percentage", err)
		}
		e.Drops[i] = DropOverload{Category: d.GetCategory(), PerMillion: pm}
	}
	return nil
}

// locality appends the locality l to b.localities. leds: see newEndpoints.
func (b *endpointsBuilder) locality(l *endpointv3.LocalityLbEndpoints, weight uint32, prio *priorities, leds bool) error {
	lp := l.GetLocality()
	if lp == nil {
		return fieldErrorf("locality", "missing")
	}
	loc := Locality{
		ID:       LocalityID{Region: lp.GetRegion(), Zone: lp.GetZone(), SubZone: lp.GetSubZone()},
		Weight:   weight,
		Priority: l.GetPriority(),
	}
	if err := b.addLocality(loc, prio); err != nil {
		return err
	}
	proxy, err := proxyAddressOf(l.GetMetadata())
	if err != nil {
		return err
	}
	loc.ProxyAddress = proxy
	if lc := l.GetLedsClusterLocalityConfig(); leds && lc != nil {
		name, err := collectionName(lc)
		if err != nil {
			return at("leds_cluster_locality_config", err)
		}
		loc.EndpointCollection = name
		b.localities = append(b.localities, loc)
		return nil
	}
	start := len(b.endpoints)
	var sum uint64
	for j, lbe := range l.GetLbEndpoints() {
		ep, err := b.endpoint(lbe)
		if err != nil {
			return at(index("lb_endpoints", j), err)
		}
		if ep.ProxyAddress == "" {
			ep.ProxyAddress = proxy
		}
		if err := b.appendEndpoint(ep, &sum); err != nil {
			return at(index("lb_endpoints", j), err)
		}
	}
	loc.Endpoints = b.endpoints[start:len(b.endpoints):len(b.endpoints)]
	b.localities = append(b.localities, loc)
	return nil
}

// addLocality checks that loc is new and that its priority's weights do
// not overflow, and counts its weight; the caller appends it.
func (b *endpointsBuilder) addLocality(loc Locality, prio *priorities) error {
	if b.seenLocality(localityKey{loc.Priority, loc.ID}) {
		return fieldErrorf("locality", "duplicate locality %v at priority %d", loc.ID, loc.Priority)
	}
	if int64(loc.Priority) >= int64(len(prio.weight)) {
		prio.tooBig = true
		return nil
	}
	prio.weight[loc.Priority] += uint64(loc.Weight)
	if prio.weight[loc.Priority] > math.MaxUint32 {
		return fieldErrorf("load_balancing_weight", "sum of locality weights at priority %d exceeds %d", loc.Priority, uint32(math.MaxUint32))
	}
	return nil
}

// appendEndpoint adds ep to the locality being built, whose endpoints'
// weights so far add up to *sum, unless the sum overflows.
func (b *endpointsBuilder) appendEndpoint(ep Endpoint, sum *uint64) error {
	if *sum += uint64(ep.Weight); *sum > math.MaxUint32 {
		return fieldErrorf("load_balancing_weight", "sum of endpoint weights in the locality exceeds %d", uint32(math.MaxUint32))
	}
	b.endpoints = append(b.endpoints, ep)
	return nil
}

// seenLocality reports whether a locality of key was added already, and
// records it if not (b.localities records it when there is no map).
func (b *endpointsBuilder) seenLocality(key localityKey) bool {
	if b.seenLocs == nil {
		for i := range b.localities {
			if l := &b.localities[i]; l.Priority == key.priority && l.ID == key.id {
				return true
			}
		}
		return false
	}
	if _, dup := b.seenLocs[key]; dup {
		return true
	}
	b.seenLocs[key] = struct{}{}
	return false
}

func (b *endpointsBuilder) endpoint(lbe *endpointv3.LbEndpoint) (Endpoint, error) {
	ep := Endpoint{Weight: 1, HealthStatus: healthStatusOf(lbe.GetHealthStatus()), Metadata: lbe.GetMetadata()}
	if w := lbe.GetLoadBalancingWeight(); w != nil {
		if w.GetValue() == 0 {
			return Endpoint{}, fieldErrorf("load_balancing_weight", "must be above 0")
		}
		ep.Weight = w.GetValue()
	}
	p := lbe.GetEndpoint()
	if p == nil {
		if _, named := lbe.GetHostIdentifier().(*endpointv3.LbEndpoint_EndpointName); named {
			return Endpoint{}, fieldErrorf("endpoint_name", "not supported (use endpoint)")
		}
		return Endpoint{}, fieldErrorf("endpoint", "missing")
	}
	ep.Hostname = p.GetHostname()
	proxy, err := proxyAddressOf(lbe.GetMetadata())
	if err != nil {
		return Endpoint{}, err
	}
	ep.ProxyAddress = proxy
	start := len(b.addrs)
	if err := b.addAddress(p.GetAddress()); err != nil {
		return Endpoint{}, at("endpoint.address", err)
	}
	for k, extra := range p.GetAdditionalAddresses() {
		if err := b.addAddress(extra.GetAddress()); err != nil {
			return Endpoint{}, at(index("endpoint.additional_addresses", k)+".address", err)
		}
	}
	ep.Addresses = b.addrs[start:len(b.addrs):len(b.addrs)]
	return ep, nil
}

func (b *endpointsBuilder) addAddress(a *corev3.Address) error {
	hostPort, err := socketAddressString(a)
	if err != nil {
		return err
	}
	return b.appendAddr(hostPort)
}

// appendAddr adds hostPort to the assignment's addresses, unless it is
// there already.
func (b *endpointsBuilder) appendAddr(hostPort string) error {
	if b.seenAddr(hostPort) {
		return fmt.Errorf("duplicate address %s in the assignment", hostPort)
	}
	b.addrs = append(b.addrs, hostPort)
	return nil
}

// seenAddr reports whether hostPort was added already, and records it in
// the map if not (b.addrs records it when there is no map).
func (b *endpointsBuilder) seenAddr(hostPort string) bool {
	if b.seenAddrs == nil {
		for _, a := range b.addrs {
			if a == hostPort {
				return true
			}
		}
		return false
	}
	if _, dup := b.seenAddrs[hostPort]; dup {
		return true
	}
	b.seenAddrs[hostPort] = struct{}{}
	return false
}

// check reports a gap in the priorities: an unused priority below a used
// one. A priority at or above the number of localities means some lower
// one is unused, so the table only covers those below.
func (prio *priorities) check() error {
	missing := -1
	for p, w := range prio.weight {
		switch {
		case w == 0 && missing < 0:
			missing = p
		case w != 0 && missing >= 0:
			return priorityGap(missing)
		}
	}
	if prio.tooBig {
		if missing < 0 { // cannot happen; never accept a gap regardless
			missing = len(prio.weight)
		}
		return priorityGap(missing)
	}
	return nil
}

func priorityGap(p int) error {
	return fieldErrorf("endpoints", "priorities must run from 0 without gaps: priority %d is missing", p)
}

// socketAddressString validates a socket address and returns it as
// "host:port".
func socketAddressString(a *corev3.Address) (string, error) {
	sa := a.GetSocketAddress()
	if sa == nil {
		if a == nil {
			return "", fmt.Errorf("missing")
		}
		return "", fmt.Errorf("want a socket_address, got %T", a.GetAddress())
	}
	host, ok := canonicalHost(sa.GetAddress())
	if !ok {
		return "", fieldErrorf("socket_address.address", "%q is neither an IP address nor a host name", sa.GetAddress())
	}
	port, err := socketPort(sa)
	if err != nil {
		return "", at("socket_address", err)
	}
	return joinHostPort(host, port), nil
}

// canonicalHost returns host as an endpoint's address keeps it: an IPv4
// address or a host name as it is, an IPv6 address in canonical form (one
// spelling per address); ok is false if host is none of these.
func canonicalHost(host string) (string, bool) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.Is4() {
			return ip.String(), true
		}
		return host, true
	}
	return host, validHostname(host)
}

// joinHostPort is net.JoinHostPort(host, port) in one allocation instead
// of two (the port's text and the result): an assignment's addresses are
// most of what its decode allocates besides the message.
func joinHostPort(host string, port uint32) string {
	var digits [10]byte
	p := strconv.AppendUint(digits[:0], uint64(port), 10)
	bracket := strings.IndexByte(host, ':') >= 0
	n := len(host) + 1 + len(p)
	if bracket {
		n += 2
	}
	var sb strings.Builder
	sb.Grow(n) // exactly: a larger buffer would be kept with the string
	if bracket {
		sb.WriteByte('[')
	}
	sb.WriteString(host)
	if bracket {
		sb.WriteByte(']')
	}
	sb.WriteByte(':')
	sb.Write(p)
	return sb.String()
}

// validHostname reports whether h is a DNS name: dot-separated labels of 1
// to 63 letters, digits, '-' or '_', at most 253 characters, optionally
// ending with a dot.
func validHostname(h string) bool {
	if n := len(h); n > 0 && h[n-1] == '.' {
		h = h[:n-1]
	}
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			label++
			if label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}
