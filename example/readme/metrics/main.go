// Command metrics serves a goxds client's metrics to Prometheus: the
// README's "Operating it" example, kept here so that it compiles.
package main

import (
	"errors"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/metrics/promxds"
	"github.com/goxds/xds/watchers"
)

func main() {
	cfg, err := bootstrap.FromEnv()
	if errors.Is(err, bootstrap.ErrNoBootstrap) {
		log.Fatal("set GRPC_XDS_BOOTSTRAP to the path of an xDS bootstrap file")
	} else if err != nil {
		log.Fatal(err)
	}
	// The collector is the client's Metrics; it then observes the client
	// for the gauge of resources per cache state.
	metrics := promxds.New(promxds.Options{Target: "goxds:///my-service"})
	c, err := client.New(cfg, client.Options{Metrics: metrics})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	metrics.Observe(c)
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)

	cancel := watchers.WatchConfigTree(c, "my-service", watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
		OnUpdate: func(s *watchers.Snapshot) { log.Printf("%d clusters", s.Clusters.Len()) },
	})
	defer cancel()

	// grpc_xds_client_connected, grpc_xds_client_resources, ... on :9464/metrics.
	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	log.Fatal(http.ListenAndServe(":9464", nil))
}
