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
	// a power of two chosen when the map is built. A shard, once in a
	// ClusterMap, is never modified: with copies it and the shards slice.
	shards []map[string]*ClusterConfig
	n      int
	seed   maphash.Seed // of the shard hash; shared by the versions of a map
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
	cm := ClusterMap{shards: make([]map[string]*ClusterConfig, k), n: len(m), seed: maphash.MakeSeed()}
	for name, cc := range m {
		i := cm.shardOf(name)
		if cm.shards[i] == nil {
			cm.shards[i] = make(map[string]*ClusterConfig, shardTarget)
		}
		cm.shards[i][name] = cc
	}
	return cm
}

// Get returns the named cluster, or nil if the map has none of that name.
func (m ClusterMap) Get(name string) *ClusterConfig {
	if m.n == 0 {
		return nil
	}
	return m.shards[m.shardOf(name)][name]
}

// Len returns the number of clusters.
func (m ClusterMap) Len() int { return m.n }

// All yields every cluster with its name, in no particular order.
func (m ClusterMap) All() iter.Seq2[string, *ClusterConfig] {
	return func(yield func(string, *ClusterConfig) bool) {
		for _, s := range m.shards {
			for name, cc := range s {
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

// with returns m with name mapped to cc. m is not changed; the result
// shares every shard but name's with it.
func (m ClusterMap) with(name string, cc *ClusterConfig) ClusterMap {
	if m.n == 0 {
		return NewClusterMap(map[string]*ClusterConfig{name: cc})
	}
	i := m.shardOf(name)
	n := m.n
	if _, ok := m.shards[i][name]; !ok {
		n++
	}
	shard := make(map[string]*ClusterConfig, len(m.shards[i]))
	for k, v := range m.shards[i] {
		shard[k] = v
	}
	shard[name] = cc
	out := ClusterMap{shards: slices.Clone(m.shards), n: n, seed: m.seed}
	out.shards[i] = shard
	return out
}

// shardOf returns the index of name's shard.
func (m ClusterMap) shardOf(name string) int {
	return int(maphash.String(m.seed, name) & uint64(len(m.shards)-1))
}
