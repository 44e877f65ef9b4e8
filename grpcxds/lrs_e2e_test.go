package grpcxds_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/google/go-cmp/cmp"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// lrsSelf makes a cluster report its load to the management server it
// came from.
func lrsSelf(c *clusterv3.Cluster) *clusterv3.Cluster {
	c.LrsServer = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	return c
}

// byHeader matches RPCs whose x-target header is value.
func byHeader(value string) *routev3.RouteMatch {
	return &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
		Headers: []*routev3.HeaderMatcher{{
			Name:                 "x-target",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: value},
		}},
	}
}

// localityTotals is what the reports of one locality add up to.
type localityTotals struct{ issued, succeeded, errored, inProgress uint64 }

// lrsTotals adds up the reports an LRS server received.
type lrsTotals struct {
	localities map[string]map[string]localityTotals // cluster/service, zone
	drops      map[string]map[string]uint64         // cluster, category ("" for the total)
}

func (lt *lrsTotals) add(req *lrsv3.LoadStatsRequest) {
	for _, cs := range req.ClusterStats {
		key := cs.ClusterName + "/" + cs.ClusterServiceName
		if lt.localities[key] == nil {
			lt.localities[key] = make(map[string]localityTotals)
		}
		for _, ls := range cs.UpstreamLocalityStats {
			t := lt.localities[key][ls.Locality.GetZone()]
			t.issued += ls.TotalIssuedRequests
			t.succeeded += ls.TotalSuccessfulRequests
			t.errored += ls.TotalErrorRequests
			t.inProgress += ls.TotalRequestsInProgress
			lt.localities[key][ls.Locality.GetZone()] = t
		}
		if lt.drops[cs.ClusterName] == nil {
			lt.drops[cs.ClusterName] = make(map[string]uint64)
		}
		lt.drops[cs.ClusterName][""] += cs.TotalDroppedRequests
		for _, d := range cs.DroppedRequests {
			lt.drops[cs.ClusterName][d.Category] += d.DroppedCount
		}
	}
}

// TestLoadReporting sends RPCs through clusters whose lrs_server is self
// and checks what the management server's LRS service is told: every RPC
// once, in the locality of the endpoint that served it, as succeeded or
// errored; drop_overloads drops by category; circuit breaker refusals in
// the total only. When the routes stop naming those clusters, the LRS
// stream closes.
func TestLoadReporting(t *testing.T) {
	t.Parallel()
	lrs := testutils.NewLRSServer()
	e := newEnvServer(t, grpcxds.Options{}, testutils.ManagementServerOptions{LoadReporting: lrs})
	a, b := startBackend(t, "a"), startBackend(t, "b")
	fail := func(context.Context) error { return status.Error(codes.Internal, "b fails") }
	b.handler.Store(&fail)

	// main: a in zone-a, b in zone-b, round robin; EDS service "svc-main".
	mainCLA := testutils.Endpoints("svc-main", []testutils.EndpointSpec{
		{Host: "127.0.0.1", Port: a.port, Locality: testutils.Locality{Region: "r", Zone: "zone-a"}},
		{Host: "127.0.0.1", Port: b.port, Locality: testutils.Locality{Region: "r", Zone: "zone-b"}},
	})
	// drop: every RPC dropped by the category "throttle".
	dropCLA := eds("drop", a)
	dropCLA.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{{
		Category:       "throttle",
		DropPercentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
	}}}
	// cb: a circuit breaker that lets no request through.
	cb := lrsSelf(testutils.Cluster("cb", ""))
	cb.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		Priority: corev3.RoutingPriority_DEFAULT, MaxRequests: wrapperspb.UInt32(0),
	}}}
	withLRS := tree(routes(toCluster(byHeader("drop"), "drop"), toCluster(byHeader("cb"), "cb"), toCluster(prefix("/"), "main")),
		[]*clusterv3.Cluster{lrsSelf(testutils.Cluster("main", "svc-main")), lrsSelf(testutils.Cluster("drop", "")), cb},
		mainCLA, dropCLA, eds("cb", a))
	e.update(withLRS)
	conn := e.dial()

	// Both backends ready first, so that round robin alternates.
	e.waitServed(conn, 1, func(string) bool { return true })
	before := a.rpcs.Load() + b.rpcs.Load() // served before counting starts: reported too
	const n, drops, cbDrops = 40, 7, 5
	for range n {
		call(e.ctx, conn, grpc.WaitForReady(true))
	}
	for range drops {
		if _, err := callWithHeader(e.ctx, conn, "x-target", "drop"); status.Code(err) != codes.Unavailable {
			t.Fatalf("RPC to the dropping cluster: %v, want UNAVAILABLE", err)
		}
	}
	for range cbDrops {
		if _, err := call(metadata.AppendToOutgoingContext(e.ctx, "x-target", "cb"), conn, grpc.WaitForReady(true)); status.Code(err) != codes.Unavailable {
			t.Fatalf("RPC to the cluster whose circuit breaker is shut: %v, want UNAVAILABLE", err)
		}
	}
	servedA, servedB := uint64(a.rpcs.Load()), uint64(b.rpcs.Load())
	total := uint64(before) + n
	if servedA+servedB != total || servedB == 0 || servedA == 0 {
		t.Fatalf("backends served a %d, b %d; want %d RPCs over both", servedA, servedB, total)
	}

	st, err := lrs.NextStream(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.NextRequest(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Node.GetId() != nodeID || len(first.ClusterStats) != 0 {
		t.Errorf("first LoadStatsRequest: %v, want node %q alone", first, nodeID)
	}
	if err := st.Send(&lrsv3.LoadStatsResponse{SendAllClusters: true, LoadReportingInterval: durationpb.New(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	got := lrsTotals{localities: make(map[string]map[string]localityTotals), drops: make(map[string]map[string]uint64)}
	for {
		req, err := st.NextRequest(e.ctx)
		if err != nil {
			t.Fatalf("%v; reports so far: %+v", err, got)
		}
		got.add(req)
		m := got.localities["main/svc-main"]
		if m["zone-a"].issued+m["zone-b"].issued >= total && got.drops["drop"][""] >= drops && got.drops["cb"][""] >= cbDrops {
			break
		}
	}
	wantMain := map[string]localityTotals{
		"zone-a": {issued: servedA, succeeded: servedA},
		"zone-b": {issued: servedB, errored: servedB},
	}
	if m := got.localities["main/svc-main"]; m["zone-a"] != wantMain["zone-a"] || m["zone-b"] != wantMain["zone-b"] || len(m) != 2 {
		t.Errorf("reported load of main: %+v, want %+v", m, wantMain)
	}
	if d := got.drops["drop"]; d[""] != drops || d["throttle"] != drops || len(d) != 2 {
		t.Errorf("reported drops of drop: %v, want %d in all, all throttle", d, drops)
	}
	if d := got.drops["cb"]; d[""] != cbDrops || len(d) != 1 {
		t.Errorf("reported drops of cb: %v, want %d in all, no category", d, cbDrops)
	}
	if len(got.localities["drop/"]) != 0 || len(got.localities["cb/"]) != 0 {
		t.Errorf("RPCs reported for clusters that sent none: %+v", got.localities)
	}

	// The routes stop naming clusters that report load: the stream ends.
	plain := testutils.Cluster("plain", "")
	e.update(tree(routes(toCluster(prefix("/"), "plain")), []*clusterv3.Cluster{plain}, eds("plain", a)))
	select {
	case <-st.Done():
	case <-e.ctx.Done():
		t.Fatal("the LRS stream outlived the last cluster reporting load")
	}
	if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
		t.Errorf("RPC after the change: %v", err)
	}
	if st2, err := lrs.NextStream(shortContext(t)); err == nil {
		t.Errorf("a new LRS stream opened with no cluster reporting load: %v", st2)
	}
}

// shortContext ends soon: for checking that something does not happen,
// where waiting for it longer proves no more.
func shortContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// orcaGreeterDesc is greeterDesc's SayHello through the server's
// interceptors, which the ORCA recorder comes from.
var orcaGreeterDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.Greeter",
	HandlerType: (*greeter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "SayHello",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			handler := func(ctx context.Context, req any) (any, error) {
				return srv.(greeter).SayHello(ctx, req.(*wrapperspb.StringValue))
			}
			if interceptor == nil {
				return handler(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: sayHello}, handler)
		},
	}},
}

// orcaGreeter answers SayHello with an ORCA load report in the trailer.
type orcaGreeter struct{ rpcs atomic.Int64 }

func (g *orcaGreeter) SayHello(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	g.rpcs.Add(1)
	rec := orca.CallMetricsRecorderFromContext(ctx)
	rec.SetCPUUtilization(0.5)
	rec.SetMemoryUtilization(0.25)
	rec.SetNamedMetric("queue", 3)
	rec.SetNamedMetric("other", 1)
	return wrapperspb.String("orca"), nil
}

// TestLoadReportingBackendMetrics checks that the backend metrics an RPC
// ends with (ORCA) reach the load reports as the cluster's
// lrs_report_endpoint_metrics select them (gRFC A85): cpu_utilization in
// its own field, named_metrics.queue in load_metric_stats, with the count
// of RPCs and the sum; mem_utilization and other named metrics not.
func TestLoadReportingBackendMetrics(t *testing.T) {
	t.Parallel()
	lrs := testutils.NewLRSServer()
	e := newEnvServer(t, grpcxds.Options{}, testutils.ManagementServerOptions{LoadReporting: lrs})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &orcaGreeter{}
	srv := grpc.NewServer(orca.CallMetricsServerOption(nil))
	srv.RegisterService(&orcaGreeterDesc, g)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	c := lrsSelf(testutils.Cluster("main", ""))
	c.LrsReportEndpointMetrics = []string{"cpu_utilization", "named_metrics.queue"}
	port := uint32(lis.Addr().(*net.TCPAddr).Port)
	e.update(tree(routes(toCluster(prefix("/"), "main")), []*clusterv3.Cluster{c},
		testutils.Endpoints("main", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: port, Locality: testutils.Locality{Zone: "z"}}})))
	conn := e.dial()
	for range 10 {
		if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
	}
	n := uint64(g.rpcs.Load())

	st, err := lrs.NextStream(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.NextRequest(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&lrsv3.LoadStatsResponse{Clusters: []string{"main"}, LoadReportingInterval: durationpb.New(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	var got *endpointv3.UpstreamLocalityStats
	for got == nil {
		req, err := st.NextRequest(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range req.ClusterStats {
			if len(cs.UpstreamLocalityStats) > 0 {
				got = cs.UpstreamLocalityStats[0]
			}
		}
	}
	want := &endpointv3.UpstreamLocalityStats{
		Locality:                &corev3.Locality{Zone: "z"},
		TotalIssuedRequests:     n,
		TotalSuccessfulRequests: n,
		CpuUtilization:          &endpointv3.UnnamedEndpointLoadMetricStats{NumRequestsFinishedWithMetric: n, TotalMetricValue: 0.5 * float64(n)},
		LoadMetricStats: []*endpointv3.EndpointLoadMetricStats{
			{MetricName: "named_metrics.queue", NumRequestsFinishedWithMetric: n, TotalMetricValue: 3 * float64(n)},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("locality load (-want +got):\n%s", diff)
	}
}
