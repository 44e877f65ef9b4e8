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
					if len(m.shards[i]) > 0 && len(next.shards[i]) > 0 && &m.shards[i] != &next.shards[i] &&
						fmt.Sprintf("%p", m.shards[i]) == fmt.Sprintf("%p", next.shards[i]) {
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
		if len(s) > 0 {
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
