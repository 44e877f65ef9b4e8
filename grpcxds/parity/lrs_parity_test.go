package parity_test

import (
	"context"
	"slices"
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
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/google/go-cmp/cmp"

	"github.com/goxds/xds/testutils"
)

// zoneLoad is what the reports of one locality add up to.
type zoneLoad struct{ Issued, Succeeded, Errored uint64 }

// loadSeen is what one client's LRS reports add up to.
type loadSeen struct {
	Features []string                       // the first request's client features
	Zones    map[string]map[string]zoneLoad // cluster/service → zone
	Drops    map[string]map[string]uint64   // cluster → category ("" the total)
}

func (l *loadSeen) add(req *lrsv3.LoadStatsRequest) {
	for _, cs := range req.ClusterStats {
		key := cs.ClusterName + "/" + cs.ClusterServiceName
		for _, ls := range cs.UpstreamLocalityStats {
			if l.Zones[key] == nil {
				l.Zones[key] = make(map[string]zoneLoad)
			}
			z := l.Zones[key][ls.Locality.GetZone()]
			z.Issued += ls.TotalIssuedRequests
			z.Succeeded += ls.TotalSuccessfulRequests
			z.Errored += ls.TotalErrorRequests
			l.Zones[key][ls.Locality.GetZone()] = z
		}
		if cs.TotalDroppedRequests > 0 {
			if l.Drops[cs.ClusterName] == nil {
				l.Drops[cs.ClusterName] = make(map[string]uint64)
			}
			l.Drops[cs.ClusterName][""] += cs.TotalDroppedRequests
			for _, d := range cs.DroppedRequests {
				l.Drops[cs.ClusterName][d.Category] += d.DroppedCount
			}
		}
	}
}

func (l *loadSeen) issued() (n uint64) {
	for _, zs := range l.Zones {
		for _, z := range zs {
			n += z.Issued
		}
	}
	return n
}

func (l *loadSeen) dropped() (n uint64) {
	for _, d := range l.Drops {
		n += d[""]
	}
	return n
}

// TestParityLoadReporting sends the same RPCs through goxds and grpc-go's
// xds resolver, over clusters whose lrs_server is self, and checks that
// the management server's LRS service hears the same from both: the
// feature envoy.lrs.supports_send_all_clusters, every RPC once in the
// locality of the endpoint that served it, split into succeeded and
// errored alike, drop_overloads drops by category, circuit breaker
// refusals in the total only.
func TestParityLoadReporting(t *testing.T) {
	t.Parallel()
	lrs := testutils.NewLRSServer()
	p := newPairWith(t, testutils.ManagementServerOptions{LoadReporting: lrs})
	a, b := startBackend(t, "a"), startBackend(t, "b")
	fail := func(context.Context) error { return status.Error(codes.Internal, "b fails") }
	b.handler.Store(&fail)

	self := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	mainCluster := testutils.Cluster("main", "svc-main")
	mainCluster.LrsServer = self
	dropCluster := testutils.Cluster("drop", "")
	dropCluster.LrsServer = self
	cbCluster := testutils.Cluster("cb", "")
	cbCluster.LrsServer = self
	cbCluster.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		Priority: corev3.RoutingPriority_DEFAULT, MaxRequests: wrapperspb.UInt32(0),
	}}}
	dropCLA := eds("drop", a)
	dropCLA.Policy = &endpointv3.ClusterLoadAssignment_Policy{DropOverloads: []*endpointv3.ClusterLoadAssignment_Policy_DropOverload{{
		Category:       "throttle",
		DropPercentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
	}}}
	byHeader := func(value, cluster string) *routev3.Route {
		r := toCluster(cluster)
		r.Match.Headers = []*routev3.HeaderMatcher{{
			Name: "x-target", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: value},
		}}
		return r
	}
	p.update(tree(vhost(byHeader("drop", "drop"), byHeader("cb", "cb"), toCluster("main")), nil,
		[]*clusterv3.Cluster{mainCluster, dropCluster, cbCluster},
		testutils.Endpoints("svc-main", []testutils.EndpointSpec{
			{Host: "127.0.0.1", Port: a.port, Locality: testutils.Locality{Region: "r", Zone: "zone-a"}},
			{Host: "127.0.0.1", Port: b.port, Locality: testutils.Locality{Region: "r", Zone: "zone-b"}},
		}),
		dropCLA, eds("cb", a)))

	// Each channel sends at least n RPCs, and goes on until both zones
	// have served some: a locality is picked only once an endpoint of it
	// is ready, so the first RPCs all go to whichever zone connected
	// first, and on a loaded machine n RPCs can end before the other one
	// does. What each backend served of a channel's RPCs (the channels
	// take turns) is what its reports must give the backend's zone.
	const n, drops, cbDrops = 30, 4, 3
	served := make(map[string]map[string]zoneLoad) // node → zone
	for name, conn := range p.conns {
		a0, b0 := a.rpcs.Load(), b.rpcs.Load()
		for sent := 0; sent < n || a.rpcs.Load() == a0 || b.rpcs.Load() == b0; sent++ {
			if p.ctx.Err() != nil {
				t.Fatalf("%s: %d RPCs: served %d by zone-a and %d by zone-b, want some by each", name, sent, a.rpcs.Load()-a0, b.rpcs.Load()-b0)
			}
			conn.Invoke(p.ctx, sayHello, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.WaitForReady(true))
		}
		na, nb := uint64(a.rpcs.Load()-a0), uint64(b.rpcs.Load()-b0)
		served[name] = map[string]zoneLoad{"zone-a": {Issued: na, Succeeded: na}, "zone-b": {Issued: nb, Errored: nb}}
		for _, tc := range []struct {
			target string
			n      int
		}{{"drop", drops}, {"cb", cbDrops}} {
			ctx := metadata.AppendToOutgoingContext(p.ctx, "x-target", tc.target)
			for range tc.n {
				err := conn.Invoke(ctx, sayHello, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.WaitForReady(true))
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("%s: RPC to cluster %s: %v, want UNAVAILABLE", name, tc.target, err)
				}
			}
		}
	}

	seen := make(map[string]*loadSeen) // by node ID
	for len(seen) < 2 {
		st, err := lrs.NextStream(p.ctx)
		if err != nil {
			t.Fatal(err)
		}
		first, err := st.NextRequest(p.ctx)
		if err != nil {
			t.Fatal(err)
		}
		l := &loadSeen{Features: first.Node.GetClientFeatures(), Zones: make(map[string]map[string]zoneLoad), Drops: make(map[string]map[string]uint64)}
		seen[first.Node.GetId()] = l
		if err := st.Send(&lrsv3.LoadStatsResponse{SendAllClusters: true, LoadReportingInterval: durationpb.New(50 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		want := served[first.Node.GetId()]
		for l.issued() < want["zone-a"].Issued+want["zone-b"].Issued || l.dropped() < drops+cbDrops {
			req, err := st.NextRequest(p.ctx)
			if err != nil {
				t.Fatalf("node %s: %v; reports so far %+v", first.Node.GetId(), err, l)
			}
			l.add(req)
		}
	}
	goxds, grpcgo := seen["goxds"], seen["grpc-go"]
	if goxds == nil || grpcgo == nil {
		t.Fatalf("LRS streams of nodes %v, want goxds and grpc-go", seen)
	}
	for name, l := range seen {
		if !slices.Contains(l.Features, "envoy.lrs.supports_send_all_clusters") {
			t.Errorf("%s: first LoadStatsRequest's client features %v lack envoy.lrs.supports_send_all_clusters", name, l.Features)
		}
		if diff := cmp.Diff(served[name], l.Zones["main/svc-main"]); diff != "" {
			t.Errorf("%s: load of main by zone, against what each zone's backend served (-served +reported):\n%s", name, diff)
		}
		if want := served[name]["zone-a"].Issued + served[name]["zone-b"].Issued; l.issued() != want {
			t.Errorf("%s: %d RPCs issued in all reports, want %d (main's alone)", name, l.issued(), want)
		}
		l.Features = nil
		l.Zones = nil // the split between the zones depends on when each connected
	}
	if diff := cmp.Diff(grpcgo, goxds); diff != "" {
		t.Errorf("drops reported (-grpc-go +goxds):\n%s", diff)
	}
	if want := map[string]map[string]uint64{"drop": {"": drops, "throttle": drops}, "cb": {"": cbDrops}}; !cmp.Equal(goxds.Drops, want) {
		t.Errorf("goxds drops %v, want %v", goxds.Drops, want)
	}
}
