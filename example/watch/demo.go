package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/treeevents"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

const (
	demoListener = "demo"
	demoNode     = "demo-node"
	// demoStepTimeout bounds the wait for each change to show: they take
	// milliseconds, but a failing demo must not hang.
	demoStepTimeout = 5 * time.Second
)

// demoState is what the scripted changes change; resources builds the
// mesh from it.
type demoState struct {
	weightV1, weightV2 uint32 // of the weighted route
	drained            bool   // 10.0.1.2 of backend-v1 is draining
	v2Deleted          bool   // cluster backend-v2 is gone from the server
}

// resources is the demo mesh: listener "demo" → route config "demo-routes"
// with a route /api/ weighted over two EDS clusters in two localities, and
// a default route to an aggregate cluster that prefers an EDS cluster and
// falls back to a LOGICAL_DNS one.
func (st demoState) resources() testutils.Resources {
	prefix := func(p string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
	}
	rc := &routev3.RouteConfiguration{
		Name: "demo-routes",
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "demo",
			Domains: []string{demoListener, "demo.example.com"},
			Routes: []*routev3.Route{{
				Match: prefix("/api/"),
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
						Clusters: []*routev3.WeightedCluster_ClusterWeight{
							{Name: "backend-v1", Weight: wrapperspb.UInt32(st.weightV1)},
							{Name: "backend-v2", Weight: wrapperspb.UInt32(st.weightV2)},
						},
					}},
				}},
			}, {
				Match: prefix("/"),
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "fallback"},
				}},
			}},
		}},
	}
	east := func(zone string) testutils.Locality { return testutils.Locality{Region: "us-east-1", Zone: zone} }
	ep := func(host string, loc testutils.Locality, health corev3.HealthStatus) testutils.EndpointSpec {
		return testutils.EndpointSpec{Host: host, Port: 8080, Locality: loc, Health: health}
	}
	v1Health := corev3.HealthStatus_HEALTHY
	if st.drained {
		v1Health = corev3.HealthStatus_DRAINING
	}
	res := testutils.Resources{
		Listeners: []*listenerv3.Listener{testutils.Listener(demoListener, "demo-routes")},
		Routes:    []*routev3.RouteConfiguration{rc},
		Clusters: []*clusterv3.Cluster{
			testutils.Cluster("backend-v1", ""),
			testutils.AggregateCluster("fallback", "backend-eu", "legacy-dns"),
			testutils.Cluster("backend-eu", ""),
			testutils.LogicalDNSCluster("legacy-dns", "legacy.example.com", 8080),
		},
		Endpoints: []*endpointv3.ClusterLoadAssignment{
			testutils.Endpoints("backend-v1", []testutils.EndpointSpec{
				ep("10.0.1.1", east("us-east-1a"), corev3.HealthStatus_HEALTHY),
				ep("10.0.1.2", east("us-east-1a"), v1Health),
				ep("10.0.2.1", east("us-east-1b"), corev3.HealthStatus_HEALTHY),
			}),
			testutils.Endpoints("backend-v2", []testutils.EndpointSpec{
				ep("10.0.1.10", east("us-east-1a"), corev3.HealthStatus_HEALTHY),
				ep("10.0.2.10", east("us-east-1b"), corev3.HealthStatus_HEALTHY),
			}),
			testutils.Endpoints("backend-eu", []testutils.EndpointSpec{
				ep("10.1.1.1", testutils.Locality{Region: "eu-west-1", Zone: "eu-west-1a"}, corev3.HealthStatus_HEALTHY),
			}),
		},
	}
	if !st.v2Deleted {
		res.Clusters = append(res.Clusters, testutils.Cluster("backend-v2", ""))
	}
	return res
}

// demoStep is one scripted change and how to recognise the snapshot that
// shows it.
type demoStep struct {
	title  string
	change func(*demoState)
	shown  func(*watchers.Snapshot) bool
}

var demoScript = []demoStep{{
	title:  "endpoint 10.0.1.2:8080 of backend-v1 drained",
	change: func(st *demoState) { st.drained = true },
	shown: func(s *watchers.Snapshot) bool {
		cc := s.Clusters.Get("backend-v1")
		return cc.Endpoints != nil && cc.Endpoints.Localities[0].Endpoints[1].HealthStatus == resources.HealthStatusDraining
	},
}, {
	title:  "traffic on /api/ shifted to 50/50",
	change: func(st *demoState) { st.weightV1, st.weightV2 = 50, 50 },
	shown: func(s *watchers.Snapshot) bool {
		wcs := s.VirtualHost.Routes[0].WeightedClusters
		return len(wcs) == 2 && wcs[0].Weight == 50
	},
}, {
	title:  "cluster backend-v2 deleted, though the route still sends to it",
	change: func(st *demoState) { st.v2Deleted = true },
	shown:  func(s *watchers.Snapshot) bool { return s.Clusters.Get("backend-v2").Err != nil },
}}

// runDemo starts the built-in management server, follows the demo tree
// and plays the script on the server.
func runDemo(ctx context.Context, o options, stdout io.Writer, logger *slog.Logger) error {
	msOpts := testutils.ManagementServerOptions{}
	if o.verbose {
		msOpts.Logger = logger.With("component", "management-server")
	}
	ms, err := testutils.StartManagementServer(msOpts)
	if err != nil {
		return err
	}
	defer ms.Stop()
	st := demoState{weightV1: 80, weightV2: 20}
	if err := ms.Update(ctx, demoNode, st.resources()); err != nil {
		return err
	}

	apiType := testutils.APITypeSotW
	if o.delta {
		apiType = testutils.APITypeDelta
	}
	// fail_on_data_errors: the script deletes a cluster to show what that
	// does to the tree; without it the client would keep the cluster and
	// only report the deletion (gRFC A88).
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI:      ms.Address(),
		APIType:        apiType,
		NodeID:         demoNode,
		ServerFeatures: []string{bootstrap.FeatureFailOnDataErrors},
	}))
	if err != nil {
		return err
	}
	// A short does-not-exist timer: a mistyped -listener fails in seconds.
	c, err := client.New(cfg, client.Options{Logger: logger, WatchExpiry: 2 * time.Second})
	if err != nil {
		return err
	}
	// Closed before the server stops (defers run last first), so the
	// client does not see its server vanish.
	defer c.Close()

	listener := cmp.Or(o.listener, demoListener)
	fmt.Fprintf(stdout, "demo: management server on %s (%s), following listener %q\n\n", ms.Address(), apiType, listener)
	q := treeevents.NewQueue()
	cancel := watchers.WatchConfigTree(c, listener, watchers.TreeOptions{Authority: o.authority}, q)
	defer cancel()

	p := &treeevents.Printer{W: stdout, Render: render}
	if err := waitShown(ctx, q, p, "", func(*watchers.Snapshot) bool { return true }); err != nil {
		return err
	}
	for _, step := range demoScript {
		step.change(&st)
		if err := ms.Update(ctx, demoNode, st.resources()); err != nil {
			return err
		}
		if err := waitShown(ctx, q, p, step.title, step.shown); err != nil {
			return fmt.Errorf("%s: %w", step.title, err)
		}
	}
	// The last change shows an error in the tree, which is the point of
	// it; the demo must not seem to end on a failure.
	fmt.Fprint(stdout, demoOver)
	return nil
}

// demoOver is the demo's last output: the error just above was the last
// scripted change, not a failure.
const demoOver = `
--- demo over: the error above was the last scripted change (a cluster a
    route still names, deleted); the tree keeps it, in error, as gRPC would.
    Follow a real server: go run ./example/watch -bootstrap FILE -listener NAME
`

// waitShown prints events until a snapshot for which shown is true.
func waitShown(ctx context.Context, q *treeevents.Queue, p *treeevents.Printer, title string, shown func(*watchers.Snapshot) bool) error {
	ctx, cancel := context.WithTimeout(ctx, demoStepTimeout)
	defer cancel()
	for {
		ev, err := q.Next(ctx)
		if err != nil {
			return fmt.Errorf("waiting for the tree: %w", err)
		}
		p.Print(ev, title)
		switch {
		case ev.Err != nil && !ev.Ambient:
			return errors.New("the tree is unusable")
		case ev.Snap != nil && shown(ev.Snap):
			return nil
		}
	}
}
