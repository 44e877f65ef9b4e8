package resources

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// The usual ClusterLoadAssignment, decoded from its bytes.
//
// Assignments come by the thousand, one per cluster, and the last of them
// complete a client's first configuration, where its heap peaks. Through
// the generated messages, an assignment of 3 endpoints left ~1.6 KB of
// messages (locality, endpoints, addresses, oneof wrappers) to the
// collector as soon as its Endpoints value was built: 16 MB at 10,000
// clusters, 160 MB at 100,000, all of it in the last phase, on top of the
// live heap (docs/PERFORMANCE.md, "Peak RSS"). decodeEndpointsWire reads
// the fields such an assignment uses straight from its bytes: a cluster
// name, localities (region, zone, sub-zone, weight, priority), endpoints
// (a socket address with a port value, a hostname, health, weight).
// Anything else — another field, a field twice (protobuf merges or
// replaces), metadata, a drop policy, additional addresses, a string that
// is not UTF-8, bytes that do not parse, a value that fails validation —
// and it gives up: decodeEndpoints then decodes the assignment through the
// generated message as before, errors included. So it only has to agree
// with that path on what it accepts (FuzzEndpointsWireMatchesMessage).

// Field numbers of the messages read (envoy.config.endpoint.v3 and
// envoy.config.core.v3), by message.
const (
	claClusterName = 1 // ClusterLoadAssignment
	claEndpoints   = 2

	lleLocality     = 1 // LocalityLbEndpoints
	lleLbEndpoints  = 2
	lleWeight       = 3
	llePriority     = 5
	localityRegion  = 1 // Locality
	localityZone    = 2
	localitySubZone = 3

	lbeEndpoint     = 1 // LbEndpoint (oneof host_identifier)
	lbeHealthStatus = 2
	lbeWeight       = 4
	epAddress       = 1 // Endpoint
	epHostname      = 3
	addrSocket      = 1 // Address (oneof address)
	saProtocol      = 1 // SocketAddress
	saAddress       = 2
	saPortValue     = 3 // (oneof port_specifier)
	uint32Value     = 1 // google.protobuf.UInt32Value
)

// wireLocality is one LocalityLbEndpoints as read, its byte slices into
// the assignment's bytes.
type wireLocality struct {
	region, zone, subZone []byte
	hasLocality           bool
	weight                uint32 // 0 when unset: the locality is left out
	priority              uint32
	endpoints             int // how many of claScratch.endpoints are its, after the previous locality's
}

// wireEndpoint is one LbEndpoint as read.
type wireEndpoint struct {
	host, hostname []byte
	port           uint32
	health         int32
	weight         uint32 // as received; hasWeight false: unset
	hasWeight      bool
}

// claScratch holds what an assignment's bytes say, between reading them
// and building its value; recycled, so that reading allocates nothing.
type claScratch struct {
	localities []wireLocality
	endpoints  []wireEndpoint
}

var claScratches = sync.Pool{New: func() any { return new(claScratch) }}

// maxScratch is the most localities or endpoints a recycled scratch keeps
// room for: a rare huge assignment does not stay in memory through it.
const maxScratch = 1024

func (s *claScratch) release() {
	// The slices point into the assignment's bytes: let them go.
	clear(s.localities)
	clear(s.endpoints)
	s.localities, s.endpoints = s.localities[:0], s.endpoints[:0]
	if cap(s.localities) > maxScratch || cap(s.endpoints) > maxScratch {
		return
	}
	claScratches.Put(s)
}

// decodeEndpointsWire returns the Endpoints of the assignment b, or nil
// when b is not of the usual shape or not valid (the caller decodes it
// through the generated message then).
func decodeEndpointsWire(b []byte) *Endpoints {
	s := claScratches.Get().(*claScratch)
	defer s.release()
	name, ok := s.read(b)
	if !ok || len(name) == 0 {
		return nil
	}
	e, ok := s.build(name)
	if !ok {
		return nil
	}
	e.raw = b
	return e
}

// wireField is one field of a message: its number and type, and its value
// (varint) or payload (bytes).
type wireField struct {
	num   protowire.Number
	typ   protowire.Type
	v     uint64
	bytes []byte
}

// nextField reads the field at the start of *b and moves *b past it; ok
// is false at the end and for anything but a varint or length-delimited
// field, or bytes that do not parse.
func nextField(b *[]byte) (f wireField, ok bool) {
	if len(*b) == 0 {
		return f, false
	}
	num, typ, n := protowire.ConsumeTag(*b)
	if n < 0 {
		return f, false
	}
	*b = (*b)[n:]
	f.num, f.typ = num, typ
	switch typ {
	case protowire.VarintType:
		f.v, n = protowire.ConsumeVarint(*b)
	case protowire.BytesType:
		f.bytes, n = protowire.ConsumeBytes(*b)
	default:
		return f, false
	}
	if n < 0 {
		return f, false
	}
	*b = (*b)[n:]
	return f, true
}

// once marks field num seen in *seen; it reports false if it was already
// (a singular field twice: protobuf would merge or replace). Every field
// read here is numbered below 16; a higher number has no bit (the shift
// gives 0) and is refused by the caller's switch as unknown.
func once(seen *uint16, num protowire.Number) bool {
	bit := uint16(1) << num
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// str returns a string field's bytes; ok is false if they are not UTF-8
// (a proto3 string: proto.Unmarshal fails).
func str(f wireField) ([]byte, bool) {
	return f.bytes, f.typ == protowire.BytesType && utf8.Valid(f.bytes)
}

// read fills s from the assignment's bytes and returns its cluster name.
func (s *claScratch) read(b []byte) (name []byte, ok bool) {
	var seen uint16
	for len(b) > 0 {
		f, ok := nextField(&b)
		if !ok || f.typ != protowire.BytesType {
			return nil, false
		}
		switch f.num {
		case claClusterName:
			if !once(&seen, f.num) {
				return nil, false
			}
			if name, ok = str(f); !ok {
				return nil, false
			}
		case claEndpoints:
			if !s.readLocality(f.bytes) {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return name, true
}

func (s *claScratch) readLocality(b []byte) bool {
	l := wireLocality{}
	var seen uint16
	for len(b) > 0 {
		f, ok := nextField(&b)
		if !ok || !once(&seen, f.num) && f.num != lleLbEndpoints {
			return false
		}
		switch {
		case f.num == lleLocality && f.typ == protowire.BytesType:
			l.hasLocality = true
			if !readLocalityID(f.bytes, &l) {
				return false
			}
		case f.num == lleLbEndpoints && f.typ == protowire.BytesType:
			if !s.readEndpoint(f.bytes) {
				return false
			}
			l.endpoints++
		case f.num == lleWeight && f.typ == protowire.BytesType:
			if l.weight, ok = readUInt32Value(f.bytes); !ok {
				return false
			}
		case f.num == llePriority && f.typ == protowire.VarintType && f.v <= math.MaxUint32:
			l.priority = uint32(f.v)
		default:
			return false
		}
	}
	s.localities = append(s.localities, l)
	return true
}

func readLocalityID(b []byte, l *wireLocality) bool {
	var seen uint16
	for len(b) > 0 {
		f, ok := nextField(&b)
		if !ok || !once(&seen, f.num) {
			return false
		}
		v, ok := str(f)
		if !ok {
			return false
		}
		switch f.num {
		case localityRegion:
			l.region = v
		case localityZone:
			l.zone = v
		case localitySubZone:
			l.subZone = v
		default:
			return false
		}
	}
	return true
}

// readUInt32Value reads a google.protobuf.UInt32Value.
func readUInt32Value(b []byte) (uint32, bool) {
	var v uint32
	var seen uint16
	for len(b) > 0 {
		f, ok := nextField(&b)
		if !ok || !once(&seen, f.num) || f.num != uint32Value || f.typ != protowire.VarintType || f.v > math.MaxUint32 {
			return 0, false
		}
		v = uint32(f.v)
	}
	return v, true
}

func (s *claScratch) readEndpoint(b []byte) bool {
	var ep wireEndpoint
	var seen uint16
	hasEndpoint := false
	for len(b) > 0 {
		f, ok := nextField(&b)
		if !ok || !once(&seen, f.num) {
			return false
		}
		switch {
		case f.num == lbeEndpoint && f.typ == protowire.BytesType:
			hasEndpoint = true
			if !readEndpointMsg(f.bytes, &ep) {
				return false
			}
		case f.num == lbeHealthStatus && f.typ == protowire.VarintType && f.v <= math.MaxInt32:
			ep.health = int32(f.v)
		case f.num == lbeWeight && f.typ == protowire.BytesType:
			ep.hasWeight = true
			if ep.weight, ok = readUInt32Value(f.bytes); !ok {
				return false
			}
		default:
			return false
		}
	}
	if !hasEndpoint {
		return false
	}
	s.endpoints = append(s.endpoints, ep)
	return true
}

// readEndpointMsg reads an Endpoint: a socket address, and a hostname.
func readEndpointMsg(b []byte, ep *wireEndpoint) bool {
	var seen uint16
	hasAddress := false
	for len(b) > 0 {
		f, ok := nextField(&b)
		if !ok || !once(&seen, f.num) || f.typ != protowire.BytesType {
			return false
		}
		switch f.num {
		case epAddress:
			hasAddress = true
			if !readAddress(f.bytes, ep) {
				return false
			}
		case epHostname:
			if ep.hostname, ok = str(f); !ok {
				return false
			}
		default:
			return false
		}
	}
	return hasAddress
}

// readAddress reads an Address holding a socket address with a port value.
func readAddress(b []byte, ep *wireEndpoint) bool {
	f, ok := nextField(&b)
	if !ok || len(b) > 0 || f.num != addrSocket || f.typ != protowire.BytesType {
		return false
	}
	b = f.bytes
	var seen uint16
	hasPort := false
	for len(b) > 0 {
		f, ok := nextField(&b)
		if !ok || !once(&seen, f.num) {
			return false
		}
		switch {
		case f.num == saProtocol && f.typ == protowire.VarintType:
			// Not read by the decoder: any value.
		case f.num == saAddress && f.typ == protowire.BytesType:
			if ep.host, ok = str(f); !ok {
				return false
			}
		case f.num == saPortValue && f.typ == protowire.VarintType && f.v <= math.MaxUint32:
			ep.port, hasPort = uint32(f.v), true
		default:
			return false
		}
	}
	return hasPort
}

// build makes the Endpoints value of what read found, by the rules of
// newEndpoints; ok is false where newEndpoints would fail.
func (s *claScratch) build(name []byte) (*Endpoints, bool) {
	e := &Endpoints{Name: string(name)}
	var nLoc, nEp int
	for _, l := range s.localities {
		if l.weight != 0 {
			nLoc++
			nEp += l.endpoints
		}
	}
	b := newEndpointsBuilder(nLoc, nEp, nEp) // one address each
	var prioSmall [maxScanned]uint64         // on the stack
	prio := newPriorities(prioSmall[:], nLoc)
	eps := s.endpoints
	for _, l := range s.localities {
		mine := eps[:l.endpoints]
		eps = eps[l.endpoints:]
		if l.weight == 0 {
			continue
		}
		if !l.hasLocality || !b.wireLocality(l, mine, &prio) {
			return nil, false
		}
	}
	e.Localities = b.localities
	return e, prio.check() == nil
}

func (b *endpointsBuilder) wireLocality(l wireLocality, eps []wireEndpoint, prio *priorities) bool {
	loc := Locality{
		ID:       LocalityID{Region: string(l.region), Zone: string(l.zone), SubZone: string(l.subZone)},
		Weight:   l.weight,
		Priority: l.priority,
	}
	if b.addLocality(loc, prio) != nil {
		return false
	}
	start := len(b.endpoints)
	var sum uint64
	for _, we := range eps {
		ep := Endpoint{Weight: 1, HealthStatus: healthStatusOf(corev3.HealthStatus(we.health)), Hostname: string(we.hostname)}
		if we.hasWeight {
			if we.weight == 0 {
				return false
			}
			ep.Weight = we.weight
		}
		hostPort, ok := wireHostPort(we.host, we.port)
		if !ok || b.appendAddr(hostPort) != nil {
			return false
		}
		ep.Addresses = b.addrs[len(b.addrs)-1 : len(b.addrs) : len(b.addrs)]
		if b.appendEndpoint(ep, &sum) != nil {
			return false
		}
	}
	loc.Endpoints = b.endpoints[start:len(b.endpoints):len(b.endpoints)]
	b.localities = append(b.localities, loc)
	return true
}

// wireHostPort is socketAddressString for an address read from bytes:
// "host:port" made in one allocation where the host is an IPv4 address or
// a host name (no colon: it is kept as received, so the string is cut from
// the result), through socketAddressString's rules otherwise.
func wireHostPort(host []byte, port uint32) (string, bool) {
	if port == 0 || port > 65535 {
		return "", false
	}
	for _, c := range host {
		if c == ':' {
			h, ok := canonicalHost(string(host))
			if !ok {
				return "", false
			}
			return joinHostPort(h, port), true
		}
	}
	var digits [10]byte
	p := strconv.AppendUint(digits[:0], uint64(port), 10)
	var sb strings.Builder
	sb.Grow(len(host) + 1 + len(p))
	sb.Write(host)
	sb.WriteByte(':')
	sb.Write(p)
	hostPort := sb.String()
	if h, ok := canonicalHost(hostPort[:len(host)]); !ok || len(h) != len(host) {
		return "", false
	}
	return hostPort, true
}
