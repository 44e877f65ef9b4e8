package watchers_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
	"github.com/goxds/xds/watchers"
)

// The benchmarks follow a tree of 10,000 EDS clusters (one route each, 3
// endpoints each) through a real client whose transport is the benchmark:
// it answers each subscription with the response a server would send, with
// no network in between. docs/PERFORMANCE.md has figures; the load harness
// (example/loadtest) measures the same over gRPC against go-control-plane.

const benchTreeClusters = 10_000

// BenchmarkTreeResolve10k: from WatchConfigTree to the first complete
// snapshot of 10,000 clusters: four responses, 20,000 resources decoded.
func BenchmarkTreeResolve10k(b *testing.B) {
	benchTreePhase(b, func(bt *benchTree) func() { return bt.resolve }, true)
}

// BenchmarkTreeClustersToEndpoints10k: the CDS response of 10,000 clusters
// to the tree's subscription to their endpoints handed to the transport:
// what the server waits for between sending the clusters and receiving the
// request for their endpoints, the transport's own work aside.
func BenchmarkTreeClustersToEndpoints10k(b *testing.B) {
	benchTreePhase(b, func(bt *benchTree) func() {
		names := bt.upToClusters()
		return func() { bt.clustersToEndpoints(names) }
	}, false)
}

// BenchmarkTreeRouteToClusters10k: the route configuration naming 10,000
// clusters to the tree's subscription to them handed to the transport: what
// the server waits for between sending the routes and receiving the request
// for their clusters, the transport's own work aside.
func BenchmarkTreeRouteToClusters10k(b *testing.B) {
	benchTreePhase(b, func(bt *benchTree) func() {
		bt.upToRoute()
		return func() { bt.routeToClusters() }
	}, false)
}

// benchTreePhase times, over SotW and delta, one phase of a new tree of
// 10,000 clusters: prepare brings the tree to the phase's start and returns
// the phase, which is timed (wall and CPU). withSetup times the making of
// the tree and prepare too.
func benchTreePhase(b *testing.B, prepare func(*benchTree) func(), withSetup bool) {
	for _, api := range []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC} {
		b.Run(api.String(), func(b *testing.B) {
			w := newBenchWorld(benchTreeClusters)
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			for range b.N {
				if !withSetup {
					b.StopTimer()
				}
				setupStart := cpuTime()
				bt := newBenchTree(b, api, w)
				phase := prepare(bt)
				b.StartTimer()
				start := cpuTime()
				if withSetup {
					start = setupStart
				}
				phase()
				cpu += cpuTime() - start
				b.StopTimer()
				bt.close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkTreeEndpointsUpdate10k: one cluster's endpoints change in a
// resolved tree of 10,000 clusters, until the new snapshot is delivered.
// Delta: the response carries that one ClusterLoadAssignment. SotW: it
// carries all 10,000, 9,999 of them unchanged.
func BenchmarkTreeEndpointsUpdate10k(b *testing.B) {
	for _, api := range []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC} {
		b.Run(api.String(), func(b *testing.B) {
			w := newBenchWorld(benchTreeClusters)
			bt := newBenchTree(b, api, w)
			defer bt.close()
			bt.resolve()
			// Two versions of the endpoints of the clusters the rounds
			// change, made beforehand.
			rounds := min(b.N, benchTreeClusters)
			var changed [2][]*anypb.Any
			for i := range rounds {
				changed[0] = append(changed[0], benchCLA(i, 9000))
				changed[1] = append(changed[1], w.endpoints[i])
			}
			eds := append([]*anypb.Any(nil), w.endpoints...)
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime()
			defer func() {
				b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
			}()
			for i := range b.N {
				k := i % rounds
				a := changed[(i/rounds)%2][k]
				if api == bootstrap.APITypeAggregatedDeltaGRPC {
					bt.apply(&transport.Response{TypeURL: edsURL, Delta: true, Nonce: fmt.Sprint(i),
						DeltaResources: []*discoveryv3.Resource{{Name: benchCluster(k), Version: fmt.Sprint(i), Resource: a}}})
				} else {
					eds[k] = a
					bt.apply(&transport.Response{TypeURL: edsURL, Version: fmt.Sprint(i + 2), Nonce: fmt.Sprint(i), Resources: eds})
				}
				s := bt.next()
				if got := s.Clusters.Get(benchCluster(k)).Endpoints.Raw(); !proto.Equal(got, mustUnmarshalCLA(a)) {
					b.Fatalf("round %d: cluster %d has endpoints %v", i, k, got)
				}
			}
		})
	}
}

// BenchmarkTreeClusterUpdate10k: one cluster changes (its connect
// timeout: same kind, same endpoints) in a resolved tree of 10,000
// clusters, until the new snapshot is delivered. Delta: the response
// carries that one Cluster. SotW: it carries all 10,000, 9,999 of them
// unchanged.
func BenchmarkTreeClusterUpdate10k(b *testing.B) {
	for _, api := range []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC} {
		b.Run(api.String(), func(b *testing.B) {
			w := newBenchWorld(benchTreeClusters)
			bt := newBenchTree(b, api, w)
			defer bt.close()
			bt.resolve()
			rounds := min(b.N, benchTreeClusters)
			var changed [2][]*anypb.Any
			for i := range rounds {
				c := testutils.Cluster(benchCluster(i), "")
				c.ConnectTimeout = durationpb.New(7 * time.Second)
				changed[0] = append(changed[0], testutils.MarshalAny(c))
				changed[1] = append(changed[1], w.clusters[i])
			}
			cds := append([]*anypb.Any(nil), w.clusters...)
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime()
			for i := range b.N {
				k := i % rounds
				a := changed[(i/rounds)%2][k]
				if api == bootstrap.APITypeAggregatedDeltaGRPC {
					bt.apply(&transport.Response{TypeURL: cdsURL, Delta: true, Nonce: fmt.Sprint(i),
						DeltaResources: []*discoveryv3.Resource{{Name: benchCluster(k), Version: fmt.Sprint(i + 2), Resource: a}}})
				} else {
					cds[k] = a
					bt.apply(&transport.Response{TypeURL: cdsURL, Version: fmt.Sprint(i + 2), Nonce: fmt.Sprint(i), Resources: cds})
				}
				if s := bt.next(); s.Clusters.Len() != benchTreeClusters {
					b.Fatalf("round %d: %d clusters, want %d", i, s.Clusters.Len(), benchTreeClusters)
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkTreeRouteChange10k: the route configuration of a resolved tree
// of 10,000 clusters changes until the new snapshot is delivered, the
// client's decoding of the 10,000 routes included. same-clusters: every
// route's path changes, the routes still name the same clusters.
// one-cluster-less: the last route comes and goes, a change of the tree's
// shape (the cluster it names stays in the client's cache).
func BenchmarkTreeRouteChange10k(b *testing.B) {
	n := benchTreeClusters
	for _, c := range []struct {
		name  string
		other *anypb.Any
		len   int
	}{
		{"same-clusters", benchRoutes(n, "/v2-"), n},
		{"one-cluster-less", benchRoutes(n-1, "/svc-"), n - 1},
	} {
		for _, api := range []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC} {
			b.Run(c.name+"/"+api.String(), func(b *testing.B) {
				w := newBenchWorld(n)
				bt := newBenchTree(b, api, w)
				defer bt.close()
				bt.resolve()
				if c.len < n {
					// Other watchers keep the dropped cluster and its
					// endpoints in the client's cache, so that the tree
					// finds them there when the route comes back: this
					// harness answers no subscription once resolved.
					last := benchCluster(n - 1)
					defer client.Watch(bt.c, resources.ClusterType, last, client.WatcherFuncs[*resources.Cluster]{})()
					defer client.Watch(bt.c, resources.EndpointsType, last, client.WatcherFuncs[*resources.Endpoints]{})()
				}
				versions := [2]*anypb.Any{c.other, w.route}
				lens := [2]int{c.len, n}
				b.ReportAllocs()
				b.ResetTimer()
				start := cpuTime()
				for i := range b.N {
					a, version := versions[i%2], fmt.Sprint(i+2)
					if api == bootstrap.APITypeAggregatedDeltaGRPC {
						bt.apply(&transport.Response{TypeURL: rdsURL, Delta: true, Nonce: version,
							DeltaResources: []*discoveryv3.Resource{{Name: "svc-route", Version: version, Resource: a}}})
					} else {
						bt.apply(&transport.Response{TypeURL: rdsURL, Version: version, Nonce: version, Resources: []*anypb.Any{a}})
					}
					if s := bt.next(); s.Clusters.Len() != lens[i%2] {
						b.Fatalf("round %d: %d clusters, want %d", i, s.Clusters.Len(), lens[i%2])
					}
				}
				b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

func benchCluster(i int) string { return fmt.Sprintf("cluster-%05d", i) }

func benchCLA(i int, port uint32) *anypb.Any {
	return testutils.MarshalAny(testutils.ClusterLoadAssignment(benchCluster(i), "127.0.0.1", port, port+1, port+2))
}

func mustUnmarshalCLA(a *anypb.Any) proto.Message {
	m, err := a.UnmarshalNew()
	if err != nil {
		panic(err)
	}
	return m
}

// benchWorld is the tree as a server would send it.
type benchWorld struct {
	listener, route     *anypb.Any
	clusters, endpoints []*anypb.Any
}

func newBenchWorld(n int) *benchWorld {
	w := &benchWorld{listener: testutils.MarshalAny(testutils.Listener("svc", "svc-route"))}
	for i := range n {
		w.clusters = append(w.clusters, testutils.MarshalAny(testutils.Cluster(benchCluster(i), "")))
		w.endpoints = append(w.endpoints, benchCLA(i, 8080))
	}
	w.route = benchRoutes(n, "/svc-")
	return w
}

// benchRoutes is the route configuration of a benchWorld of n clusters:
// a route to each, its path prefix starting with prefix.
func benchRoutes(n int, prefix string) *anypb.Any {
	var routes []*routev3.Route
	for i := range n {
		routes = append(routes, route(fmt.Sprintf("%s%d/", prefix, i), benchCluster(i)))
	}
	return testutils.MarshalAny(routeConfig("svc-route", []string{"*"}, routes...))
}

// benchTree is a client following the tree of a benchWorld, its transport
// the benchmark.
type benchTree struct {
	b      *testing.B
	api    bootstrap.APIType
	w      *benchWorld
	c      *client.Client
	cancel func()
	snaps  chan *watchers.Snapshot

	mu      sync.Mutex
	h       transport.Handler
	subs    map[string]map[string]bool // type URL → names
	changed chan struct{}              // capacity 1: subs changed
}

func newBenchTree(b *testing.B, api bootstrap.APIType, w *benchWorld) *benchTree {
	bt := &benchTree{b: b, api: api, w: w, snaps: make(chan *watchers.Snapshot, 16),
		subs: make(map[string]map[string]bool), changed: make(chan struct{}, 1)}
	cfg := &bootstrap.Config{
		Servers: []bootstrap.ServerConfig{{ServerURI: "bench.invalid:443", ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}}, APIType: api}},
		Node:    bootstrap.Node{ID: "bench"},
	}
	c, err := client.New(cfg, client.Options{TransportBuilder: bt, WatchExpiry: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	bt.c = c
	return bt
}

func (bt *benchTree) close() {
	if bt.cancel != nil {
		bt.cancel()
	}
	bt.c.Close()
}

// resolve watches the tree and answers its subscriptions until the first
// snapshot.
func (bt *benchTree) resolve() {
	names := bt.upToClusters()
	bt.clustersToEndpoints(names)
	bt.respond(edsURL, names, bt.w.endpoints)
	n := len(names)
	if s := bt.next(); s.Clusters.Len() != n {
		bt.b.Fatalf("snapshot of %d clusters, want %d", s.Clusters.Len(), n)
	}
}

// upToClusters watches the tree and answers its subscriptions until the
// clusters are subscribed to; it returns their names.
func (bt *benchTree) upToClusters() []string {
	bt.upToRoute()
	return bt.routeToClusters()
}

// upToRoute watches the tree and answers its subscriptions until the route
// configuration is subscribed to.
func (bt *benchTree) upToRoute() {
	bt.cancel = watchers.WatchConfigTree(bt.c, "svc", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
		OnUpdate:        func(s *watchers.Snapshot) { bt.snaps <- s },
		OnResourceError: func(err error) { bt.b.Errorf("tree: %v", err) },
	})
	bt.waitSubs(ldsURL, 1)
	bt.respond(ldsURL, []string{"svc"}, []*anypb.Any{bt.w.listener})
	bt.waitSubs(rdsURL, 1)
}

// routeToClusters answers the route configuration's subscription and waits
// until its clusters are subscribed to; it returns their names.
func (bt *benchTree) routeToClusters() []string {
	n := len(bt.w.clusters)
	bt.respond(rdsURL, []string{"svc-route"}, []*anypb.Any{bt.w.route})
	names := make([]string, n)
	for i := range names {
		names[i] = benchCluster(i)
	}
	bt.waitSubs(cdsURL, n)
	return names
}

// clustersToEndpoints answers the clusters' subscription and waits until
// their endpoints are subscribed to.
func (bt *benchTree) clustersToEndpoints(names []string) {
	bt.respond(cdsURL, names, bt.w.clusters)
	bt.waitSubs(edsURL, len(names))
}

func (bt *benchTree) respond(typeURL string, names []string, as []*anypb.Any) {
	r := &transport.Response{TypeURL: typeURL, Version: "1", Nonce: "1"}
	if bt.api == bootstrap.APITypeAggregatedDeltaGRPC {
		r.Delta = true
		for i, a := range as {
			r.DeltaResources = append(r.DeltaResources, &discoveryv3.Resource{Name: names[i], Version: "1", Resource: a})
		}
	} else {
		r.Resources = as
	}
	bt.apply(r)
}

// apply hands r to the client and waits until its watchers have heard.
func (bt *benchTree) apply(r *transport.Response) {
	bt.mu.Lock()
	h := bt.h
	bt.mu.Unlock()
	done := make(chan struct{})
	if err := h.OnResponse(r, func() { close(done) }); err != nil {
		bt.b.Fatalf("response NACKed: %v", err)
	}
	<-done
}

func (bt *benchTree) next() *watchers.Snapshot {
	select {
	case s := <-bt.snaps:
		return s
	case <-time.After(time.Minute):
		bt.b.Fatal("no snapshot")
		return nil
	}
}

func (bt *benchTree) waitSubs(typeURL string, n int) {
	deadline := time.After(time.Minute)
	for {
		bt.mu.Lock()
		got := len(bt.subs[typeURL])
		bt.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-bt.changed:
		case <-deadline:
			bt.b.Fatalf("%d names of %s subscribed, want %d", got, typeURL, n)
		}
	}
}

// Build, UpdateSubscriptions and Close make benchTree the client's
// transport builder and transport.
func (bt *benchTree) Build(_ bootstrap.ServerConfig, _ *corev3.Node, h transport.Handler) (transport.Transport, error) {
	bt.mu.Lock()
	bt.h = h
	bt.mu.Unlock()
	return bt, nil
}

func (bt *benchTree) UpdateSubscriptions(typeURL string, add, remove []string) {
	bt.mu.Lock()
	if bt.subs[typeURL] == nil {
		bt.subs[typeURL] = make(map[string]bool)
	}
	for _, n := range remove {
		delete(bt.subs[typeURL], n)
	}
	for _, n := range add {
		bt.subs[typeURL][n] = true
	}
	bt.mu.Unlock()
	select {
	case bt.changed <- struct{}{}:
	default:
	}
}

func (bt *benchTree) Close() {}

// BenchmarkTreeLiveHeap10k: the heap a resolved tree of 10,000 clusters
// keeps alive, client cache included (live-B/op), measured after a
// collection: what the tree's records and snapshot cost in memory.
func BenchmarkTreeLiveHeap10k(b *testing.B) {
	for _, api := range []bootstrap.APIType{bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC} {
		b.Run(api.String(), func(b *testing.B) {
			w := newBenchWorld(benchTreeClusters)
			var live uint64
			for range b.N {
				b.StopTimer()
				before := liveHeap()
				b.StartTimer()
				bt := newBenchTree(b, api, w)
				bt.resolve()
				b.StopTimer()
				live += liveHeap() - before
				bt.close()
				b.StartTimer()
			}
			b.ReportMetric(float64(live)/float64(b.N), "live-B/op")
		})
	}
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
