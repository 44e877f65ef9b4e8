package otelxds_test

import (
	"context"
	"fmt"
	"log"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/metrics/otelxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// A client's metrics on an OpenTelemetry MeterProvider, here with a manual
// reader and a local management server, where a program would use its
// exporter and the bootstrap of its mesh.
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

	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	m, err := otelxds.New(provider, otelxds.Options{Target: "goxds:///my-service"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	c, err := client.New(cfg, client.Options{Metrics: m})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m.Observe(c)

	got := make(chan struct{})
	cancel := client.WatchCluster(c, "C1", client.WatcherFuncs[*resources.Cluster]{
		OnUpdate: func(*resources.Cluster) { close(got) },
	})
	defer cancel()
	<-got

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			if g, ok := metric.Data.(metricdata.Gauge[int64]); ok && metric.Name == "grpc.xds_client.resources" {
				for _, p := range g.DataPoints {
					state, _ := p.Attributes.Value("grpc.xds.cache_state")
					typ, _ := p.Attributes.Value("grpc.xds.resource_type")
					fmt.Println(metric.Name, typ.Emit(), state.Emit(), p.Value)
				}
			}
		}
	}
	// Output:
	// grpc.xds_client.resources ClusterResource acked 1
}

// A Builder's channels measured (gRFC A91's outlier ejections, A94's
// connections) on a MeterProvider: one of each serves every channel of
// the Builder, each measurement labelled with its channel's target.
func ExampleNewSubchannelMetrics() {
	provider := sdkmetric.NewMeterProvider() // with the program's reader or exporter
	outliers, err := otelxds.NewOutlierMetrics(provider)
	if err != nil {
		log.Fatal(err)
	}
	conns, err := otelxds.NewSubchannelMetrics(provider)
	if err != nil {
		log.Fatal(err)
	}
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
}
