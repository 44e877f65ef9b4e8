package watchers

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// A ClusterMap holds what it was built of at every size, and with never
// changes the map it is called on: a snapshot already delivered stays as
// it was, while the new one shares every untouched shard.
func TestClusterMap(t *testing.T) {
	for _, n := range []int{0, 1, 2, 17, 1000, 70000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			want := make(map[string]*ClusterConfig, n)
			for i := range n {
				name := fmt.Sprintf("cluster-%d", i)
				want[name] = &ClusterConfig{Name: name}
			}
			m := NewClusterMap(want)
			checkClusterMap(t, m, want)
			if len(m.shards) > maxShards || (n > 0 && n/len(m.shards) > 2*shardTarget) {
				t.Errorf("%d clusters in %d shards", n, len(m.shards))
			}
			if m.Get("absent") != nil {
				t.Error(`Get("absent") found something`)
			}

			// Replace one, then add one: m is untouched.
			before := maps.Clone(want)
			next := m
			if n > 0 {
				repl := &ClusterConfig{Name: "cluster-0", DNSAddress: "replaced:1"}
				next = m.with("cluster-0", repl)
				want["cluster-0"] = repl
				shared := 0
				for i := range m.shards {
					if len(m.shards[i].entries()) > 0 && m.shards[i] == next.shards[i] {
						shared++
					}
				}
				if nonEmpty := countNonEmpty(m); shared != nonEmpty-1 {
					t.Errorf("the patched map shares %d of %d shards, want all but one", shared, nonEmpty)
				}
			}
			added := &ClusterConfig{Name: "added"}
			next = next.with("added", added)
			want["added"] = added
			checkClusterMap(t, m, before)
			checkClusterMap(t, next, want)
		})
	}
}

func countNonEmpty(m ClusterMap) int {
	k := 0
	for _, s := range m.shards {
		if len(s.entries()) > 0 {
			k++
		}
	}
	return k
}

func checkClusterMap(t *testing.T, m ClusterMap, want map[string]*ClusterConfig) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", m.Len(), len(want))
	}
	for name, cc := range want {
		if got := m.Get(name); got != cc {
			t.Fatalf("Get(%q) = %+v, want %+v", name, got, cc)
		}
	}
	got := make(map[string]*ClusterConfig)
	for name, cc := range m.All() {
		if _, dup := got[name]; dup {
			t.Fatalf("All yields %q twice", name)
		}
		got[name] = cc
	}
	if !maps.Equal(got, want) {
		t.Fatalf("All yields %d clusters, want %d", len(got), len(want))
	}
	if names, wantNames := m.Names(), slices.Sorted(maps.Keys(want)); !slices.Equal(names, wantNames) {
		t.Fatalf("Names() = %d names, want the %d keys, sorted", len(names), len(wantNames))
	}
	// A yield that returns false is the last.
	calls := 0
	m.All()(func(string, *ClusterConfig) bool { calls++; return false })
	if want := min(1, m.Len()); calls != want {
		t.Fatalf("All called yield %d times after it returned false, want %d", calls, want)
	}
}

// Changes names exactly the clusters whose ClusterConfig pointer differs,
// whether the new map was made from the old (shared shards) or built on
// its own (a pass of the tree), in both directions.
func TestClusterMapChanges(t *testing.T) {
	for _, n := range []int{0, 1, 17, 1000, 70000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			base := make(map[string]*ClusterConfig, n)
			for i := range n {
				name := fmt.Sprintf("cluster-%d", i)
				base[name] = &ClusterConfig{Name: name}
			}
			m := NewClusterMap(base)
			changes := func(next, old ClusterMap) []string {
				return slices.Sorted(next.Changes(old))
			}
			if got := changes(m, m); len(got) != 0 {
				t.Errorf("a map against itself: %q, want none", got)
			}
			// Made from m: one replaced, one added.
			next := m.With("added", &ClusterConfig{Name: "added"})
			want := []string{"added"}
			if n > 0 {
				next = next.With("cluster-0", &ClusterConfig{Name: "cluster-0", DNSAddress: "x:1"})
				want = []string{"added", "cluster-0"}
			}
			if got := changes(next, m); !slices.Equal(got, want) {
				t.Errorf("made with With: %q, want %q", got, want)
			}
			if got := changes(m, next); !slices.Equal(got, want) {
				t.Errorf("backwards (the added one gone): %q, want %q", got, want)
			}
			// Built on its own, as a pass of the tree builds it: every
			// unchanged pointer kept, one cluster gone, one replaced, one
			// added.
			rebuilt := maps.Clone(base)
			want = []string{"new"}
			rebuilt["new"] = &ClusterConfig{Name: "new"}
			if n > 1 {
				delete(rebuilt, "cluster-1")
				rebuilt["cluster-0"] = &ClusterConfig{Name: "cluster-0", DNSAddress: "y:1"}
				want = []string{"cluster-0", "cluster-1", "new"}
			}
			if got := changes(NewClusterMap(rebuilt), m); !slices.Equal(got, want) {
				t.Errorf("built anew: %q, want %q", got, want)
			}
			if got := changes(NewClusterMap(base), m); len(got) != 0 {
				t.Errorf("the same entries built anew: %q, want none", got)
			}
			if got := changes(ClusterMap{}, m); len(got) != n {
				t.Errorf("the empty map against m: %d names, want %d", len(got), n)
			}
			// A yield that returns false is the last.
			calls := 0
			NewClusterMap(rebuilt).Changes(m)(func(string) bool { calls++; return false })
			if calls != 1 {
				t.Errorf("Changes called yield %d times after it returned false, want 1", calls)
			}
		})
	}
}

// BenchmarkClusterMapChanges measures finding the one cluster that changed
// between a map and the next version made from it with With, as for one
// endpoint update of the tree: the cost of one shard, however large the
// map.
func BenchmarkClusterMapChanges(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			m := make(map[string]*ClusterConfig, n)
			for i := range n {
				name := fmt.Sprintf("cluster-%d", i)
				m[name] = &ClusterConfig{Name: name}
			}
			old := NewClusterMap(m)
			next := old.With("cluster-7", &ClusterConfig{Name: "cluster-7", DNSAddress: "x:1"})
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				k := 0
				for range next.Changes(old) {
					k++
				}
				if k != 1 {
					b.Fatalf("%d changes, want 1", k)
				}
			}
		})
	}
}
