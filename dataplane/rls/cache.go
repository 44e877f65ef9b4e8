package rls

import (
	"container/list"
	"time"
)

// minEvictAge is how long an answer is kept however full the cache, so
// that a burst of new keys cannot evict answers as soon as they come (the
// lookups would be lost work).
const minEvictAge = 5 * time.Second

// entry is the cache's record of one cache key: the last answer of the
// lookup service for it, the state of its failures, or both (a stale
// answer whose refresh failed).
type entry struct {
	key  string
	elem *list.Element // in cache.lru
	size int64

	// The last answer; expiry is zero until one came. targets hold a
	// reference each (Policy.acquireLocked).
	targets        []*target
	headerData     string
	expiry, stale  time.Time
	evictableAfter time.Time

	// Failures: err is the last lookup's while backing off; retries the
	// failures in a row; until backoffUntil lookups are not retried, and
	// the entry is kept until backoffExpiry at least. timer repicks when
	// the backoff ends, for requests that wait.
	err                         error
	retries                     int
	backoffUntil, backoffExpiry time.Time
	timer                       Timer
}

// hasData reports whether e has an answer that has not expired at now.
func (e *entry) hasData(now time.Time) bool { return now.Before(e.expiry) }

// backingOff reports whether lookups of e's key wait at now.
func (e *entry) backingOff(now time.Time) bool { return now.Before(e.backoffUntil) }

// entrySize is what an entry counts towards the size bound: its key (path
// and keys) and header data, as gRPC counts it.
func entrySize(e *entry) int64 { return int64(len(e.key) + len(e.headerData)) }

// cache holds the entries, least recently used first. Guarded by the
// Policy's mu; removing an entry is the Policy's (it owns the targets and
// the timer an entry holds).
type cache struct {
	max, size int64
	lru       list.List
	m         map[string]*entry
}

// get returns the entry of key, nil if none, and makes it the most
// recently used.
func (c *cache) get(key string) *entry {
	e := c.m[key]
	if e != nil {
		c.lru.MoveToBack(e.elem)
	}
	return e
}

// add adds a new entry, the most recently used.
func (c *cache) add(e *entry) {
	if c.m == nil {
		c.m = make(map[string]*entry)
	}
	e.elem = c.lru.PushBack(e)
	c.m[e.key] = e
	e.size = entrySize(e)
	c.size += e.size
}

// resized updates the size of e after its header data changed.
func (c *cache) resized(e *entry) {
	n := entrySize(e)
	c.size += n - e.size
	e.size = n
}

// remove takes e out of the cache.
func (c *cache) remove(e *entry) {
	c.lru.Remove(e.elem)
	delete(c.m, e.key)
	c.size -= e.size
}

// overflow returns the entries to evict, least recently used first, for
// the cache to fit its bound at now: it stops at an entry too young to
// evict, leaving the cache over its bound until later.
func (c *cache) overflow(now time.Time) []*entry {
	var out []*entry
	size := c.size
	for el := c.lru.Front(); el != nil && size > c.max; el = el.Next() {
		e := el.Value.(*entry)
		if now.Before(e.evictableAfter) {
			break
		}
		out = append(out, e)
		size -= e.size
	}
	return out
}

// expired returns the entries with neither an answer nor a backoff in
// force at now.
func (c *cache) expired(now time.Time) []*entry {
	var out []*entry
	for _, e := range c.m {
		if !e.hasData(now) && !now.Before(e.backoffExpiry) {
			out = append(out, e)
		}
	}
	return out
}
