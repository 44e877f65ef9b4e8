package watchers

import (
	"hash/maphash"
	"iter"
	"slices"
)

// ClusterMap is the immutable map of a Snapshot's clusters, by name. Its
// zero value is empty.
//
// It is not a Go map so that a change of one cluster, the usual update of a
// large tree (one cluster's endpoints), makes the next snapshot without
// copying the clusters that did not change: a new snapshot shares all but
// one shard of the previous one's. At 10,000 clusters, copying a Go map
// on every endpoint update cost more than the rest of the update, and the
// garbage it left drove the collector.
type ClusterMap struct {
	// shards hold the entries by the hash of their names; their number is
	// a power of two chosen when the map is built; nil for an empty shard.
	// A shard, once in a ClusterMap, is never modified: with copies it and
	// the shards slice. They are pointers so that Changes can tell a
	// shared shard by identity (Go maps cannot be compared).
	shards []*shard
	n      int
	seed   maphash.Seed // of the shard hash; shared by the versions of a map
}

// shard is one shard of a ClusterMap.
type shard struct{ m map[string]*ClusterConfig }

// entries returns the shard's entries; none for a nil shard.
func (s *shard) entries() map[string]*ClusterConfig {
	if s == nil {
		return nil
	}
	return s.m
}

// Shard sizing: about shardTarget entries a shard, at most maxShards
// shards, so that replacing one cluster copies some tens of entries and a
// few thousand shard pointers at the most.
const (
	shardTarget = 16
	maxShards   = 4096
)

// NewClusterMap returns a ClusterMap of the entries of m, which it does not
// keep. Useful to build snapshots by hand, in tests of code that consumes
// them.
func NewClusterMap(m map[string]*ClusterConfig) ClusterMap {
	if len(m) == 0 {
		return ClusterMap{}
	}
	k := 1
	for k < maxShards && k*shardTarget < len(m) {
		k *= 2
	}
	cm := ClusterMap{shards: make([]*shard, k), n: len(m), seed: maphash.MakeSeed()}
	for name, cc := range m {
		i := cm.shardOf(name)
		if cm.shards[i] == nil {
			cm.shards[i] = &shard{m: make(map[string]*ClusterConfig, shardTarget)}
		}
		cm.shards[i].m[name] = cc
	}
	return cm
}

// Get returns the named cluster, or nil if the map has none of that name.
func (m ClusterMap) Get(name string) *ClusterConfig {
	if m.n == 0 {
		return nil
	}
	return m.shards[m.shardOf(name)].entries()[name]
}

// Len returns the number of clusters.
func (m ClusterMap) Len() int { return m.n }

// All yields every cluster with its name, in no particular order.
func (m ClusterMap) All() iter.Seq2[string, *ClusterConfig] {
	return func(yield func(string, *ClusterConfig) bool) {
		for _, s := range m.shards {
			for name, cc := range s.entries() {
				if !yield(name, cc) {
					return
				}
			}
		}
	}
}

// Names returns the names of the clusters, sorted.
func (m ClusterMap) Names() []string {
	names := make([]string, 0, m.n)
	for name := range m.All() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// With returns m with name mapped to cc; m is not changed. The result
// shares every shard but name's with m, so that Changes between the two
// costs that shard. Useful to make the next snapshot of a test by hand,
// as the config tree makes it when one cluster changes.
func (m ClusterMap) With(name string, cc *ClusterConfig) ClusterMap { return m.with(name, cc) }

// Changes yields the name of every cluster whose *ClusterConfig is not the
// same pointer in m as in old: added, replaced, or gone from m (Get
// returns nil for those). A snapshot keeps the pointer of an unchanged
// ClusterConfig, so these are the clusters a consumer must look at again.
//
// The cost follows the change, not the map, when m was made from old
// (the config tree's next snapshot when only endpoints changed): shards
// the two share are skipped by identity, and only the entries of the
// others compared. Maps built separately are compared entry by entry.
func (m ClusterMap) Changes(old ClusterMap) iter.Seq[string] {
	return func(yield func(string) bool) {
		if len(m.shards) == len(old.shards) && m.seed == old.seed {
			for i, s := range m.shards {
				if o := old.shards[i]; o != s && !shardChanges(o.entries(), s.entries(), yield) {
					return
				}
			}
			return
		}
		for name, cc := range m.All() {
			if old.Get(name) != cc && !yield(name) {
				return
			}
		}
		for name := range old.All() {
			if m.Get(name) == nil && !yield(name) {
				return
			}
		}
	}
}

// shardChanges yields the names whose entries differ between shards o
// and s; false if yield asked to stop.
func shardChanges(o, s map[string]*ClusterConfig, yield func(string) bool) bool {
	for name, cc := range s {
		if prev, ok := o[name]; (!ok || prev != cc) && !yield(name) {
			return false
		}
	}
	for name := range o {
		if _, ok := s[name]; !ok && !yield(name) {
			return false
		}
	}
	return true
}

// with returns m with name mapped to cc. m is not changed; the result
// shares every shard but name's with it.
func (m ClusterMap) with(name string, cc *ClusterConfig) ClusterMap {
	if m.n == 0 {
		return NewClusterMap(map[string]*ClusterConfig{name: cc})
	}
	i := m.shardOf(name)
	n := m.n
	old := m.shards[i].entries()
	if _, ok := old[name]; !ok {
		n++
	}
	s := &shard{m: make(map[string]*ClusterConfig, len(old)+1)}
	for k, v := range old {
		s.m[k] = v
	}
	s.m[name] = cc
	out := ClusterMap{shards: slices.Clone(m.shards), n: n, seed: m.seed}
	out.shards[i] = s
	return out
}

// shardOf returns the index of name's shard.
func (m ClusterMap) shardOf(name string) int {
	return int(maphash.String(m.seed, name) & uint64(len(m.shards)-1))
}
