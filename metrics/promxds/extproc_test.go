package promxds_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/metrics/promxds"
	"github.com/goxds/xds/xdsserver"
)

var (
	_ grpcxds.ExtProcMetrics   = (*promxds.ExtProcCollector)(nil)
	_ xdsserver.ExtProcMetrics = (*promxds.ExtProcCollector)(nil)
)

// Each event is one observation, in seconds, of its side's histogram:
// the client's labelled with the target and backend service, the
// server's with none; gRFC A66's 41 latency buckets.
func TestExtProcCollector(t *testing.T) {
	c := promxds.NewExtProcCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	c.ClientExtProcDuration("goxds:///svc", "cluster-a", "client_headers", 1500*time.Millisecond)
	c.ClientExtProcDuration("goxds:///svc", "cluster-a", "client_headers", 250*time.Millisecond)
	c.ClientExtProcDuration("goxds:///svc", "", "server_trailers", time.Millisecond)
	c.ClientExtProcDuration("bad\xff", "", "client_half_close", time.Millisecond) // dropped: not UTF-8
	c.ServerExtProcDuration("client_half_close", 2*time.Second)

	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		labels  string
		count   uint64
		sum     float64
		buckets int
	}
	got := map[string][]series{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			l := ""
			for _, lp := range m.GetLabel() {
				l += lp.GetName() + "=" + lp.GetValue() + ","
			}
			h := m.GetHistogram()
			got[mf.GetName()] = append(got[mf.GetName()], series{labels: l, count: h.GetSampleCount(), sum: h.GetSampleSum(), buckets: len(h.GetBucket())})
		}
	}
	want := map[string][]series{
		"grpc_client_ext_proc_client_headers_duration_seconds":    {{labels: "grpc_lb_backend_service=cluster-a,grpc_target=goxds:///svc,", count: 2, sum: 1.75, buckets: 41}},
		"grpc_client_ext_proc_server_trailers_duration_seconds":   {{labels: "grpc_lb_backend_service=,grpc_target=goxds:///svc,", count: 1, sum: 0.001, buckets: 41}},
		"grpc_server_ext_proc_client_half_close_duration_seconds": {{count: 1, sum: 2, buckets: 41}},
	}
	for name, w := range want {
		if g := got[name]; len(g) != 1 || g[0] != w[0] {
			t.Errorf("%s: %+v, want %+v", name, g, w)
		}
	}
	if g := got["grpc_client_ext_proc_client_half_close_duration_seconds"]; len(g) != 0 {
		t.Errorf("client half-close: %+v, want none (the target not UTF-8 is dropped)", g)
	}
	if len(got["grpc_server_ext_proc_client_headers_duration_seconds"]) != 1 || got["grpc_server_ext_proc_client_headers_duration_seconds"][0].count != 0 {
		t.Errorf("the server's unobserved histogram: %+v, want one empty series", got["grpc_server_ext_proc_client_headers_duration_seconds"])
	}
}
