package httpxds_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/goxds/xds/testutils"
)

// BenchmarkClientRoundTripFaultFilter is BenchmarkClientRoundTrip's
// HTTP/1.1 request through a listener with the fault filter, whose abort
// is header-controlled and so never fires: what running the listener's
// filters (dataplane/httpfilter) adds to a request that goes on.
func BenchmarkClientRoundTripFaultFilter(b *testing.B) {
	a := newBackend(b, "a")
	a.handler = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	e := newCEnv(b, cenvOptions{})
	fault := &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
		ErrorType:  &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
		Percentage: &typev3.FractionalPercent{Numerator: 100},
	}}
	f := &hcmv3.HttpFilter{Name: "fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(fault)}}
	e.update(world(routes("rc", toCluster(prefix("/api/"), "c", nil)), map[string][]*backend{"c": {a}}, f))
	e.want(e.get("/api/warm"), 200, "ok")
	c := &http.Client{Transport: e.tr}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+svcHost+"/api/users/42", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
