package transport

import (
	"slices"
	"testing"
)

// The sorted names a SotW request carries are kept between requests and
// follow every change of the wanted names, including one that keeps their
// number; a list handed out is never modified.
func TestSortedNamesFollowChanges(t *testing.T) {
	ts := newTypeState("type.googleapis.com/envoy.config.cluster.v3.Cluster")
	if got := ts.sortedNamesLocked(); got != nil {
		t.Fatalf("no names: got %q, want nil", got)
	}
	ts.updateLocked([]string{"c", "a", "b"}, nil)
	first := ts.sortedNamesLocked()
	if !slices.Equal(first, []string{"a", "b", "c"}) {
		t.Fatalf("got %q, want [a b c]", first)
	}
	if again := ts.sortedNamesLocked(); &again[0] != &first[0] {
		t.Errorf("unchanged names were sorted again")
	}
	ts.updateLocked([]string{"d"}, []string{"b"}) // same number of names
	second := ts.sortedNamesLocked()
	if !slices.Equal(second, []string{"a", "c", "d"}) {
		t.Fatalf("after replacing b by d: got %q, want [a c d]", second)
	}
	if !slices.Equal(first, []string{"a", "b", "c"}) {
		t.Errorf("the list of an earlier request changed to %q", first)
	}
	ts.updateLocked([]string{"e"}, nil)
	if got := ts.sortedNamesLocked(); !slices.Equal(got, []string{"a", "c", "d", "e"}) {
		t.Fatalf("after adding e: got %q", got)
	}
	ts.updateLocked(nil, []string{"a", "c", "d", "e"})
	if got := ts.sortedNamesLocked(); got != nil {
		t.Fatalf("after removing everything: got %q, want nil", got)
	}
}
