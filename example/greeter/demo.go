package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

const (
	listenerName = "greeter"
	routeName    = "greeter-routes"
	eastCluster  = "greeter-east"
	westCluster  = "greeter-west"
	// settleRun is how many RPCs in a row must show a change before the
	// demo counts: the management server pushes, the channel applies, and
	// the demo learns of it only from where RPCs go.
	settleRun = 50
)

var (
	zoneA = testutils.Locality{Region: "us-east", Zone: "zone-a"}
	zoneB = testutils.Locality{Region: "us-west", Zone: "zone-b"}
)

// mesh is what the demo's steps change; resources makes the xDS
// resources of it.
type mesh struct {
	backends []*backend // east-1, east-2 in zone-a; west-1 in zone-b
	// eastWeight and westWeight split the route between the clusters; a
	// westWeight of 0 sends everything to greeter-east with a plain route.
	eastWeight, westWeight uint32
	// zoneADrained marks zone-a's endpoints DRAINING in greeter-east.
	zoneADrained bool
}

// resources is the demo's tree: listener "greeter" → route configuration
// "greeter-routes" → greeter-east (zone-a at priority 0, zone-b at
// priority 1, for failover) and greeter-west (zone-b).
func (m *mesh) resources() testutils.Resources {
	action := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: eastCluster}}
	if m.westWeight > 0 {
		action = weightedAction(eastCluster, m.eastWeight, westCluster, m.westWeight)
	}
	health := corev3.HealthStatus_HEALTHY
	if m.zoneADrained {
		health = corev3.HealthStatus_DRAINING
	}
	east1, east2, west1 := m.backends[0], m.backends[1], m.backends[2]
	return testutils.Resources{
		Listeners: []*listenerv3.Listener{testutils.Listener(listenerName, routeName)},
		Routes: []*routev3.RouteConfiguration{{
			Name: routeName,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    "greeter",
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action: &routev3.Route_Route{Route: action},
				}},
			}},
		}},
		Clusters: []*clusterv3.Cluster{testutils.Cluster(eastCluster, ""), testutils.Cluster(westCluster, "")},
		Endpoints: []*endpointv3.ClusterLoadAssignment{
			testutils.Endpoints(eastCluster, []testutils.EndpointSpec{
				{Host: "127.0.0.1", Port: east1.port, Locality: zoneA, Health: health},
				{Host: "127.0.0.1", Port: east2.port, Locality: zoneA, Health: health},
				{Host: "127.0.0.1", Port: west1.port, Locality: zoneB, Priority: 1},
			}),
			testutils.Endpoints(westCluster, []testutils.EndpointSpec{
				{Host: "127.0.0.1", Port: west1.port, Locality: zoneB},
			}),
		},
	}
}

func weightedAction(a string, wa uint32, b string, wb uint32) *routev3.RouteAction {
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
		Clusters: []*routev3.WeightedCluster_ClusterWeight{
			{Name: a, Weight: wrapperspb.UInt32(wa)},
			{Name: b, Weight: wrapperspb.UInt32(wb)},
		},
	}}}
}

// step is one change to the mesh, and how to tell from the backend that
// served an RPC that the channel has taken it.
type step struct {
	title  string
	change func(*mesh)
	// shows is true of a backend that serves RPCs once the change is in
	// force; settleRun RPCs in a row must satisfy it.
	shows func(backend string) bool
}

var steps = []step{{
	title:  "the route splits traffic 80/20 between greeter-east (zone-a) and greeter-west (zone-b)",
	change: func(m *mesh) { m.eastWeight, m.westWeight = 80, 20 },
	shows:  func(string) bool { return true },
}, {
	title:  "the route is changed: everything goes to greeter-east",
	change: func(m *mesh) { m.westWeight = 0 },
	shows:  func(b string) bool { return b != "west-1" },
}, {
	title:  "zone-a is drained over EDS: greeter-east fails over to its priority 1, zone-b",
	change: func(m *mesh) { m.zoneADrained = true },
	shows:  func(b string) bool { return b == "west-1" },
}, {
	title:  "zone-a is healthy again: greeter-east fails back",
	change: func(m *mesh) { m.zoneADrained = false },
	shows:  func(b string) bool { return b != "west-1" },
}}

// play applies each step on the management server, waits until the
// channel shows it, and prints where rpcs RPCs go.
func play(ctx context.Context, m *mesh, update func(context.Context) error, conn *grpc.ClientConn, rpcs int, out io.Writer) error {
	for i, s := range steps {
		s.change(m)
		if err := update(ctx); err != nil {
			return err
		}
		if err := settle(ctx, conn, s.shows, i == 0, len(m.backends)); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.title, err)
		}
		counts := make(map[string]int)
		for range rpcs {
			name, err := greet(ctx, conn)
			if err != nil {
				return fmt.Errorf("step %d: RPC failed: %w", i+1, err)
			}
			counts[name]++
		}
		fmt.Fprintf(out, "step %d: %s\n", i+1, s.title)
		for _, b := range m.backends {
			n := counts[b.name]
			line := fmt.Sprintf("  %-7s %-15s %5d RPCs  %s", b.name, b.locality, n, strings.Repeat("#", n*40/rpcs))
			fmt.Fprintln(out, strings.TrimRight(line, " "))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// settle makes RPCs until settleRun in a row satisfy shows; with all, it
// also waits until every backend has served one, so that all connections
// are up before counting starts.
func settle(ctx context.Context, conn *grpc.ClientConn, shows func(string) bool, all bool, backends int) error {
	seen := make(map[string]bool)
	for inARow := 0; inARow < settleRun || (all && len(seen) < backends); {
		name, err := greet(ctx, conn)
		switch {
		case ctx.Err() != nil:
			return errors.New("the change did not show in time")
		case err != nil:
			return err
		case shows(name):
			inARow++
		default:
			inARow = 0
		}
		seen[name] = true
	}
	return nil
}
