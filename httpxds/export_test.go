package httpxds

import "github.com/goxds/xds/watchers"

// OnHostApplied makes f hear of each configuration a host of t takes (s),
// or the error its requests fail with (err), once the next request routes
// by it: the event tests wait on instead of polling with requests. Set it
// before the first request.
func OnHostApplied(t *Transport, f func(host, authority string, s *watchers.Snapshot, err error)) {
	t.mu.Lock()
	t.applied = f
	t.mu.Unlock()
}
