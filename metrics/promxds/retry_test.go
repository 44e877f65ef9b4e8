package promxds_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/metrics/promxds"
)

var _ grpcxds.RetryMetrics = (*promxds.RetryCollector)(nil)

// Each retried call is one observation of grpc_client_call_retries and of
// grpc_client_call_retry_delay_seconds, labelled with its method and
// target, in gRFC A96's buckets.
func TestRetryCollector(t *testing.T) {
	c := promxds.NewRetryCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	c.CallRetried("goxds:///svc", "pkg.S/M", 2, 1500*time.Millisecond)
	c.CallRetried("goxds:///svc", "pkg.S/M", 7, 250*time.Millisecond)
	c.CallRetried("goxds:///svc", "bad\xff", 1, 0) // dropped: not UTF-8

	want := `
# HELP grpc_client_call_retries Number of retries during the client call. If there were no retries, 0 is not reported.
# TYPE grpc_client_call_retries histogram
grpc_client_call_retries_bucket{grpc_method="pkg.S/M",grpc_target="goxds:///svc",le="1"} 0
grpc_client_call_retries_bucket{grpc_method="pkg.S/M",grpc_target="goxds:///svc",le="2"} 1
grpc_client_call_retries_bucket{grpc_method="pkg.S/M",grpc_target="goxds:///svc",le="3"} 1
grpc_client_call_retries_bucket{grpc_method="pkg.S/M",grpc_target="goxds:///svc",le="4"} 1
grpc_client_call_retries_bucket{grpc_method="pkg.S/M",grpc_target="goxds:///svc",le="5"} 1
grpc_client_call_retries_bucket{grpc_method="pkg.S/M",grpc_target="goxds:///svc",le="+Inf"} 2
grpc_client_call_retries_sum{grpc_method="pkg.S/M",grpc_target="goxds:///svc"} 9
grpc_client_call_retries_count{grpc_method="pkg.S/M",grpc_target="goxds:///svc"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.TrimPrefix(want, "\n")), promxds.NameCallRetries); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != promxds.NameCallRetryDelay {
			continue
		}
		if len(mf.Metric) != 1 {
			t.Fatalf("%d retry delay series, want 1", len(mf.Metric))
		}
		h := mf.Metric[0].GetHistogram()
		if h.GetSampleCount() != 2 || h.GetSampleSum() != 1.75 || len(h.GetBucket()) != 41 {
			t.Errorf("retry delay: count %d sum %v, %d buckets; want 2, 1.75, 41", h.GetSampleCount(), h.GetSampleSum(), len(h.GetBucket()))
		}
		return
	}
	t.Errorf("no %s gathered", promxds.NameCallRetryDelay)
}
