package grpcxds

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/dataplane/rls"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// The clusters of RLS targets are the balancer's besides the routes', so
// an update keeping the virtual host takes the path that rebuilds only
// the changed clusters when they too are unchanged: a snapshot bringing a
// target's cluster builds it, a change of it rebuilds it, and the cluster
// of a target released goes unless a route names it.
func TestRLSTargetClustersAcrossUpdates(t *testing.T) {
	t.Parallel()
	vh := &resources.VirtualHost{Routes: []*resources.Route{{Action: resources.RouteActionRoute, Cluster: "plain"}}}
	snap := &watchers.Snapshot{VirtualHost: vh, Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{
		"plain": edsConfig("plain", "10.0.0.1:80"),
	})}
	cc := &recordingCC{live: make(map[string]bool)}
	b := newStuckBalancer(&cc.stuckCC, &manualClock{now: time.Unix(1000, 0)}, time.Minute)
	b.cc = cc
	defer b.Close()
	apply := func(snap *watchers.Snapshot) {
		t.Helper()
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(snap)}}); err != nil {
			t.Fatal(err)
		}
	}
	built := func(name string) []string {
		t.Helper()
		b.mu.Lock()
		_, ok := b.set.Info(name)
		b.mu.Unlock()
		if !ok {
			return nil
		}
		return addrsOf(b, name)
	}
	apply(snap)

	// The RLS policy holds T, which the snapshot does not
	// have yet; the next, same virtual host, brings it.
	release := b.addTarget("T")
	snap = &watchers.Snapshot{VirtualHost: vh, Clusters: snap.Clusters.With("T", edsConfig("T", "10.0.0.2:80"))}
	apply(snap)
	if got, want := built("T"), []string{"10.0.0.2:80"}; !slices.Equal(got, want) {
		t.Fatalf("target cluster T brought by the snapshot: endpoints %q, want %q", got, want)
	}
	// T's endpoints change.
	snap = &watchers.Snapshot{VirtualHost: vh, Clusters: snap.Clusters.With("T", edsConfig("T", "10.0.0.3:80"))}
	apply(snap)
	if got, want := built("T"), []string{"10.0.0.3:80"}; !slices.Equal(got, want) {
		t.Errorf("target cluster T after its endpoints changed: endpoints %q, want %q", got, want)
	}
	// A second hold on plain, a route's cluster: releasing it leaves
	// plain alone.
	releasePlain := b.addTarget("plain")
	releasePlain()
	if got, want := built("plain"), []string{"10.0.0.1:80"}; !slices.Equal(got, want) {
		t.Errorf("route cluster plain after its target left: endpoints %q, want %q", got, want)
	}
	// T released: it goes at once, and the snapshot that still has it
	// (the tree drops it on its next pass) does not bring it back.
	release()
	apply(&watchers.Snapshot{VirtualHost: vh, Clusters: snap.Clusters.With("plain", edsConfig("plain", "10.0.0.4:80"))})
	if got := built("T"); got != nil {
		t.Errorf("target cluster T after its release: endpoints %q, want none", got)
	}
	if got, want := built("plain"), []string{"10.0.0.4:80"}; !slices.Equal(got, want) {
		t.Errorf("route cluster plain: endpoints %q, want %q", got, want)
	}
	if got, want := cc.liveAddrs(), []string{"10.0.0.4:80"}; !slices.Equal(got, want) {
		t.Errorf("SubConns %q, want %q", got, want)
	}
}

// An update keeping the virtual host and route configuration keeps the
// RLS policies as they are: no map of pickers is made, no policy is given
// its configuration again. Before, each update of endpoints did both.
func TestRLSPluginsKeptAcrossUpdates(t *testing.T) {
	t.Parallel()
	a, err := testutils.RouteLookupClusterSpecifier(`{"grpcKeybuilders": [{"names": [{"service": "s"}]}],
		"lookupService": "dns:///localhost:1", "lookupServiceTimeout": "10s", "cacheSizeBytes": "1000"}`)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseRLSPlugin(a)
	if err != nil {
		t.Fatal(err)
	}
	vh := &resources.VirtualHost{Routes: []*resources.Route{
		{Action: resources.RouteActionRoute, ClusterSpecifierPlugin: "rls"},
		{Action: resources.RouteActionRoute, Cluster: "plain"},
	}}
	rc := &resources.RouteConfig{VirtualHosts: []*resources.VirtualHost{vh}, ClusterSpecifierPlugins: map[string]resources.ClusterSpecifierConfig{"rls": cfg}}
	snap := &watchers.Snapshot{RouteConfig: rc, VirtualHost: vh, Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{
		"plain": edsConfig("plain", "10.0.0.1:80"),
	})}
	cc := &recordingCC{live: make(map[string]bool)}
	b := newStuckBalancer(&cc.stuckCC, &manualClock{now: time.Unix(1000, 0)}, time.Minute)
	b.cc = cc
	defer b.Close()
	apply := func(snap *watchers.Snapshot) {
		t.Helper()
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(snap)}}); err != nil {
			t.Fatal(err)
		}
	}
	pickers := func() map[string]balancer.Picker {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.rls.pickers
	}
	policy := func() *rls.Policy {
		if p, ok := pickers()["rls"].(*rlsPicker); ok {
			return p.pol
		}
		return nil
	}
	apply(snap)
	before, pol := pickers(), policy()
	if pol == nil {
		t.Fatal("no RLS policy for the plugin the route names")
	}

	apply(&watchers.Snapshot{RouteConfig: rc, VirtualHost: vh, Clusters: snap.Clusters.With("plain", edsConfig("plain", "10.0.0.2:80"))})
	if after := pickers(); reflect.ValueOf(after).UnsafePointer() != reflect.ValueOf(before).UnsafePointer() {
		t.Error("an update of endpoints made the RLS pickers anew")
	}
	if policy() != pol {
		t.Error("an update of endpoints replaced the RLS policy")
	}
}
