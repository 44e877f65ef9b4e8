package client_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// The benchmarks hand responses straight to the client, as its transport
// would, so that they measure the client alone: identifying, decoding (or
// not), applying and delivering. Each operation is one response, from the
// transport's call to done, which the client calls once every watcher has
// been told. docs/PERFORMANCE.md has figures; the load harness
// (example/loadtest) measures the whole path over gRPC.

const benchClusters = 10_000

// BenchmarkSotWResendUnchanged10kClusters: a SotW server resends all 10,000
// clusters with nothing changed (SotW sends every Cluster in every CDS
// response). No resource may be decoded or delivered again.
func BenchmarkSotWResendUnchanged10kClusters(b *testing.B) {
	bc := newBenchClient(b, bootstrap.APITypeAggregatedGRPC)
	updates := bc.watchClusters(benchClusters)
	all := clusterAnys(benchClusters, "")
	bc.apply(&transport.Response{TypeURL: resources.ClusterTypeURL, Version: "1", Resources: all})
	if got := updates.Load(); got != benchClusters {
		b.Fatalf("%d updates after the first response, want %d", got, benchClusters)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		bc.apply(&transport.Response{TypeURL: resources.ClusterTypeURL, Version: fmt.Sprint(i + 2), Resources: all})
	}
	b.StopTimer()
	if got := updates.Load(); got != benchClusters {
		b.Fatalf("%d updates after unchanged resends, want %d: an unchanged resource was delivered again", got, benchClusters)
	}
}

// BenchmarkSotWFullDecode10kClusters is the same response with every
// cluster changed: all 10,000 are decoded, validated, cached and delivered.
// The unchanged resend above is measured against it.
func BenchmarkSotWFullDecode10kClusters(b *testing.B) {
	bc := newBenchClient(b, bootstrap.APITypeAggregatedGRPC)
	updates := bc.watchClusters(benchClusters)
	versions := [2][]*anypb.Any{clusterAnys(benchClusters, "a"), clusterAnys(benchClusters, "b")}
	bc.apply(&transport.Response{TypeURL: resources.ClusterTypeURL, Version: "0", Resources: versions[1]})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		bc.apply(&transport.Response{TypeURL: resources.ClusterTypeURL, Version: fmt.Sprint(i + 1), Resources: versions[i%2]})
	}
	b.StopTimer()
	if got, want := updates.Load(), int64(benchClusters*(b.N+1)); got != want {
		b.Fatalf("%d updates, want %d", got, want)
	}
}

// BenchmarkDeltaUpdateOneOf10k: a delta response changes the endpoints of
// one of 10,000 clusters. The cost must not grow with the 10,000.
func BenchmarkDeltaUpdateOneOf10k(b *testing.B) {
	bc := newBenchClient(b, bootstrap.APITypeAggregatedDeltaGRPC)
	var updates atomic.Int64
	names := make([]string, benchClusters)
	var all []*discoveryv3.Resource
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
		client.WatchEndpoints(bc.c, names[i], client.WatcherFuncs[*resources.Endpoints]{
			OnUpdate: func(*resources.Endpoints) { updates.Add(1) },
		})
		all = append(all, deltaCLA(names[i], 8080))
	}
	bc.apply(&transport.Response{TypeURL: resources.EndpointsTypeURL, Delta: true, DeltaResources: all})
	// Two versions of every cluster's endpoints, made beforehand.
	var changed [2][]*discoveryv3.Resource
	for i, name := range names[:min(b.N, benchClusters)] {
		changed[0] = append(changed[0], deltaCLA(name, uint32(9000+i%1000)))
		changed[1] = append(changed[1], deltaCLA(name, 8080))
	}
	before := updates.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % len(changed[0])
		r := changed[(i/len(changed[0]))%2][k]
		bc.apply(&transport.Response{TypeURL: resources.EndpointsTypeURL, Delta: true, Nonce: fmt.Sprint(i), DeltaResources: []*discoveryv3.Resource{r}})
	}
	b.StopTimer()
	if got := updates.Load() - before; got != int64(b.N) {
		b.Fatalf("%d updates, want %d", got, b.N)
	}
}

// BenchmarkFanOutOneUpdateTo1000Watchers: one resource with 1,000
// watchers changes; it is decoded once and delivered 1,000 times.
func BenchmarkFanOutOneUpdateTo1000Watchers(b *testing.B) {
	const watchers = 1000
	bc := newBenchClient(b, bootstrap.APITypeAggregatedGRPC)
	var updates atomic.Int64
	for range watchers {
		client.WatchCluster(bc.c, "cluster", client.WatcherFuncs[*resources.Cluster]{
			OnUpdate: func(*resources.Cluster) { updates.Add(1) },
		})
	}
	versions := [2]*anypb.Any{
		testutils.MarshalAny(testutils.Cluster("cluster", "endpoints-a")),
		testutils.MarshalAny(testutils.Cluster("cluster", "endpoints-b")),
	}
	bc.apply(&transport.Response{TypeURL: resources.ClusterTypeURL, Version: "0", Resources: versions[1:]})
	before := updates.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		bc.apply(&transport.Response{TypeURL: resources.ClusterTypeURL, Version: fmt.Sprint(i + 1), Resources: versions[i%2 : i%2+1]})
	}
	b.StopTimer()
	if got, want := updates.Load()-before, int64(watchers*b.N); got != want {
		b.Fatalf("%d deliveries, want %d", got, want)
	}
}

// benchClient is a client whose one transport is the benchmark: it hands
// responses to the client's handler itself.
type benchClient struct {
	b       *testing.B
	c       *client.Client
	handler chan transport.Handler
	h       transport.Handler
}

func newBenchClient(b *testing.B, api bootstrap.APIType) *benchClient {
	b.Helper()
	bc := &benchClient{b: b, handler: make(chan transport.Handler, 1)}
	cfg := &bootstrap.Config{
		Servers: []bootstrap.ServerConfig{{
			ServerURI:    "bench.invalid:443",
			ChannelCreds: []bootstrap.ChannelCreds{{Type: "insecure"}},
			APIType:      api,
		}},
		Node: bootstrap.Node{ID: "bench"},
	}
	c, err := client.New(cfg, client.Options{TransportBuilder: bc, WatchExpiry: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	bc.c = c
	b.Cleanup(c.Close)
	return bc
}

func (bc *benchClient) Build(_ bootstrap.ServerConfig, _ *corev3.Node, h transport.Handler) (transport.Transport, error) {
	bc.handler <- h
	return benchTransport{}, nil
}

type benchTransport struct{}

func (benchTransport) UpdateSubscriptions(string, []string, []string) {}
func (benchTransport) Close()                                         {}

// apply hands r to the client and waits for done: the response applied and
// every watcher told.
func (bc *benchClient) apply(r *transport.Response) {
	if bc.h == nil {
		bc.h = <-bc.handler
	}
	done := make(chan struct{})
	if err := bc.h.OnResponse(r, func() { close(done) }); err != nil {
		bc.b.Fatalf("response NACKed: %v", err)
	}
	<-done
}

// watchClusters watches n clusters and counts their updates.
func (bc *benchClient) watchClusters(n int) *atomic.Int64 {
	var updates atomic.Int64
	for i := range n {
		client.WatchCluster(bc.c, fmt.Sprintf("cluster-%05d", i), client.WatcherFuncs[*resources.Cluster]{
			OnUpdate: func(*resources.Cluster) { updates.Add(1) },
		})
	}
	return &updates
}

// clusterAnys are n EDS clusters whose EDS service names end in suffix, as
// a SotW CDS response carries them.
func clusterAnys(n int, suffix string) []*anypb.Any {
	out := make([]*anypb.Any, n)
	for i := range out {
		name := fmt.Sprintf("cluster-%05d", i)
		out[i] = testutils.MarshalAny(testutils.Cluster(name, name+suffix))
	}
	return out
}

func deltaCLA(name string, port uint32) *discoveryv3.Resource {
	cla := testutils.ClusterLoadAssignment(name, "127.0.0.1", port, port+1, port+2)
	b, err := proto.Marshal(cla)
	if err != nil {
		panic(err)
	}
	return &discoveryv3.Resource{Name: name, Version: fmt.Sprint(port), Resource: &anypb.Any{TypeUrl: resources.EndpointsTypeURL, Value: b}}
}

// BenchmarkWatch10kNames registers 10,000 cluster watches on a new client,
// as a config tree of 10,000 clusters does: what the watch registry costs
// per watch (cache entry, watcher record, cancel function), in B/op.
func BenchmarkWatch10kNames(b *testing.B) {
	names := make([]string, benchClusters)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
	}
	w := client.WatcherFuncs[*resources.Cluster]{OnUpdate: func(*resources.Cluster) {}}
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		bc := newBenchClient(b, bootstrap.APITypeAggregatedGRPC)
		b.StartTimer()
		for _, name := range names {
			client.WatchCluster(bc.c, name, w)
		}
		b.StopTimer()
		bc.c.Close()
		b.StartTimer()
	}
}

// BenchmarkDeltaVerdict10kEndpoints: a delta response changes the endpoints
// of all 10,000 watched clusters (as the first EDS response of a tree
// does); measured is what the server waits for, the response's arrival to
// its verdict (the ACK goes out then), not the delivery to watchers that
// follows, which each round waits for untimed.
func BenchmarkDeltaVerdict10kEndpoints(b *testing.B) {
	bc := newBenchClient(b, bootstrap.APITypeAggregatedDeltaGRPC)
	names := make([]string, benchClusters)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
		client.WatchEndpoints(bc.c, names[i], client.WatcherFuncs[*resources.Endpoints]{})
	}
	var versions [2][]*discoveryv3.Resource
	for _, name := range names {
		versions[0] = append(versions[0], deltaCLA(name, 8080))
		versions[1] = append(versions[1], deltaCLA(name, 9080))
	}
	bc.apply(&transport.Response{TypeURL: resources.EndpointsTypeURL, Delta: true, DeltaResources: versions[1]})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		done := make(chan struct{})
		if err := bc.h.OnResponse(&transport.Response{TypeURL: resources.EndpointsTypeURL, Delta: true, Nonce: fmt.Sprint(i),
			DeltaResources: versions[i%2]}, func() { close(done) }); err != nil {
			b.Fatalf("response NACKed: %v", err)
		}
		b.StopTimer()
		<-done
		b.StartTimer()
	}
}
