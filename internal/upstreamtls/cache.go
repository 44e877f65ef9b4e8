package upstreamtls

import (
	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
)

// A channel or HTTP client with thousands of clusters usually has a
// handful of distinct security configs, and each HandshakeInfo holds
// certificate providers (file watchers): clusters with equal security
// (Key) share one. It lives while an endpoint or connection setting of
// its owner holds it, and is closed by the first Prune after the last
// lets go, so that an update that swaps one cluster's TLS for another's
// never closes providers a handshake is still using.

// Cache holds the HandshakeInfos of one owner (grpcxds's balancer,
// httpxds's Transport), by Key. It has no lock: its owner guards it with
// the lock that guards its clusters, where every Get, Hold and Release is
// made. The zero value is an empty cache.
type Cache struct {
	m map[string]*Shared
}

// Shared is a HandshakeInfo of a Cache, with the count of what holds it.
type Shared struct {
	// Key is the Key of the security the HandshakeInfo was built for:
	// equal for every config it serves, so owners use it in the keys of
	// the connections it secures.
	Key string
	// Info is the HandshakeInfo. The Cache closes it; its holders must
	// not.
	Info *HandshakeInfo
	refs int
}

// Hold counts one more holder of s: Prune keeps s while it has one.
func (s *Shared) Hold() { s.refs++ }

// Release counts one holder less; the next Prune closes s if none is left.
func (s *Shared) Release() { s.refs-- }

// Get returns the Shared HandshakeInfo of sc: the cached one of its Key,
// or a new one built from b's certificate providers (see New, whose
// errors it returns). A new one is held by nothing: unless the caller
// holds it before the next Prune, Prune closes it.
func (c *Cache) Get(b *bootstrap.Config, sc *resources.SecurityConfig) (*Shared, error) {
	key := Key(sc)
	if s := c.m[key]; s != nil {
		return s, nil
	}
	hi, err := New(b, sc)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = make(map[string]*Shared)
	}
	s := &Shared{Key: key, Info: hi}
	c.m[key] = s
	return s, nil
}

// Prune closes and forgets the HandshakeInfos nothing holds.
func (c *Cache) Prune() {
	for key, s := range c.m {
		if s.refs <= 0 {
			s.Info.Close()
			delete(c.m, key)
		}
	}
}

// Close closes every HandshakeInfo, held or not, when the owner closes.
// The cache is empty afterwards.
func (c *Cache) Close() {
	for _, s := range c.m {
		s.Info.Close()
	}
	c.m = nil
}

// Len is the number of HandshakeInfos the cache holds.
func (c *Cache) Len() int { return len(c.m) }
