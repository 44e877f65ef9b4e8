package watchers

import "github.com/goxds/xds/client"

// WatchConfigTreeCounting is WatchConfigTree that also returns how many
// clusters the tree's passes have walked so far, so that tests can tell an
// update that walked the tree from one that did not.
func WatchConfigTreeCounting(c *client.Client, listenerName string, opts TreeOptions, w TreeWatcher) (cancel func(), walked func() int) {
	t := watchConfigTree(c, listenerName, opts, w)
	return t.cancel, func() int {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.walked
	}
}
