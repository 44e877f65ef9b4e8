package client

import (
	"slices"
	"testing"
)

// The set holds one watcher inline and moves to a map for a second, and
// back when one is left: every step must keep the members exactly.
func TestWatcherSet(t *testing.T) {
	a, b, c := new(watcher), new(watcher), new(watcher)
	var s watcherSet
	check := func(step string, want ...*watcher) {
		t.Helper()
		got := s.appendTo(nil)
		if len(got) != len(want) || s.len() != len(want) {
			t.Fatalf("%s: members %v (len %d), want %v", step, got, s.len(), want)
		}
		for _, w := range want {
			if !slices.Contains(got, w) || !s.has(w) {
				t.Fatalf("%s: %p missing from %v", step, w, got)
			}
		}
	}
	check("empty")
	if s.has(nil) || s.remove(a) || s.remove(nil) {
		t.Fatal("an empty set has a member")
	}
	s.add(a)
	s.add(a)
	check("one, added twice", a)
	if s.remove(b) {
		t.Fatal("removed a non-member")
	}
	s.add(b)
	s.add(c)
	check("three", a, b, c)
	if !s.remove(b) || s.remove(b) {
		t.Fatal("remove of a member once: want true, then false")
	}
	check("two", a, c)
	if !s.remove(a) {
		t.Fatal("remove a")
	}
	check("back to one", c)
	if s.many != nil {
		t.Fatal("one member left in a map")
	}
	s.add(a)
	check("two again", a, c)
	if !s.remove(a) || !s.remove(c) {
		t.Fatal("remove both")
	}
	check("empty again")
}
