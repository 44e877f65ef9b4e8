package resources

import (
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Decoded values keep the bytes they came from rather than the decoded
// message (see the package doc): the message is several times larger than
// its bytes and few callers read it. A value inside a resource (a virtual
// host, a route) keeps its own part of the resource's bytes, found with
// fieldCursor: a sub-slice of the parent's buffer, so it costs a slice
// header and no copy.

// The field numbers of RouteConfiguration.virtual_hosts and
// VirtualHost.routes, where a virtual host's and a route's bytes are.
const (
	vhostsField = 2
	routesField = 3
)

// fieldCursor walks the occurrences of one length-delimited field of a
// serialized message, in order. The i-th occurrence of a repeated message
// field is the i-th element the unmarshalled message holds: proto.Unmarshal
// appends one element per occurrence, and treats an occurrence of another
// wire type as an unknown field, as next skips it.
type fieldCursor struct {
	// b is what is left of the message to scan.
	b []byte
	// num is the field's number.
	num protowire.Number
}

// next returns the payload of the field's next occurrence, or nil when
// there is none or the bytes are malformed (they never are: they were
// unmarshalled already).
func (c *fieldCursor) next() []byte {
	for len(c.b) > 0 {
		num, typ, n := protowire.ConsumeTag(c.b)
		if n < 0 {
			c.b = nil
			return nil
		}
		c.b = c.b[n:]
		if num == c.num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(c.b)
			if m < 0 {
				c.b = nil
				return nil
			}
			c.b = c.b[m:]
			return v
		}
		m := protowire.ConsumeFieldValue(num, typ, c.b)
		if m < 0 {
			c.b = nil
			return nil
		}
		c.b = c.b[m:]
	}
	return nil
}

// marshalOrNil serializes a message that came inside another (a route
// configuration inlined in a Listener) for a value to keep as its bytes.
// Such messages are few; nil on error leaves the value's Raw nil, which
// never happens for a message that was just unmarshalled.
func marshalOrNil(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

// unmarshalRaw fills m from b, bytes that were unmarshalled once already,
// so that it cannot fail; it reports false for nil bytes (a value not made
// by the decoder).
func unmarshalRaw(b []byte, m proto.Message) bool {
	return b != nil && proto.Unmarshal(b, m) == nil
}

// msgPool recycles the top-level message a decoder unmarshals into, for
// the types that come by the thousand: once a value is built from it and
// keeps only bytes, the message is garbage, and a Cluster message alone is
// half of what decoding a Cluster allocates. Recycling is safe because a
// value never keeps the top-level message, only strings, slices and
// sub-messages it points to, which proto.Reset drops from the message
// rather than clearing, and which the next unmarshal never writes to.
type msgPool[M any, P interface {
	*M
	proto.Message
}] struct {
	pool sync.Pool
}

// get returns an empty message.
func (mp *msgPool[M, P]) get() P {
	if m, ok := mp.pool.Get().(P); ok {
		return m
	}
	return P(new(M))
}

// put empties m and keeps it for a later get; m must not be used after.
func (mp *msgPool[M, P]) put(m P) {
	proto.Reset(m)
	mp.pool.Put(m)
}
