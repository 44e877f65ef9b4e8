package cluster

import (
	"hash/maphash"
	"maps"
	"slices"
)

// PickerMap is the immutable map of cluster pickers, by cluster name, that
// a route picker holds (Set.Pickers). Like watchers.ClusterMap it is sharded so that the
// next route picker shares every shard but those of the clusters whose
// picker changed: an endpoint that connects, or a failover, replaces one
// cluster's picker, and copying a Go map of every cluster for it made each
// such event cost O(clusters), O(clusters²) when every endpoint of a large
// configuration failed in turn. Its zero value is empty.
type PickerMap struct {
	// groups hold the shards, groupSize a group (fewer in a single
	// group), and the shards the pickers by the hash of the name; their
	// number k is a power of two. Two levels, so that a change copies a
	// few tens of pointers where one slice of thousands of shards made
	// every change allocate and copy tens of kilobytes at 100,000
	// clusters. A group or shard in a PickerMap is never modified.
	groups [][]map[string]Picker
	k      int
	n      int
	seed   maphash.Seed
}

// groupBits is log2 of the number of shards a group holds.
const groupBits = 6

// shard returns the i'th shard.
func (m PickerMap) shard(i int) map[string]Picker {
	return m.groups[i>>groupBits][i&(1<<groupBits-1)]
}

// newGroups returns the empty groups of k shards.
func newGroups(k int) [][]map[string]Picker {
	g := make([][]map[string]Picker, (k+1<<groupBits-1)>>groupBits)
	for i := range g {
		g[i] = make([]map[string]Picker, min(k, 1<<groupBits))
	}
	return g
}

// About pickerShardTarget pickers a shard, at most pickerMaxShards shards.
const (
	pickerShardTarget = 16
	pickerMaxShards   = 4096
)

// newPickerMap returns the map of the pickers of clusters.
func newPickerMap(clusters map[string]*Cluster) PickerMap {
	if len(clusters) == 0 {
		return PickerMap{}
	}
	k := 1
	for k < pickerMaxShards && k*pickerShardTarget < len(clusters) {
		k *= 2
	}
	m := PickerMap{groups: newGroups(k), k: k, n: len(clusters), seed: maphash.MakeSeed()}
	for name, cl := range clusters {
		i := m.shardOf(name)
		g, j := m.groups[i>>groupBits], i&(1<<groupBits-1)
		if g[j] == nil {
			g[j] = make(map[string]Picker, pickerShardTarget)
		}
		g[j][name] = cl.picker
	}
	return m
}

func (m PickerMap) shardOf(name string) int {
	return int(maphash.String(m.seed, name) & uint64(m.k-1))
}

// Get returns the picker of the named cluster, nil if none.
func (m PickerMap) Get(name string) Picker {
	if m.n == 0 {
		return nil
	}
	return m.shard(m.shardOf(name))[name]
}

// Len is the number of pickers.
func (m PickerMap) Len() int { return m.n }

// balanced reports whether m's shard count still suits n pickers: within
// a factor of four of the target size, so that a map grown or shrunk by
// updates is rebuilt rather than drifting.
func (m PickerMap) balanced(n int) bool {
	k := m.k
	if k == 0 {
		return n == 0
	}
	if n > 4*pickerShardTarget*k && k < pickerMaxShards {
		return false
	}
	return k == 1 || 4*n >= pickerShardTarget*k
}

// with returns m with the given changes: a picker set, or for a nil one
// the cluster removed. m is unchanged; the result copies the shard slice
// and each shard a change falls in, once.
func (m PickerMap) with(changes map[string]Picker) PickerMap {
	if m.k == 0 {
		m = PickerMap{groups: newGroups(1), k: 1, seed: maphash.MakeSeed()}
	}
	out := PickerMap{groups: slices.Clone(m.groups), k: m.k, n: m.n, seed: m.seed}
	copiedGroup := make(map[int]bool)
	copied := make(map[int]bool, len(changes))
	for name, p := range changes {
		i := out.shardOf(name)
		gi, j := i>>groupBits, i&(1<<groupBits-1)
		if !copiedGroup[gi] {
			copiedGroup[gi] = true
			out.groups[gi] = slices.Clone(out.groups[gi])
		}
		g := out.groups[gi]
		if !copied[i] {
			copied[i] = true
			s := maps.Clone(g[j]) // copies the map's memory: faster than inserting anew
			if s == nil {
				s = make(map[string]Picker, 1)
			}
			g[j] = s
		}
		_, had := g[j][name]
		switch {
		case p == nil && had:
			delete(g[j], name)
			out.n--
		case p != nil:
			g[j][name] = p
			if !had {
				out.n++
			}
		}
	}
	return out
}

// PickerMapOf returns the map of the given pickers, for a route picker
// made without a Set (tests, a host's own clusters).
func PickerMapOf(pickers map[string]Picker) PickerMap { return PickerMap{}.with(pickers) }
