package httpxds

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// oneEndpointChange is a Transport with one host whose configuration
// routes to n clusters of m endpoints, fed in turn two snapshots that
// differ in one cluster's endpoints, the second made from the first as
// the config tree makes it (ClusterMap.With: every other ClusterConfig
// shared), as grpcxds's benchmark of the same name feeds a channel.
type oneEndpointChange struct {
	t     *Transport
	hs    []*hostWatch
	snaps []*watchers.Snapshot
}

// newOneEndpointChange makes the Transport, with hosts hosts routing to
// the same clusters (the Set then takes their union, and each host's
// change in turn).
func newOneEndpointChange(tb testing.TB, n, m, hosts int) *oneEndpointChange {
	tb.Helper()
	// A management server that is never dialled: the Transport's client
	// connects at its first watch, and the host here is fed by hand.
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: "bench"}))
	if err != nil {
		tb.Fatal(err)
	}
	t, err := NewTransport(TransportOptions{Bootstrap: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { t.Close() })
	var hs []*hostWatch
	t.mu.Lock()
	for i := range hosts {
		name := fmt.Sprintf("svc%d", i)
		h := &hostWatch{t: t, key: hostKey{name, name}, listener: name, first: make(chan struct{}), cancel: func() {}}
		t.hosts[h.key] = h
		hs = append(hs, h)
	}
	t.mu.Unlock()

	vh := &resources.VirtualHost{Name: "vh", Domains: []string{"*"}}
	ccs := make(map[string]*watchers.ClusterConfig, n)
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		vh.Routes = append(vh.Routes, &resources.Route{Action: resources.RouteActionRoute, Cluster: name})
		eps := make([]resources.Endpoint, m)
		for j := range eps {
			k := i*m + j
			eps[j] = resources.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d:80", k>>16&0xff, k>>8&0xff, k&0xff)}, Weight: 1}
		}
		ccs[name] = &watchers.ClusterConfig{
			Name:      name,
			Cluster:   &resources.Cluster{Name: name, Kind: resources.ClusterKindEDS, MaxRequests: 1024},
			Endpoints: &resources.Endpoints{Name: name, Localities: []resources.Locality{{Weight: 1, Endpoints: eps}}},
		}
	}
	a := &watchers.Snapshot{
		Listener:    &resources.Listener{Name: "svc"},
		RouteConfig: &resources.RouteConfig{Name: "rc", VirtualHosts: []*resources.VirtualHost{vh}},
		VirtualHost: vh,
		Clusters:    watchers.NewClusterMap(ccs),
	}
	c0 := *a.Clusters.Get("c0")
	eps := *c0.Endpoints
	eps.Localities = []resources.Locality{{Weight: 1, Endpoints: []resources.Endpoint{{Addresses: []string{"10.255.0.1:80"}, Weight: 1}}}}
	c0.Endpoints = &eps
	b := &watchers.Snapshot{Listener: a.Listener, RouteConfig: a.RouteConfig, VirtualHost: vh, Clusters: a.Clusters.With("c0", &c0)}
	o := &oneEndpointChange{t: t, hs: hs, snaps: []*watchers.Snapshot{a, b}}
	o.apply(0)
	return o
}

// apply hands each host the i'th snapshot, as their config trees do.
func (o *oneEndpointChange) apply(i int) {
	for _, h := range o.hs {
		h.Update(o.snaps[i%2])
	}
}

// BenchmarkOneEndpointChange measures what one EDS change costs the
// Transport at n clusters × m endpoints: the host's configuration, the
// cluster Set's update and the pickers published; with two hosts
// routing to the same clusters, both hosts' updates (the Set's union of
// their clusters).
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, c := range []struct{ n, m, hosts int }{{1000, 3, 1}, {10000, 3, 1}, {1000, 3, 2}, {10000, 3, 2}} {
		name := fmt.Sprintf("%dx%d", c.n, c.m)
		if c.hosts > 1 {
			name += fmt.Sprintf("-%dhosts", c.hosts)
		}
		b.Run(name, func(b *testing.B) {
			o := newOneEndpointChange(b, c.n, c.m, c.hosts)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				o.apply(i + 1)
			}
		})
	}
}

// One cluster's endpoints changing costs the Transport that cluster, not
// every cluster. Measured as the fastest of many updates (the least
// disturbed by a loaded machine) at 500 and at 10,000 clusters: work per
// cluster would make the second 20 times the first.
func TestOneEndpointChangeCostsOneCluster(t *testing.T) {
	fastest := func(n int) time.Duration {
		o := newOneEndpointChange(t, n, 1, 1)
		best := time.Duration(1 << 62)
		for i := range 40 {
			start := time.Now()
			o.apply(i + 1)
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := fastest(500), fastest(10000)
	t.Logf("one endpoint change: %v at 500 clusters, %v at 10,000", small, large)
	if large > 5*small+time.Millisecond {
		t.Errorf("one endpoint change: %v at 10,000 clusters, %v at 500; want the cost of the changed cluster, not of every cluster", large, small)
	}
}
