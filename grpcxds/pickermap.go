package grpcxds

import (
	"hash/maphash"
	"maps"
)

// pickerMap is the immutable map of cluster pickers, by cluster name, that
// a routePicker holds. Like watchers.ClusterMap it is sharded so that the
// next route picker shares every shard but those of the clusters whose
// picker changed: an endpoint that connects, or a failover, replaces one
// cluster's picker, and copying a Go map of every cluster for it made each
// such event cost O(clusters), O(clusters²) when every endpoint of a large
// configuration failed in turn. Its zero value is empty.
type pickerMap struct {
	// shards hold the pickers by the hash of the name; their number is a
	// power of two. A shard in a pickerMap is never modified.
	shards []map[string]clusterPicker
	n      int
	seed   maphash.Seed
}

// About pickerShardTarget pickers a shard, at most pickerMaxShards shards.
const (
	pickerShardTarget = 16
	pickerMaxShards   = 4096
)

// newPickerMap returns the map of the pickers of clusters.
func newPickerMap(clusters map[string]*clusterLB) pickerMap {
	if len(clusters) == 0 {
		return pickerMap{}
	}
	k := 1
	for k < pickerMaxShards && k*pickerShardTarget < len(clusters) {
		k *= 2
	}
	m := pickerMap{shards: make([]map[string]clusterPicker, k), n: len(clusters), seed: maphash.MakeSeed()}
	for name, cl := range clusters {
		i := m.shardOf(name)
		if m.shards[i] == nil {
			m.shards[i] = make(map[string]clusterPicker, pickerShardTarget)
		}
		m.shards[i][name] = cl.picker
	}
	return m
}

func (m pickerMap) shardOf(name string) int {
	return int(maphash.String(m.seed, name) & uint64(len(m.shards)-1))
}

// get returns the picker of the named cluster, nil if none.
func (m pickerMap) get(name string) clusterPicker {
	if m.n == 0 {
		return nil
	}
	return m.shards[m.shardOf(name)][name]
}

// len is the number of pickers.
func (m pickerMap) len() int { return m.n }

// balanced reports whether m's shard count still suits n pickers: within
// a factor of four of the target size, so that a map grown or shrunk by
// updates is rebuilt rather than drifting.
func (m pickerMap) balanced(n int) bool {
	k := len(m.shards)
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
func (m pickerMap) with(changes map[string]clusterPicker) pickerMap {
	if len(m.shards) == 0 {
		m = pickerMap{shards: make([]map[string]clusterPicker, 1), seed: maphash.MakeSeed()}
	}
	out := pickerMap{shards: make([]map[string]clusterPicker, len(m.shards)), n: m.n, seed: m.seed}
	copy(out.shards, m.shards)
	copied := make(map[int]bool, len(changes))
	for name, p := range changes {
		i := out.shardOf(name)
		if !copied[i] {
			copied[i] = true
			s := maps.Clone(out.shards[i]) // copies the map's memory: faster than inserting anew
			if s == nil {
				s = make(map[string]clusterPicker, 1)
			}
			out.shards[i] = s
		}
		_, had := out.shards[i][name]
		switch {
		case p == nil && had:
			delete(out.shards[i], name)
			out.n--
		case p != nil:
			out.shards[i][name] = p
			if !had {
				out.n++
			}
		}
	}
	return out
}
