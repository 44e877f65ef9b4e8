package promxds_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/internal/metricstest"
	"github.com/goxds/xds/metrics/promxds"
)

var (
	_ grpcxds.OutlierMetrics    = (*promxds.OutlierCollector)(nil)
	_ grpcxds.SubchannelMetrics = (*promxds.SubchannelCollector)(nil)
)

// scrape gathers reg and returns each sample as "name{labels}" → value,
// labels sorted by name, and each family's type; it fails the test if
// the registry does not lint clean.
func scrape(t *testing.T, reg *prometheus.Registry) (map[string]float64, map[string]string) {
	t.Helper()
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	samples, types := map[string]float64{}, map[string]string{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType().String()
		for _, m := range mf.Metric {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName(), l.GetValue())
			}
			v := m.GetCounter().GetValue()
			if m.GetGauge() != nil {
				v = m.GetGauge().GetValue()
			}
			samples[lbl(mf.GetName(), kv...)] = v
		}
	}
	return samples, types
}

// lbl names a series: name{label="value",...}, labels sorted.
func lbl(name string, kv ...string) string {
	var pairs []string
	for i := 0; i < len(kv); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", kv[i], kv[i+1]))
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// gRFC A91: each outlier goxds's outlier detection finds, driven on a
// fake clock, is one count of grpc_lb_outlier_detection_ejections_enforced_total
// or _unenforced_total, by target, detection method, reason and backend
// service.
func TestOutlierCollector(t *testing.T) {
	c := promxds.NewOutlierCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	heard := metricstest.RunOutlier(t, c)
	c.EjectionEnforced("goxds:///svc", "bad\xff", "success_rate") // dropped: not UTF-8
	want := map[string]float64{}
	for k, n := range heard {
		if k.Reason == "" {
			want[lbl(promxds.NameEjectionsEnforced, "grpc_target", k.Target, "grpc_lb_backend_service", k.BackendService,
				"grpc_lb_outlier_detection_detection_method", k.Method)] = float64(n)
			continue
		}
		want[lbl(promxds.NameEjectionsUnenforced, "grpc_target", k.Target, "grpc_lb_backend_service", k.BackendService,
			"grpc_lb_outlier_detection_detection_method", k.Method, "grpc_lb_outlier_detection_unenforced_reason", k.Reason)] = float64(n)
	}
	got, types := scrape(t, reg)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	wantTypes := map[string]string{promxds.NameEjectionsEnforced: "COUNTER", promxds.NameEjectionsUnenforced: "COUNTER"}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
}

// gRFC A94: a real goxds channel's connection attempts (succeeded against
// a server, failed against a closed port), disconnections (a server
// stopped: "unknown"; an endpoint leaving the configuration: "subchannel
// shutdown") and open connections, by target, backend service and
// locality, scraped at each stage exactly as the channel reported them.
func TestSubchannelCollector(t *testing.T) {
	c := promxds.NewSubchannelCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	metricstest.RunSubchannel(t, c, func(t *testing.T, s metricstest.ConnStage) {
		want := map[string]float64{}
		add := func(name string, m map[metricstest.ConnKey]int) {
			for k, v := range m {
				want[lbl(name, "grpc_target", k.Target, "grpc_lb_backend_service", k.BackendService, "grpc_lb_locality", k.Locality)] = float64(v)
			}
		}
		add(promxds.NameAttemptsSucceeded, s.Succeeded)
		add(promxds.NameAttemptsFailed, s.Failed)
		add(promxds.NameOpenConnections, s.Open)
		for k, v := range s.Disconnections {
			want[lbl(promxds.NameDisconnections, "grpc_target", k.Target, "grpc_lb_backend_service", k.BackendService,
				"grpc_lb_locality", k.Locality, "grpc_disconnect_error", k.Reason)] = float64(v)
		}
		got, types := scrape(t, reg)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stage %s (-want +got):\n%s", s.Name, diff)
		}
		wantTypes := map[string]string{promxds.NameAttemptsSucceeded: "COUNTER", promxds.NameAttemptsFailed: "COUNTER",
			promxds.NameOpenConnections: "GAUGE"}
		if len(s.Disconnections) > 0 {
			wantTypes[promxds.NameDisconnections] = "COUNTER"
		}
		if diff := cmp.Diff(wantTypes, types); diff != "" {
			t.Errorf("stage %s: families (-want +got):\n%s", s.Name, diff)
		}
	})
}

// The HTTP client's connection metrics are A94's under goxds's names
// (goxds_http_client_*), of the same types, labelled as A94's less
// grpc_target, which an HTTP client has none of.
func TestHTTPConnectionCollector(t *testing.T) {
	c := promxds.NewHTTPConnectionCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	const loc = `{region="r", zone="z", sub_zone=""}`
	c.ConnectionAttemptSucceeded("", "c", loc)
	c.OpenConnections("", "c", loc, 1)
	c.ConnectionAttemptSucceeded("", "c", loc)
	c.OpenConnections("", "c", loc, 1)
	c.ConnectionAttemptFailed("", "d", loc)
	c.Disconnection("", "c", loc, "connection reset")
	c.OpenConnections("", "c", loc, -1)
	c.ConnectionAttemptFailed("", "\xff", loc) // not UTF-8: dropped
	want := map[string]float64{
		lbl(promxds.NameHTTPAttemptsSucceeded, "grpc_lb_backend_service", "c", "grpc_lb_locality", loc): 2,
		lbl(promxds.NameHTTPAttemptsFailed, "grpc_lb_backend_service", "d", "grpc_lb_locality", loc):    1,
		lbl(promxds.NameHTTPOpenConnections, "grpc_lb_backend_service", "c", "grpc_lb_locality", loc):   1,
		lbl(promxds.NameHTTPDisconnections, "grpc_lb_backend_service", "c", "grpc_lb_locality", loc,
			"grpc_disconnect_error", "connection reset"): 1,
	}
	got, types := scrape(t, reg)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	wantTypes := map[string]string{promxds.NameHTTPAttemptsSucceeded: "COUNTER", promxds.NameHTTPAttemptsFailed: "COUNTER",
		promxds.NameHTTPOpenConnections: "GAUGE", promxds.NameHTTPDisconnections: "COUNTER"}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
}
