package client

import (
	"fmt"
	"testing"
	"unsafe"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
)

// An entry is made for every name a client watches: 20,000 at 10,000
// clusters. What most entries never use lives in entryRare, made only when
// set; these checks keep a field added to entry from regrowing it unseen
// (docs/PERFORMANCE.md: 336 B with everything in one record), and the
// common path from making the rare record after all.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 192 {
		t.Errorf("entry is %d bytes, want at most 192 (a field few entries use belongs in entryRare)", got)
	}
	// A watch is its typedWatcher and the 16-byte method value of its
	// cancel: 80 + 16 B, where it was 96 + a 48-byte closure.
	if got := unsafe.Sizeof(typedWatcher[*resources.Cluster]{}); got > 80 {
		t.Errorf("typedWatcher is %d bytes, want at most 80", got)
	}

	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1")
	for i, v := range []string{"a", "a", "b"} { // accepted, resent unchanged, changed
		if err := h.sotw(resources.ListenerTypeURL, string(rune('1'+i)), lis("L1", v)); err != nil {
			t.Fatal(err)
		}
	}
	w["L1"].next(t)
	w["L1"].next(t)
	if e := h.entryOf(resources.ListenerTypeURL, "L1"); e.x != nil {
		t.Errorf("a plain entry that only ever received valid resources has a rare record: %+v", *e.x)
	}
}

// byRaw is keyed by a hash of the bytes: a hash that matches while the
// bytes differ (forced here, as a collision would) must not make a changed
// resource pass for unchanged.
func TestByRawConfirmsTheBytes(t *testing.T) {
	h := newHarness(t, nil, Options{})
	w := h.watchAll(wholeWorldType, "L1")
	if err := h.sotw(resources.ListenerTypeURL, "1", lis("L1", "a")); err != nil {
		t.Fatal(err)
	}
	w["L1"].next(t)
	changed := lis("L1", "b")
	h.c.mu.Lock()
	tc := h.c.caches[resources.ListenerTypeURL]
	e := tc.entries["L1"]
	tc.byRaw[tc.rawKey(changed.GetValue())] = e // the changed bytes' hash leads to the old ones
	h.c.mu.Unlock()
	before := decodes.Load()
	if err := h.sotw(resources.ListenerTypeURL, "2", changed); err != nil {
		t.Fatal(err)
	}
	if decodes.Load() == before {
		t.Fatal("a resource whose hash matched other bytes was taken for unchanged, not decoded")
	}
	w["L1"].next(t)
}

// The buffer a type's responses are applied with is kept between them, but
// not at the size of one large response once they are small again, and not
// after a large delta response: a delta client's first response of 10,000
// resources would otherwise hold 1.6 MB for good.
func TestItemsBufferFollowsResponses(t *testing.T) {
	h := newHarness(t, nil, Options{})
	const n = 1000
	names := make([]string, n)
	res := make([]*discoveryv3.Resource, n)
	for i := range names {
		names[i] = fmt.Sprintf("L%d", i)
		res[i] = wrapped(names[i], "v1", 0, lis(names[i], "a"))
	}
	h.watchAll(wholeWorldType, names...)
	items := func() int {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return cap(h.c.caches[resources.ListenerTypeURL].items)
	}
	// SotW: the buffer of a large response is kept for the next, as large.
	anys := make([]*anypb.Any, n)
	for i := range anys {
		anys[i] = lis(names[i], "a")
	}
	if err := h.sotw(resources.ListenerTypeURL, "1", anys...); err != nil {
		t.Fatal(err)
	}
	if got := items(); got < n {
		t.Fatalf("buffer of %d items after a SotW response of %d: not kept for the next", got, n)
	}
	// Then a response of one: the large buffer goes.
	if err := h.sotw(resources.ListenerTypeURL, "2"); err != nil {
		t.Fatal(err)
	}
	if got := items(); got > minItemsBuffer {
		t.Fatalf("buffer of %d items kept after a response of none", got)
	}
	// Delta: not kept after a large response.
	if err := h.delta(resources.ListenerTypeURL, nil, res...); err != nil {
		t.Fatal(err)
	}
	if got := items(); got > minItemsBuffer {
		t.Fatalf("buffer of %d items kept after a large delta response", got)
	}
}
