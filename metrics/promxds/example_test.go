package promxds_test

import (
	"fmt"
	"log"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/metrics/promxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// A client's metrics on a Prometheus registry, here with a local
// management server, where a program would serve the registry with
// promhttp and use the bootstrap of its mesh.
func ExampleNew() {
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		Initial: map[string]testutils.Resources{"node": {Clusters: []*clusterv3.Cluster{testutils.Cluster("C1", "")}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ms.Stop()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "node"}))
	if err != nil {
		log.Fatal(err)
	}

	col := promxds.New(promxds.Options{Target: "goxds:///my-service"})
	c, err := client.New(cfg, client.Options{Metrics: col})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	col.Observe(c)
	registry := prometheus.NewRegistry()
	registry.MustRegister(col)

	got := make(chan struct{})
	cancel := client.WatchCluster(c, "C1", client.WatcherFuncs[*resources.Cluster]{
		OnUpdate: func(*resources.Cluster) { close(got) },
	})
	defer cancel()
	<-got

	mfs, err := registry.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == promxds.NameResources {
			var b strings.Builder
			expfmt.MetricFamilyToText(&b, mf)
			fmt.Print(b.String())
		}
	}
	// Output:
	// # HELP grpc_xds_client_resources Counts of xDS resources.
	// # TYPE grpc_xds_client_resources gauge
	// grpc_xds_client_resources{grpc_target="goxds:///my-service",grpc_xds_authority="#old",grpc_xds_cache_state="acked",grpc_xds_resource_type="ClusterResource"} 1
}

// A Builder's channels measured (gRFC A91's outlier ejections, A94's
// connections): one collector of each serves every channel of the
// Builder, each series labelled with its channel's target.
func ExampleNewSubchannelCollector() {
	outliers, conns := promxds.NewOutlierCollector(), promxds.NewSubchannelCollector()
	registry := prometheus.NewRegistry()
	registry.MustRegister(outliers, conns)
	builder, err := grpcxds.NewBuilder(grpcxds.Options{OutlierMetrics: outliers, SubchannelMetrics: conns})
	if err != nil {
		log.Fatal(err)
	}
	defer builder.Close()
	conn, err := grpcxds.NewClient("goxds:///my-service", builder, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// Serve registry with promhttp; use conn.
}
