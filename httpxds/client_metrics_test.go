package httpxds_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/metrics/otelxds"
	"github.com/goxds/xds/metrics/promxds"
	"github.com/goxds/xds/testutils"
)

// The adapters made for grpcxds.OutlierMetrics serve the HTTP client
// as they are.
var (
	_ httpxds.OutlierMetrics = (*otelxds.OutlierMetrics)(nil)
	_ httpxds.OutlierMetrics = (*promxds.OutlierCollector)(nil)
)

// ejection is one measurement an outlierRecorder heard.
type ejection struct {
	enforced                        bool
	target, backend, method, reason string
}

// outlierRecorder is an httpxds.OutlierMetrics that keeps what it hears
// and signals each measurement on got. If tr is set, each call first
// sends a request through it (to a host of its own, its context already
// cancelled): that takes the Transport's lock, so a call made under it
// would never see that request return; underLock records that it did not
// in time.
type outlierRecorder struct {
	tr  *httpxds.Transport
	got chan struct{}

	mu        sync.Mutex
	heard     []ejection
	underLock bool
}

func newOutlierRecorder() *outlierRecorder { return &outlierRecorder{got: make(chan struct{}, 100)} }

func (r *outlierRecorder) note(e ejection) {
	if r.tr != nil && blocksOn(r.tr) {
		r.mu.Lock()
		r.underLock = true
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.heard = append(r.heard, e)
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *outlierRecorder) EjectionEnforced(target, backendService, method string) {
	r.note(ejection{true, target, backendService, method, ""})
}

func (r *outlierRecorder) EjectionUnenforced(target, backendService, method, reason string) {
	r.note(ejection{false, target, backendService, method, reason})
}

// outlierTee reports to both.
type outlierTee [2]httpxds.OutlierMetrics

func (o outlierTee) EjectionEnforced(target, backendService, method string) {
	o[0].EjectionEnforced(target, backendService, method)
	o[1].EjectionEnforced(target, backendService, method)
}

func (o outlierTee) EjectionUnenforced(target, backendService, method, reason string) {
	o[0].EjectionUnenforced(target, backendService, method, reason)
	o[1].EjectionUnenforced(target, backendService, method, reason)
}

// metricsOutlierEnv is outlierEnv's client (cluster "c": bad answering
// 500, and good; consecutive_5xx on, no interval ever ending) with m as
// its TransportOptions.OutlierMetrics.
func metricsOutlierEnv(t *testing.T, m httpxds.OutlierMetrics) (e *cenv, bad, good *backend) {
	clock := testutils.NewFakeClock(time.Unix(1000, 0))
	e = newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) {
		o.Clock = clock
		o.OutlierMetrics = m
	}})
	bad, good = newBackend(t, "bad"), newBackend(t, "good")
	bad.handler = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad", http.StatusInternalServerError) }
	res := world(routes("rc", toCluster(prefix("/"), "c", nil)), map[string][]*backend{"c": {bad, good}})
	res.Clusters[0].OutlierDetection = &clusterv3.OutlierDetection{
		EnforcingSuccessRate: wrapperspb.UInt32(0),
		MaxEjectionPercent:   wrapperspb.UInt32(50),
	}
	e.update(res)
	return e, bad, good
}

// An endpoint answering 500 ejected by Envoy's consecutive_5xx is
// reported to TransportOptions.OutlierMetrics once, enforced, with method
// consecutive_5xx, the cluster as backend service and no target, from
// outside the Transport's lock (the recorder sends a request through the
// Transport from within the call).
func TestClientOutlierMetricsConsecutive5xx(t *testing.T) {
	rec := newOutlierRecorder()
	e, bad, good := metricsOutlierEnv(t, rec)
	rec.tr = e.tr
	for range 30 {
		e.get("/x")
	}
	select {
	case <-rec.got:
	case <-time.After(testTimeout):
		t.Fatal("no ejection reported to OutlierMetrics")
	}
	if bad.count() != 5 || good.count() != 25 {
		t.Errorf("bad served %d requests, good %d; want 5 (then ejected) and 25", bad.count(), good.count())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := ejection{enforced: true, target: "", backend: "c", method: "consecutive_5xx"}
	if len(rec.heard) != 1 || rec.heard[0] != want {
		t.Errorf("OutlierMetrics heard %+v, want one %+v", rec.heard, want)
	}
	if rec.underLock {
		t.Error("OutlierMetrics was called under the Transport's lock")
	}
}

// otelxds's OutlierMetrics plugs into TransportOptions.OutlierMetrics as
// it does into grpcxds's: the ejection is one on
// grpc.lb.outlier_detection.ejections_enforced, with the cluster and
// method as attributes and an empty grpc.target.
func TestClientOutlierMetricsOTel(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	om, err := otelxds.NewOutlierMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	seen := newOutlierRecorder()
	e, bad, _ := metricsOutlierEnv(t, outlierTee{om, seen})
	for range 30 {
		e.get("/x")
	}
	if bad.count() != 5 {
		t.Fatalf("bad served %d requests, want 5 (then ejected)", bad.count())
	}
	// The goroutine that ends the request (here, at its body's end)
	// reports the ejection: wait for it rather than count on when.
	select {
	case <-seen.got:
	case <-time.After(testTimeout):
		t.Fatal("no ejection reported to OutlierMetrics")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var points []metricdata.DataPoint[int64]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "grpc.lb.outlier_detection.ejections_enforced" {
				points = m.Data.(metricdata.Sum[int64]).DataPoints
			}
		}
	}
	if len(points) != 1 || points[0].Value != 1 {
		t.Fatalf("ejections_enforced has points %+v, want one of value 1", points)
	}
	for key, want := range map[string]string{"grpc.target": "", "grpc.lb.backend_service": "c",
		"grpc.lb.outlier_detection.detection_method": "consecutive_5xx"} {
		if v, ok := points[0].Attributes.Value(attribute.Key(key)); !ok || v.AsString() != want {
			t.Errorf("attribute %s = %q (present: %v), want %q", key, v.Emit(), ok, want)
		}
	}
}
