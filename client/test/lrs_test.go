package test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/google/go-cmp/cmp"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// newLRSSetup starts a management server serving an LRSServer, and a
// client of it whose timers run on a fake clock.
func newLRSSetup(t *testing.T) (*client.Client, *testutils.LRSServer, *testutils.FakeClock) {
	t.Helper()
	lrs := testutils.NewLRSServer()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{LoadReporting: lrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	clock := testutils.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := newClient(t, ms.Address(), sotw, config{clock: clock})
	return c, lrs, clock
}

// wantLRSNode is the node of a first LoadStatsRequest: the client's, with
// the feature that says it honours send_all_clusters.
func wantLRSNode() *corev3.Node {
	n := proto.Clone(wantNode).(*corev3.Node)
	n.ClientFeatures = append(n.ClientFeatures, "envoy.lrs.supports_send_all_clusters")
	return n
}

// sortStats orders a report's clusters, localities and drop categories,
// which the client sends in no particular order.
func sortStats(cs []*endpointv3.ClusterStats) []*endpointv3.ClusterStats {
	sort.Slice(cs, func(i, j int) bool { return cs[i].ClusterName < cs[j].ClusterName })
	for _, c := range cs {
		sort.Slice(c.UpstreamLocalityStats, func(i, j int) bool {
			return c.UpstreamLocalityStats[i].Locality.Zone < c.UpstreamLocalityStats[j].Locality.Zone
		})
		sort.Slice(c.DroppedRequests, func(i, j int) bool { return c.DroppedRequests[i].Category < c.DroppedRequests[j].Category })
	}
	return cs
}

func nextReport(ctx context.Context, t *testing.T, st *testutils.LRSStream) *lrsv3.LoadStatsRequest {
	t.Helper()
	req, err := st.NextRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req.ClusterStats = sortStats(req.ClusterStats)
	return req
}

// TestLoadReportingProtocol checks the LoadStatsRequests a client sends:
// the node with envoy.lrs.supports_send_all_clusters first and alone, then
// at each load_reporting_interval the load of the clusters the server
// named (or of all with send_all_clusters) counted since the previous
// report, in-progress RPCs carried over, empty clusters left out.
func TestLoadReportingProtocol(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, lrs, clock := newLRSSetup(t)
	store, release, err := c.ReportLoad(c.Bootstrap().Servers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	st, err := lrs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nextReport(ctx, t, st), (&lrsv3.LoadStatsRequest{Node: wantLRSNode()}); !proto.Equal(got, want) {
		t.Fatalf("first LoadStatsRequest:\n got %v\nwant %v", got, want)
	}

	zoneA, zoneB := resources.LocalityID{Region: "r", Zone: "a"}, resources.LocalityID{Region: "r", Zone: "b"}
	c1 := store.Cluster("c1", "svc1")
	a, b := c1.Locality(zoneA), c1.Locality(zoneB)
	for range 3 {
		a.CallStarted()
	}
	a.CallFinished(false)
	a.CallFinished(true)
	b.CallStarted()
	b.CallFinished(false)
	c1.CallDropped("lb")
	c1.CallDropped("lb")
	c1.CallDropped("") // a circuit breaker's: in the total only
	c2 := store.Cluster("c2", "")
	c2.Locality(zoneA).CallStarted()
	c2.Locality(zoneA).CallFinished(false)

	if err := st.Send(&lrsv3.LoadStatsResponse{Clusters: []string{"c1"}, LoadReportingInterval: durationpb.New(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := clock.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	loc := func(z string) *corev3.Locality { return &corev3.Locality{Region: "r", Zone: z} }
	want := &lrsv3.LoadStatsRequest{ClusterStats: []*endpointv3.ClusterStats{{
		ClusterName:        "c1",
		ClusterServiceName: "svc1",
		UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{
			{Locality: loc("a"), TotalIssuedRequests: 3, TotalSuccessfulRequests: 1, TotalErrorRequests: 1, TotalRequestsInProgress: 1},
			{Locality: loc("b"), TotalIssuedRequests: 1, TotalSuccessfulRequests: 1},
		},
		TotalDroppedRequests: 3,
		DroppedRequests:      []*endpointv3.ClusterStats_DroppedRequests{{Category: "lb", DroppedCount: 2}},
		LoadReportInterval:   durationpb.New(10 * time.Second),
	}}}
	if diff := cmp.Diff(want, nextReport(ctx, t, st), protocmp.Transform()); diff != "" {
		t.Fatalf("report of c1 (-want +got):\n%s", diff)
	}

	// send_all_clusters: c2's load, held since it was counted, and c1's
	// RPC still in progress; nothing else of c1 (reset by the last report).
	if err := st.Send(&lrsv3.LoadStatsResponse{SendAllClusters: true, LoadReportingInterval: durationpb.New(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// The new interval replaces the pending timer, due 5s from now.
	if err := clock.WaitForTimerAt(ctx, clock.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	want = &lrsv3.LoadStatsRequest{ClusterStats: []*endpointv3.ClusterStats{{
		ClusterName:           "c1",
		ClusterServiceName:    "svc1",
		UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{{Locality: loc("a"), TotalRequestsInProgress: 1}},
		LoadReportInterval:    durationpb.New(5 * time.Second),
	}, {
		ClusterName:           "c2",
		UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{{Locality: loc("a"), TotalIssuedRequests: 1, TotalSuccessfulRequests: 1}},
		LoadReportInterval:    durationpb.New(15 * time.Second),
	}}}
	if diff := cmp.Diff(want, nextReport(ctx, t, st), protocmp.Transform()); diff != "" {
		t.Fatalf("report of all clusters (-want +got):\n%s", diff)
	}
}

// TestLoadReportingStreamLifetime checks that the LRS stream to a server
// is opened by the first ReportLoad, shared by later ones, closed when the
// last is released, opened again by the next, opened again after the
// server cuts it (node first once more), and closed by Close.
func TestLoadReportingStreamLifetime(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, lrs, _ := newLRSSetup(t)
	server := c.Bootstrap().Servers[0]
	s1, release1, err := c.ReportLoad(server)
	if err != nil {
		t.Fatal(err)
	}
	s2, release2, err := c.ReportLoad(server)
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 {
		t.Errorf("two ReportLoad of one server returned different stores")
	}
	st, err := lrs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextReport(ctx, t, st)
	release1()
	release1() // idempotent: must not release the second user's hold
	select {
	case <-st.Done():
		t.Fatal("the LRS stream ended while a user still held it")
	case <-time.After(50 * time.Millisecond): // a stream wrongly closed ends well within this
	}
	release2()
	select {
	case <-st.Done():
	case <-ctx.Done():
		t.Fatal("the LRS stream outlived the last release")
	}

	_, release3, err := c.ReportLoad(server)
	if err != nil {
		t.Fatal(err)
	}
	defer release3()
	st, err = lrs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextReport(ctx, t, st)
	st.Cut(errors.New("going away"))
	st, err = lrs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := nextReport(ctx, t, st); !proto.Equal(got.Node, wantLRSNode()) {
		t.Errorf("first request of the new stream: node %v, want %v", got.Node, wantLRSNode())
	}
	c.Close()
	select {
	case <-st.Done():
	case <-ctx.Done():
		t.Fatal("the LRS stream outlived Close")
	}
	if _, _, err := c.ReportLoad(server); !errors.Is(err, client.ErrClosed) {
		t.Errorf("ReportLoad after Close: %v, want ErrClosed", err)
	}
}

// TestLoadReportingUnsupportedServer checks that a server reached by
// REST has no load reporting, and says so.
func TestLoadReportingUnsupportedServer(t *testing.T) {
	t.Parallel()
	b, err := bootstrapFor("127.0.0.1:1", rest, config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.ReportLoad(b.Servers[0])
	if err == nil || !strings.Contains(err.Error(), "has no load reporting service") {
		t.Errorf("ReportLoad of a REST server: %v, want an error about load reporting", err)
	}
}

// TestLoadReportingInvalidInterval checks that a LoadStatsResponse whose
// load_reporting_interval is not a positive duration ends the stream (no
// report is sent on it) and that the client opens a new one.
func TestLoadReportingInvalidInterval(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, lrs, _ := newLRSSetup(t)
	_, release, err := c.ReportLoad(c.Bootstrap().Servers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, d := range []*durationpb.Duration{nil, durationpb.New(-time.Second)} {
		st, err := lrs.NextStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nextReport(ctx, t, st)
		if err := st.Send(&lrsv3.LoadStatsResponse{SendAllClusters: true, LoadReportingInterval: d}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-st.Done():
		case <-ctx.Done():
			t.Fatalf("load_reporting_interval %v: the stream did not end", d)
		}
		if req, err := st.NextRequest(shortContext(ctx)); err == nil {
			t.Errorf("load_reporting_interval %v: a request after the response: %v", d, req)
		}
	}
	if _, err := lrs.NextStream(ctx); err != nil {
		t.Fatalf("no new stream after the invalid responses: %v", err)
	}
}

// shortContext is done at once: NextRequest then tells whether a request
// has been received, without waiting.
func shortContext(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	return ctx
}

// TestLoadReportingFinalReport checks that the last release sends the load
// counted since the previous report before the stream ends, as gRPC does,
// without waiting for the interval; and that a stream the server has not
// answered yet ends with no report.
func TestLoadReportingFinalReport(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, lrs, clock := newLRSSetup(t)
	server := c.Bootstrap().Servers[0]

	store, release, err := c.ReportLoad(server)
	if err != nil {
		t.Fatal(err)
	}
	st, err := lrs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextReport(ctx, t, st)
	if err := st.Send(&lrsv3.LoadStatsResponse{Clusters: []string{"c"}, LoadReportingInterval: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := clock.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l := store.Cluster("c", "").Locality(resources.LocalityID{Zone: "z"})
	l.CallStarted()
	l.CallFinished(true)
	clock.Advance(time.Second)
	release()
	want := &lrsv3.LoadStatsRequest{ClusterStats: []*endpointv3.ClusterStats{{
		ClusterName: "c",
		UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{
			{Locality: &corev3.Locality{Zone: "z"}, TotalIssuedRequests: 1, TotalErrorRequests: 1},
		},
		LoadReportInterval: durationpb.New(time.Second),
	}}}
	if diff := cmp.Diff(want, nextReport(ctx, t, st), protocmp.Transform()); diff != "" {
		t.Fatalf("last report (-want +got):\n%s", diff)
	}
	select {
	case <-st.Done():
	case <-ctx.Done():
		t.Fatal("the stream did not end after the last report")
	}

	// Not answered yet: nothing to report to, the stream just ends.
	_, release, err = c.ReportLoad(server)
	if err != nil {
		t.Fatal(err)
	}
	st, err = lrs.NextStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextReport(ctx, t, st)
	release()
	select {
	case <-st.Done():
	case <-ctx.Done():
		t.Fatal("an unanswered stream outlived the last release")
	}
	if req, err := st.NextRequest(shortContext(ctx)); err == nil {
		t.Errorf("a request on a stream the server never answered: %v", req)
	}
}
