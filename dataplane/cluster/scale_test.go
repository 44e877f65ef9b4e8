package cluster

import (
	"testing"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// A leaf's per-host max_connections reaches its endpoints (gRFC A105); an
// endpoint two clusters list takes the larger setting, and a cluster that
// lowers or drops its own gives it back, the endpoint staying the same.
func TestClusterScalesEndpoints(t *testing.T) {
	h := &testHost{}
	s := NewSet(h, &testClock{}, Config{})
	h.set = s
	cluster := func(name string, perHost uint32) *watchers.ClusterConfig {
		return &watchers.ClusterConfig{
			Name: name,
			Cluster: &resources.Cluster{Name: name, Kind: resources.ClusterKindEDS, MaxRequests: 1024,
				MaxConnectionsPerHost: perHost, LBPolicy: resources.LBPolicy{Kind: resources.LBRoundRobin}},
			Endpoints: &resources.Endpoints{Name: name, Localities: []resources.Locality{{Weight: 1, Endpoints: []resources.Endpoint{
				{Addresses: []string{"a"}, Weight: 1, HealthStatus: resources.HealthStatusHealthy},
				{Addresses: []string{name}, Weight: 1, HealthStatus: resources.HealthStatusHealthy},
			}}}},
		}
	}
	update := func(clusters ...*watchers.ClusterConfig) {
		m, roots := map[string]*watchers.ClusterConfig{}, map[string]struct{}{}
		var routes []*resources.Route
		for _, c := range clusters {
			m[c.Name], roots[c.Name] = c, struct{}{}
			routes = append(routes, &resources.Route{Action: resources.RouteActionRoute, Cluster: c.Name})
		}
		snap := &watchers.Snapshot{VirtualHost: &resources.VirtualHost{Routes: routes}, Clusters: watchers.NewClusterMap(m)}
		h.Do(func() { s.Update(snap, roots) })
	}
	maxConns := func(key string) (uint32, *endpoint.Endpoint) {
		h.mu.Lock()
		defer h.mu.Unlock()
		ep := s.Pool().Lookup(key)
		if ep == nil {
			return 0, nil
		}
		return ep.MaxConns(), ep
	}
	update(cluster("c1", 3), cluster("c2", 2))
	a, ep := maxConns("a")
	_, c1 := maxConns("c1")
	if a != 3 || c1 == nil || c1.MaxConns() != 3 {
		t.Fatalf("c1 allows 3, c2 2: shared endpoint %d, c1's own %v; want 3 each", a, c1)
	}
	if n, _ := maxConns("c2"); n != 2 {
		t.Errorf("c2's own endpoint: %d, want 2", n)
	}
	update(cluster("c1", 0), cluster("c2", 2))
	if n, again := maxConns("a"); n != 2 || again != ep {
		t.Errorf("c1 unset: shared endpoint %d (same endpoint: %v), want 2, the same", n, again == ep)
	}
	if n, _ := maxConns("c1"); n != 1 {
		t.Errorf("c1 unset: its own endpoint %d, want 1", n)
	}
	update(cluster("c1", 0))
	if n, _ := maxConns("a"); n != 1 {
		t.Errorf("c2 gone: shared endpoint %d, want 1", n)
	}
	h.mu.Lock()
	d := s.Close()
	h.mu.Unlock()
	d.Run()
	s.StopWaking()
}
