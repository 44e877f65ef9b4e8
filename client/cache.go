package client

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/resources"
)

// typeCache holds what the client knows of one resource type. Guarded by
// Client.mu, like everything reachable from it.
type typeCache struct {
	typ     resources.AnyType
	entries map[string]*entry
	// byRaw finds an entry by a hash of the serialized bytes it last
	// received (entry.raw), so an unchanged resource in a response is
	// recognised without decoding it: SotW resends every Listener and
	// Cluster in every response. Keyed by hash, not by the bytes, so that
	// the cache does not hold a second copy of every resource; a match is
	// confirmed against the entry's bytes (lookupRaw), and two resources
	// whose hashes collide only cost the one not indexed a decode.
	byRaw map[uint64]*entry
	seed  maphash.Seed // byRaw's, per cache: collisions cannot be planned
	// wildcard is the "*" subscription of the type, nil if none.
	wildcard *wildcardWatch
	// gen numbers the responses applied, to mark the entries each one saw.
	gen uint64
	// variants maps a resource name to its entries with dynamic
	// parameters (the plain one is entries[name]): a variant received is
	// matched against each. Nil until the type has such an entry.
	variants map[string]map[*entry]struct{}
	// aliasesOf maps a canonical resource name to the entries subscribed
	// under one of its aliases (delta, VHDS).
	aliasesOf map[string]map[*entry]struct{}
	// items is applyLocked's buffer, kept empty between responses.
	items []received
}

// addVariant and dropVariant keep variants in step with entries.
func (tc *typeCache) addVariant(e *entry) {
	if tc.variants == nil {
		tc.variants = make(map[string]map[*entry]struct{})
	}
	set := tc.variants[e.name]
	if set == nil {
		set = make(map[*entry]struct{})
		tc.variants[e.name] = set
	}
	set[e] = struct{}{}
}

func (tc *typeCache) dropVariant(e *entry) {
	if set := tc.variants[e.name]; set != nil {
		delete(set, e)
		if len(set) == 0 {
			delete(tc.variants, e.name)
		}
	}
}

// rawKey is the key of b in byRaw.
func (tc *typeCache) rawKey(b []byte) uint64 { return maphash.Bytes(tc.seed, b) }

// lookupRaw returns the entry whose last bytes received are b, if byRaw
// has it.
func (tc *typeCache) lookupRaw(b []byte) *entry {
	if e := tc.byRaw[tc.rawKey(b)]; e != nil && bytes.Equal(e.raw(), b) {
		return e
	}
	return nil
}

// indexRaw makes e found by its last bytes received.
func (tc *typeCache) indexRaw(e *entry) {
	if b := e.raw(); b != nil {
		tc.byRaw[tc.rawKey(b)] = e
	}
}

func (tc *typeCache) trackAlias(canonical string, ae *entry) {
	if ae.rare().canonical == canonical {
		return
	}
	tc.untrackAlias(ae)
	if tc.aliasesOf == nil {
		tc.aliasesOf = make(map[string]map[*entry]struct{})
	}
	set := tc.aliasesOf[canonical]
	if set == nil {
		set = make(map[*entry]struct{})
		tc.aliasesOf[canonical] = set
	}
	set[ae] = struct{}{}
	ae.rareW().canonical = canonical
}

func (tc *typeCache) untrackAlias(ae *entry) {
	x := ae.x
	if x == nil || x.canonical == "" {
		return
	}
	if set := tc.aliasesOf[x.canonical]; set != nil {
		delete(set, ae)
		if len(set) == 0 {
			delete(tc.aliasesOf, x.canonical)
		}
	}
	x.canonical = ""
}

// wildcardWatch is the subscription to every resource of a type.
type wildcardWatch struct {
	auth     *authority // the top-level servers
	srv      *server    // auth's current server
	watchers map[*watcher]struct{}
	// answered tells whether a response of the type came from srv (or a
	// server before it) since the watch began; until then the watch waits
	// on what the cache lacks, which makes a failed server fall back
	// (gRFC A71).
	answered bool
}

func (c *Client) cacheLocked(typeURL string) *typeCache {
	if tc := c.lastCache; tc != nil && tc.typ.TypeURL() == typeURL {
		return tc
	}
	tc := c.caches[typeURL]
	if tc == nil {
		typ, ok := c.types[typeURL]
		if !ok {
			return nil
		}
		tc = &typeCache{
			typ:     typ,
			entries: make(map[string]*entry),
			byRaw:   make(map[uint64]*entry),
			seed:    maphash.MakeSeed(),
		}
		c.caches[typeURL] = tc
	}
	c.lastCache = tc
	return tc
}

// Status is the state of a resource in the client's cache, as a status dump
// reports it.
type Status int

const (
	// StatusRequested: subscribed, nothing received yet.
	StatusRequested Status = iota
	// StatusDoesNotExist: the server does not have it (see ErrResourceNotFound).
	StatusDoesNotExist
	// StatusACKed: the last version received was valid and accepted.
	StatusACKed
	// StatusNACKed: the last version received was rejected; the last good
	// version, if any, is still served.
	StatusNACKed
	// StatusReceivedError: the server reported an error for the resource
	// (resource_errors, gRFC A88; see ErrReportedByServer). The last good
	// version, if any, is still served unless the server is marked
	// fail_on_data_errors and the error was NOT_FOUND or PERMISSION_DENIED.
	StatusReceivedError
	// StatusTimeout: nothing arrived before the does-not-exist timer of a
	// server marked resource_timer_is_transient_error fired: the server
	// is slow, the resource is not known not to exist (gRFC A88).
	StatusTimeout
)

// String returns the Status as text, for logs and errors.
func (s Status) String() string {
	switch s {
	case StatusRequested:
		return "REQUESTED"
	case StatusDoesNotExist:
		return "DOES_NOT_EXIST"
	case StatusACKed:
		return "ACKED"
	case StatusNACKed:
		return "NACKED"
	case StatusReceivedError:
		return "RECEIVED_ERROR"
	case StatusTimeout:
		return "TIMEOUT"
	}
	return "UNKNOWN"
}

// entry is one subscription: a resource name and, optionally, dynamic
// parameters; its watchers, its last good value and its timers.
//
// A client holds one entry per name it watches, 20,000 at 10,000 clusters,
// so the entry keeps here only what almost every entry uses, in 192 bytes;
// what few use (dynamic parameters, aliases, TTL, errors, rejected bytes, a
// value from disk) is in an entryRare made the first time one is set
// (TestEntrySize pins both).
type entry struct {
	// name is the resource name.
	name string
	auth *authority // the servers the name is fetched from
	// srv is auth's current server, the only one whose responses apply to
	// the entry: it changes when the authority falls back or goes back.
	srv *server
	// src is the server the held value (or the last received, when
	// rejected) came from; nil if none.
	src      *server
	watchers watcherSet // named watchers; the wildcard's are on the typeCache

	value   resources.Resource // last good value, nil if none
	version string             // version of value
	// rcvVersion is the version of the last resource received, valid or
	// not: a heartbeat must name it.
	rcvVersion string
	// valueRaw is the serialized value, nil if none. It is the slice the
	// response carried, not a copy: a decoded value that keeps its bytes
	// (resources.Cluster, resources.Endpoints) keeps the same array, and
	// nothing writes to it. The last bytes received are valueRaw too,
	// unless rare says otherwise (see raw).
	valueRaw []byte
	status   Status
	// lastUpdated is when status last changed.
	lastUpdated time.Time
	seenGen     uint64 // typeCache.gen of the last response naming it

	// dneTimer runs while the name is on a live stream and nothing has
	// arrived (one clock timer for the names sent together, timers.go).
	// dneGen lets a timer that fired after being replaced find out it is
	// stale.
	dneTimer *dneBatch
	dneGen   uint64

	// x holds the fields few entries use; nil until one is set, never
	// dropped once made (its generation counters must outlive the timers
	// that read them). Read through rare, written through rareW.
	x *entryRare
}

// entryRare is the part of an entry that most entries never use.
type entryRare struct {
	// key is the entry's key in typeCache.entries and what the transport
	// is told when it is not the name: transport.SubscriptionKey(name,
	// params). "" for a plain entry, keyed by its name.
	key    string
	params map[string]string // dynamic parameters; nil for none
	// constraints are those of the variant held (or last received), nil
	// for a variant without: removals name variants by them.
	constraints *discoveryv3.DynamicParameterConstraints
	// raw is the last bytes received when they are not valueRaw (rawApart):
	// rejected ones (with rawErr), or none while the value came from disk.
	raw      []byte
	rawApart bool
	rawErr   error
	lastErr  error // the reason of the last NACK, server error or timeout
	// reported is what watchers were told of a server's error or a
	// timeout (StatusReceivedError, StatusTimeout), for new watchers to be
	// told the same (gRFC A88: a late watcher sees the data, then the
	// ambient error).
	reported error
	dupGen   uint64 // typeCache.gen of the last response naming it twice
	errGen   uint64 // typeCache.gen of a response with an error for it, until applied
	// fromDisk: value was read from the persistence directory
	// (Options.Persist), not received from a server in this run.
	fromDisk bool
	// canonical is the name of the resource this entry received under one
	// of its aliases; "" for entries keyed by their own name.
	canonical string
	// ttlTimer runs while the held value has a TTL; ttlGen lets a timer
	// that fired after being replaced find out it is stale.
	ttlTimer Timer
	ttlGen   uint64
}

// noRare is what rare returns for an entry without its rare part: all
// zero. It must never be written.
var noRare entryRare

// rare returns the entry's rare fields for reading: the zero record when
// it has none. Writes go through rareW.
func (e *entry) rare() *entryRare {
	if e.x != nil {
		return e.x
	}
	return &noRare
}

// rareW returns the entry's rare fields for writing, made if need be.
func (e *entry) rareW() *entryRare {
	if e.x == nil {
		e.x = new(entryRare)
	}
	return e.x
}

// key is the entry's key in typeCache.entries (see entryRare.key).
func (e *entry) key() string {
	if e.x != nil && e.x.key != "" {
		return e.x.key
	}
	return e.name
}

// raw returns the last bytes received for the entry (what tc.byRaw finds
// it by), nil if none.
func (e *entry) raw() []byte {
	if e.x != nil && e.x.rawApart {
		return e.x.raw
	}
	return e.valueRaw
}

// setRaw records b as the last bytes received, leaving valueRaw alone.
func (e *entry) setRaw(b []byte) {
	if sameBytes(b, e.valueRaw) {
		if e.x != nil {
			e.x.raw, e.x.rawApart = nil, false
		}
		return
	}
	x := e.rareW()
	x.raw, x.rawApart = b, true
}

// setValueRaw sets valueRaw, leaving the last bytes received alone.
func (e *entry) setValueRaw(b []byte) {
	r := e.raw()
	e.valueRaw = b
	e.setRaw(r)
}

// sameBytes tells whether a and b are the same slice (not merely equal
// bytes), nil and empty told apart.
func sameBytes(a, b []byte) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}

// setStatus sets the status, its time, and the errors that go with it:
// the common case, no error, makes no rare record.
func (e *entry) setStatus(st Status, lastErr, reported error, now time.Time) {
	e.status, e.lastUpdated = st, now
	if lastErr != nil || reported != nil {
		x := e.rareW()
		x.lastErr, x.reported = lastErr, reported
	} else if e.x != nil {
		e.x.lastErr, e.x.reported = nil, nil
	}
}

// setRawErr records why the last bytes received were rejected; nil clears
// it.
func (e *entry) setRawErr(err error) {
	if err != nil {
		e.rareW().rawErr = err
	} else if e.x != nil {
		e.x.rawErr = nil
	}
}

// setConstraints records the constraints of the variant last received.
func (e *entry) setConstraints(c *discoveryv3.DynamicParameterConstraints) {
	if c != nil {
		e.rareW().constraints = c
	} else if e.x != nil {
		e.x.constraints = nil
	}
}

// setFromDisk records whether the value held was read from disk.
func (e *entry) setFromDisk(v bool) {
	if v {
		e.rareW().fromDisk = true
	} else if e.x != nil {
		e.x.fromDisk = false
	}
}

// hasData reports whether anything was received for the entry, valid or not.
func (e *entry) hasData() bool { return e.value != nil || e.rare().rawErr != nil }

func (e *entry) stopTimers() {
	e.stopDNETimer()
	e.stopTTLTimer()
}

func (e *entry) stopDNETimer() {
	if b := e.dneTimer; b != nil {
		e.dneTimer = nil
		if b.live--; b.live == 0 {
			// The last of the batch: its clock timer has nothing left to
			// do, and its members need not be kept.
			b.timer.Stop()
			b.members = nil
		}
	}
	e.dneGen++
}

func (e *entry) stopTTLTimer() {
	// Without a rare record no TTL timer ever ran: no generation to move.
	if x := e.x; x != nil {
		if x.ttlTimer != nil {
			x.ttlTimer.Stop()
			x.ttlTimer = nil
		}
		x.ttlGen++
	}
}

// watcher is one watch, whatever the Go type its user sees.
type watcher struct {
	// sink is the user's watcher behind its type: a typedWatcher holding
	// this watcher, so that a watch is one allocation, not one per
	// callback (20,000 watches at 10,000 clusters).
	sink     sink
	canceled atomic.Bool
	// c, tc and e are what cancel needs, so that the cancel function a
	// watch returns is the method value w.cancel (16 bytes), not a closure
	// of its own; tc also names the type in deliver's errors. tc is set
	// once the type is known, c and e for a watch of a name.
	c  *Client
	tc *typeCache
	e  *entry
}

// cancel ends a watch of a name. The canceled flag makes it idempotent: no
// sync.OnceFunc, whose state was the larger part of a watch's allocations.
func (w *watcher) cancel() {
	if w.canceled.CompareAndSwap(false, true) {
		w.c.unwatch(w.tc, w.e, w)
	}
}

// sink receives a watcher's events, resources seen as
// resources.Resource.
type sink interface {
	deliver(kind int, v resources.Resource, err error)
}

// notification kinds.
const (
	notifyUpdate = iota
	notifyUpdateFromDisk
	notifyResourceError
	notifyAmbientError
)

// notifyLocked queues one event for the named watchers of e and, if
// wildcardToo, for the wildcard watchers of its type. Wildcard watchers
// hear of resources they have seen (updates, rejections, deletions), not of
// names others asked for that never arrived.
func (c *Client) notifyLocked(tc *typeCache, e *entry, kind int, v resources.Resource, err error, wildcardToo bool) {
	wildcard := wildcardToo && tc.wildcard != nil && tc.wildcard.srv == e.srv && len(tc.wildcard.watchers) > 0
	if w := e.watchers.one; w != nil && e.watchers.many == nil && !wildcard {
		// The usual case, one watcher: no list to make (10,000 of them
		// for a response of 10,000 clusters).
		c.cbs.schedule(func() { w.deliver(kind, v, err) })
		return
	}
	ws := e.watchers.appendTo(make([]*watcher, 0, e.watchers.len()))
	if wildcard {
		for w := range tc.wildcard.watchers {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return
	}
	c.cbs.schedule(func() {
		for _, w := range ws {
			w.deliver(kind, v, err)
		}
	})
}

func (w *watcher) deliver(kind int, v resources.Resource, err error) {
	if w.canceled.Load() {
		return
	}
	w.sink.deliver(kind, v, err)
}
