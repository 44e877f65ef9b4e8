package promxds_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/goxds/xds/internal/metricstest"
	"github.com/goxds/xds/metrics/promxds"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The help texts: the descriptions of grpc-go's instruments.
const (
	helpValid     = "A counter of resources received that were considered valid. The counter will be incremented even for resources that have not changed."
	helpInvalid   = "A counter of resources received that were considered invalid."
	helpFailure   = "A counter of xDS servers going from healthy to unhealthy. A server goes unhealthy when we have a connectivity failure or when the ADS stream fails without seeing a response message, as per gRFC A57."
	helpConnected = "A metric that is 1 if the xDS Client has a working ADS stream to the server, 0 otherwise."
	helpResources = "Counts of xDS resources."
)

// The Collector, registered on a fresh registry and fed by a real client
// of go-control-plane's server through a valid update, a NACKed one and
// the server's failure, exposes what the client counted under the names
// OpenTelemetry's Prometheus exporter gives grpc-go's instruments.
func TestPrometheusMetricsOfARealClient(t *testing.T) {
	reg := prometheus.NewRegistry()
	col := promxds.New(promxds.Options{Target: "goxds:///svc"})
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	metricstest.Run(t, col, col.Observe, func(t *testing.T, s metricstest.Stage) {
		switch s.Name {
		case metricstest.StageValid:
			compare(t, reg, expand(`
# HELP grpc_xds_client_resource_updates_valid_total $HELP_VALID
# TYPE grpc_xds_client_resource_updates_valid_total counter
grpc_xds_client_resource_updates_valid_total{grpc_target="goxds:///svc",grpc_xds_resource_type="ClusterResource",grpc_xds_server="$SERVER"} $VALID
# HELP grpc_xds_client_connected $HELP_CONNECTED
# TYPE grpc_xds_client_connected gauge
grpc_xds_client_connected{grpc_target="goxds:///svc",grpc_xds_server="$SERVER"} 1
# HELP grpc_xds_client_resources $HELP_RESOURCES
# TYPE grpc_xds_client_resources gauge
grpc_xds_client_resources{grpc_target="goxds:///svc",grpc_xds_authority="#old",grpc_xds_cache_state="acked",grpc_xds_resource_type="ClusterResource"} 1
`, s), promxds.NameResourceUpdatesValid, promxds.NameConnected, promxds.NameResources)
		case metricstest.StageNACKed:
			// The server may still be resending the invalid cluster: the
			// gauge is settled, the counter only has a floor.
			compare(t, reg, expand(`
# HELP grpc_xds_client_resources $HELP_RESOURCES
# TYPE grpc_xds_client_resources gauge
grpc_xds_client_resources{grpc_target="goxds:///svc",grpc_xds_authority="#old",grpc_xds_cache_state="nacked_but_cached",grpc_xds_resource_type="ClusterResource"} 1
`, s), promxds.NameResources)
			if n := counterValue(t, reg, promxds.NameResourceUpdatesInvalid); n < 1 {
				t.Errorf("invalid updates %v, want at least 1", n)
			}
		case metricstest.StageFailed:
			compare(t, reg, expand(`
# HELP grpc_xds_client_resource_updates_valid_total $HELP_VALID
# TYPE grpc_xds_client_resource_updates_valid_total counter
grpc_xds_client_resource_updates_valid_total{grpc_target="goxds:///svc",grpc_xds_resource_type="ClusterResource",grpc_xds_server="$SERVER"} $VALID
# HELP grpc_xds_client_resource_updates_invalid_total $HELP_INVALID
# TYPE grpc_xds_client_resource_updates_invalid_total counter
grpc_xds_client_resource_updates_invalid_total{grpc_target="goxds:///svc",grpc_xds_resource_type="ClusterResource",grpc_xds_server="$SERVER"} $INVALID
# HELP grpc_xds_client_server_failure_total $HELP_FAILURE
# TYPE grpc_xds_client_server_failure_total counter
grpc_xds_client_server_failure_total{grpc_target="goxds:///svc",grpc_xds_server="$SERVER"} 1
# HELP grpc_xds_client_connected $HELP_CONNECTED
# TYPE grpc_xds_client_connected gauge
grpc_xds_client_connected{grpc_target="goxds:///svc",grpc_xds_server="$SERVER"} 0
# HELP grpc_xds_client_resources $HELP_RESOURCES
# TYPE grpc_xds_client_resources gauge
grpc_xds_client_resources{grpc_target="goxds:///svc",grpc_xds_authority="#old",grpc_xds_cache_state="nacked_but_cached",grpc_xds_resource_type="ClusterResource"} 1
`, s))
			if s.Failures != 1 {
				t.Errorf("the client reported %d failures, want 1", s.Failures)
			}
		}
	})
	// The Collector holds no goroutine and the registry lints clean.
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// compare checks the registry's metrics of names (all if none) against
// the exposition text want.
func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.TrimPrefix(want, "\n")), names...); err != nil {
		t.Error(err)
	}
}

// expand fills in the exposition text want: the help texts, and the
// server and the client's sums of stage s.
func expand(want string, s metricstest.Stage) string {
	return strings.NewReplacer(
		"$HELP_VALID", helpValid, "$HELP_INVALID", helpInvalid, "$HELP_FAILURE", helpFailure,
		"$HELP_CONNECTED", helpConnected, "$HELP_RESOURCES", helpResources,
		"$SERVER", s.Server, "$VALID", fmt.Sprint(s.Valid), "$INVALID", fmt.Sprint(s.Invalid),
	).Replace(want)
}

// counterValue returns the value of the one series of counter name.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no single series %s", name)
	return 0
}

// Label values Prometheus cannot export (not UTF-8) drop the sample:
// neither a panic nor a failed scrape.
func TestInvalidLabelValuesDropped(t *testing.T) {
	reg := prometheus.NewRegistry()
	col := promxds.New(promxds.Options{})
	reg.MustRegister(col)
	bad := "srv\xff"
	col.ResourceUpdates(bad, "type.googleapis.com/envoy.config.cluster.v3.Cluster", 1, 1)
	col.ServerFailure(bad)
	col.Connected(bad, true)
	col.Connected("good:443", true)
	compare(t, reg, expand(`
# HELP grpc_xds_client_connected $HELP_CONNECTED
# TYPE grpc_xds_client_connected gauge
grpc_xds_client_connected{grpc_target="#goxds",grpc_xds_server="good:443"} 1
`, metricstest.Stage{}))
}
