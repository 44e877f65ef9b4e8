package watchers_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/testutils"
)

// subsLog follows, through the management server's hooks, which names the
// client is subscribed to per type, and counts the requests that changed
// them.
type subsLog struct {
	mu      sync.Mutex
	current map[string]map[string]bool // type URL → names subscribed now
	ops     []subOp                    // every change, in order
	reqs    map[string]int             // requests per type
	changes map[string]int             // requests that changed the names, per type
	wake    chan struct{}
}

// subOp is one name subscribed (add) or unsubscribed.
type subOp struct {
	typeURL, name string
	add           bool
}

func newSubsLog() *subsLog {
	return &subsLog{
		current: make(map[string]map[string]bool),
		reqs:    make(map[string]int),
		changes: make(map[string]int),
		wake:    make(chan struct{}),
	}
}

// hooks sets the management server hooks that feed the log.
func (l *subsLog) hooks(opts testutils.ManagementServerOptions) testutils.ManagementServerOptions {
	opts.OnStreamRequest = func(_ int64, req *discoveryv3.DiscoveryRequest) error {
		l.record(req.GetTypeUrl(), req.GetResourceNames(), nil, true)
		return nil
	}
	opts.OnDeltaRequest = func(_ int64, req *discoveryv3.DeltaDiscoveryRequest) error {
		l.record(req.GetTypeUrl(), req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(), false)
		return nil
	}
	return opts
}

// record applies one request: for SotW names is the whole new set, for
// delta the names added, with removed the names dropped.
func (l *subsLog) record(typeURL string, names, removed []string, sotw bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.current[typeURL]
	if cur == nil {
		cur = make(map[string]bool)
		l.current[typeURL] = cur
	}
	l.reqs[typeURL]++
	changed := false
	if sotw {
		next := make(map[string]bool, len(names))
		for _, n := range names {
			next[n] = true
		}
		for n := range cur {
			if !next[n] {
				removed = append(removed, n)
			}
		}
		sort.Strings(removed)
	}
	for _, n := range names {
		if !cur[n] {
			cur[n] = true
			l.ops = append(l.ops, subOp{typeURL, n, true})
			changed = true
		}
	}
	for _, n := range removed {
		if cur[n] {
			delete(cur, n)
			l.ops = append(l.ops, subOp{typeURL, n, false})
			changed = true
		}
	}
	if changed {
		l.changes[typeURL]++
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// names returns the names of typeURL subscribed now, sorted.
func (l *subsLog) names(typeURL string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.current[typeURL]))
	for n := range l.current[typeURL] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// counts returns the requests of typeURL seen and those that changed its
// names.
func (l *subsLog) counts(typeURL string) (reqs, changes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reqs[typeURL], l.changes[typeURL]
}

// opIndex returns the position of the first op matching, -1 if none.
func (l *subsLog) opIndex(typeURL, name string, add bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Index(l.ops, subOp{typeURL, name, add})
}

// waitFor waits until cond holds of the names subscribed now.
func (l *subsLog) waitFor(t *testing.T, desc string, cond func(current map[string]map[string]bool) bool) {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		l.mu.Lock()
		ok := cond(l.current)
		wake := l.wake
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("server never saw %s; subscriptions: %v", desc, l.snapshotNames())
		}
	}
}

// waitNames waits until the names of typeURL subscribed are exactly want.
func (l *subsLog) waitNames(t *testing.T, typeURL string, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	l.waitFor(t, fmt.Sprintf("%s subscribed to exactly %v", shortType(typeURL), want), func(cur map[string]map[string]bool) bool {
		if len(cur[typeURL]) != len(want) {
			return false
		}
		for _, n := range want {
			if !cur[typeURL][n] {
				return false
			}
		}
		return true
	})
}

// waitSubscribed waits until every name of typeURL given is subscribed.
func (l *subsLog) waitSubscribed(t *testing.T, typeURL string, names ...string) {
	t.Helper()
	l.waitFor(t, fmt.Sprintf("%s subscriptions to %v", shortType(typeURL), names), func(cur map[string]map[string]bool) bool {
		for _, n := range names {
			if !cur[typeURL][n] {
				return false
			}
		}
		return true
	})
}

func (l *subsLog) snapshotNames() map[string][]string {
	out := make(map[string][]string)
	for _, typ := range allTypes {
		out[shortType(typ)] = l.names(typ)
	}
	return out
}

func shortType(typeURL string) string {
	return typeURL[strings.LastIndex(typeURL, ".")+1:]
}

// mark returns a position in the log of changes, for opsSince.
func (l *subsLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ops)
}

// opsSince returns the changes after mark, in order.
func (l *subsLog) opsSince(mark int) []subOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops[mark:])
}
