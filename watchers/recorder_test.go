package watchers_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// event is one call the tree made to its TreeWatcher.
type event struct {
	snap   *watchers.Snapshot
	resErr error
	ambErr error
}

func (ev event) String() string {
	switch {
	case ev.snap != nil:
		return "Update(" + describe(ev.snap) + ")"
	case ev.resErr != nil:
		return "ResourceError(" + ev.resErr.Error() + ")"
	default:
		return "AmbientError(" + ev.ambErr.Error() + ")"
	}
}

// recorder is a TreeWatcher that records every call, checks that calls
// never overlap and that every snapshot is consistent, and lets a test wait
// for calls in order.
type recorder struct {
	t       *testing.T
	running atomic.Int32

	mu     sync.Mutex
	events []event
	read   int           // events consumed by next
	wake   chan struct{} // closed and replaced on each event
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, wake: make(chan struct{})}
}

func (r *recorder) add(ev event) {
	if r.running.Add(1) != 1 {
		r.t.Errorf("TreeWatcher called concurrently (%v)", ev)
	}
	defer r.running.Add(-1)
	if ev.snap != nil {
		checkConsistent(r.t, ev.snap)
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) Update(s *watchers.Snapshot) { r.add(event{snap: s}) }
func (r *recorder) ResourceError(err error)     { r.add(event{resErr: err}) }
func (r *recorder) AmbientError(err error)      { r.add(event{ambErr: err}) }

// next waits for the next event not yet consumed.
func (r *recorder) next() event {
	r.t.Helper()
	deadline := time.After(testTimeout)
	for {
		r.mu.Lock()
		if r.read < len(r.events) {
			ev := r.events[r.read]
			r.read++
			r.mu.Unlock()
			return ev
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-deadline:
			r.t.Fatalf("no event from the tree within %v; so far: %v", testTimeout, r.all())
		}
	}
}

// nextUpdate waits for the next event and fails unless it is an Update.
func (r *recorder) nextUpdate() *watchers.Snapshot {
	r.t.Helper()
	ev := r.next()
	if ev.snap == nil {
		r.t.Fatalf("got %v, want an Update", ev)
	}
	return ev.snap
}

// nextResourceError waits for the next event and fails unless it is a
// ResourceError.
func (r *recorder) nextResourceError() error {
	r.t.Helper()
	ev := r.next()
	if ev.resErr == nil {
		r.t.Fatalf("got %v, want a ResourceError", ev)
	}
	return ev.resErr
}

// waitUpdate consumes events until an Update satisfying ok, skipping
// other Updates and AmbientErrors and failing on a ResourceError.
func (r *recorder) waitUpdate(desc string, ok func(*watchers.Snapshot) bool) *watchers.Snapshot {
	r.t.Helper()
	for {
		ev := r.next()
		switch {
		case ev.resErr != nil:
			r.t.Fatalf("waiting for %s, got %v", desc, ev)
		case ev.snap != nil && ok(ev.snap):
			return ev.snap
		}
	}
}

// noMore fails if events arrived that were not consumed. Call it after a
// barrier.
func (r *recorder) noMore() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read < len(r.events) {
		r.t.Fatalf("unexpected events: %v", r.events[r.read:])
	}
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// checkConsistent checks what every snapshot must satisfy: the parts are
// there, every cluster a route names has an entry, every entry is either
// usable or says why not, and every leaf of an aggregate has an entry.
func checkConsistent(t *testing.T, s *watchers.Snapshot) {
	t.Helper()
	if s.Listener == nil || s.RouteConfig == nil || s.VirtualHost == nil {
		t.Errorf("snapshot without listener, route config or virtual host: %+v", s)
		return
	}
	for _, rt := range s.VirtualHost.Routes {
		for _, name := range rt.ClusterNames() {
			if s.Clusters.Get(name) == nil {
				t.Errorf("route cluster %q missing from the snapshot %s", name, describe(s))
			}
		}
	}
	for name, cc := range s.Clusters.All() {
		if cc.Name != name {
			t.Errorf("Clusters[%q].Name = %q", name, cc.Name)
		}
		if cc.Err != nil {
			continue
		}
		if cc.Cluster == nil {
			t.Errorf("cluster %q: no Cluster and no Err", name)
			continue
		}
		switch cc.Cluster.Kind {
		case resources.ClusterKindEDS:
			if cc.Endpoints == nil {
				t.Errorf("EDS cluster %q: no Endpoints and no Err", name)
			}
		case resources.ClusterKindLogicalDNS:
			if cc.DNSAddress == "" {
				t.Errorf("LOGICAL_DNS cluster %q: no DNSAddress and no Err", name)
			}
		case resources.ClusterKindAggregate:
			if len(cc.Leaves) == 0 {
				t.Errorf("aggregate cluster %q: no Leaves and no Err", name)
			}
			for _, l := range cc.Leaves {
				if s.Clusters.Get(l) == nil {
					t.Errorf("leaf %q of %q missing from the snapshot", l, name)
				}
			}
		}
	}
}

// describe renders a snapshot compactly and deterministically, e.g.
// "L/R a:eds(a)[127.0.0.1:1] b:err(...)".
func describe(s *watchers.Snapshot) string {
	var b strings.Builder
	b.WriteString(s.Listener.Name + "/" + s.RouteConfig.Name)
	names := make([]string, 0, s.Clusters.Len())
	for n := range s.Clusters.All() {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString(" " + describeCluster(s.Clusters.Get(n)))
	}
	return b.String()
}

func describeCluster(cc *watchers.ClusterConfig) string {
	switch {
	case cc.Err != nil:
		return cc.Name + ":err"
	case cc.Cluster.Kind == resources.ClusterKindEDS:
		var addrs []string
		for _, l := range cc.Endpoints.Localities {
			for _, ep := range l.Endpoints {
				addrs = append(addrs, ep.Addresses...)
			}
		}
		return fmt.Sprintf("%s:eds(%s)%v", cc.Name, cc.Endpoints.Name, addrs)
	case cc.Cluster.Kind == resources.ClusterKindLogicalDNS:
		return cc.Name + ":dns(" + cc.DNSAddress + ")"
	default:
		return cc.Name + ":agg" + fmt.Sprint(cc.Leaves)
	}
}

// clusterNames returns the sorted keys of s.Clusters.
func clusterNames(s *watchers.Snapshot) []string {
	out := make([]string, 0, s.Clusters.Len())
	for n := range s.Clusters.All() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
