package grpcxds

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// authoritiesOf lists the balancer's SubConns with an authority (gRFC
// A81), as "address authority", sorted.
func authoritiesOf(b *xdsBalancer) []string {
	var out []string
	b.authorities.Range(func(k, v any) bool {
		out = append(out, k.(*recordingSC).addr+" "+v.(string))
		return true
	})
	slices.Sort(out)
	return out
}

// hostnamed is edsConfig with a hostname for each address ("" for none).
func hostnamed(name string, addrHosts ...string) *watchers.ClusterConfig {
	c := edsConfig(name)
	for i := 0; i+1 < len(addrHosts); i += 2 {
		c.Endpoints.Localities[0].Endpoints = append(c.Endpoints.Localities[0].Endpoints,
			resources.Endpoint{Addresses: []string{addrHosts[i]}, Hostname: addrHosts[i+1], Weight: 1})
	}
	return c
}

// A SubConn has an authority exactly when its endpoint has a hostname,
// from its creation to its shutdown. One address listed by two clusters
// under two hostnames is two endpoints, each with its own SubConn and
// authority; listed under no hostname, it stays apart from both.
func TestAuthoritiesFollowSubConns(t *testing.T) {
	t.Parallel()
	vh := &resources.VirtualHost{Routes: []*resources.Route{
		{Action: resources.RouteActionRoute, Cluster: "A", AutoHostRewrite: true},
		{Action: resources.RouteActionRoute, Cluster: "B"},
	}}
	cc := &recordingCC{live: make(map[string]bool)}
	b := newStuckBalancer(&cc.stuckCC, &manualClock{now: time.Unix(1000, 0)}, time.Minute)
	b.cc = cc
	defer b.Close()
	apply := func(vh *resources.VirtualHost, clusters map[string]*watchers.ClusterConfig) {
		t.Helper()
		snap := &watchers.Snapshot{VirtualHost: vh, Clusters: watchers.NewClusterMap(clusters)}
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Attributes: withSnapshot(snap)}}); err != nil {
			t.Fatal(err)
		}
	}
	apply(vh, map[string]*watchers.ClusterConfig{
		"A": hostnamed("A", "10.0.0.1:80", "a.example", "10.0.0.2:80", ""),
		"B": hostnamed("B", "10.0.0.1:80", "b.example", "10.0.0.2:80", "b2.example", "10.0.0.3:80", ""),
	})
	want := []string{"10.0.0.1:80 a.example", "10.0.0.1:80 b.example", "10.0.0.2:80 b2.example"}
	if got := authoritiesOf(b); !slices.Equal(got, want) {
		t.Fatalf("authorities %q, want %q", got, want)
	}
	b.mu.Lock()
	n := b.set.Pool().Len()
	b.mu.Unlock()
	if n != 5 {
		t.Errorf("%d endpoints in the pool; want 5 (10.0.0.1 twice, 10.0.0.2 twice, 10.0.0.3)", n)
	}

	// B is gone, and A's endpoint changes its hostname: the SubConns shut
	// down leave no authority behind.
	apply(&resources.VirtualHost{Routes: vh.Routes[:1]}, map[string]*watchers.ClusterConfig{"A": hostnamed("A", "10.0.0.1:80", "new.example")})
	want = []string{"10.0.0.1:80 new.example"}
	if got := authoritiesOf(b); !slices.Equal(got, want) {
		t.Fatalf("after the update: authorities %q, want %q", got, want)
	}
}
