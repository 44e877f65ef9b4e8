package httpxds_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A route's retry_policy through the Transport: a request an endpoint
// answers 503 is sent again, to a freshly picked endpoint, body and all,
// and each attempt carries x-envoy-attempt-count when the virtual host
// asks (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/router_filter#x-envoy-retry-on,
// #x-envoy-attempt-count). The body has no GetBody: it is replayed from
// the retry buffer.
func TestClientRetriesThroughTransport(t *testing.T) {
	for _, apiType := range []string{"", "DELTA_GRPC"} {
		t.Run("api="+apiType, func(t *testing.T) {
			e := newCEnv(t, cenvOptions{apiType: apiType})
			bad, good := newBackend(t, "bad"), newBackend(t, "good")
			bad.handler = func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
			}
			good.handler = func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				fmt.Fprintf(w, "good attempt=%s body=%s", r.Header.Get("X-Envoy-Attempt-Count"), body)
			}
			r := toCluster(prefix("/"), "c", func(ra *routev3.RouteAction) {
				ra.RetryPolicy = &routev3.RetryPolicy{
					RetryOn:      "5xx",
					NumRetries:   wrapperspb.UInt32(3),
					RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond)},
				}
			})
			rc := routes("rc", r)
			rc.VirtualHosts[0].IncludeRequestAttemptCount = true
			e.update(world(rc, map[string][]*backend{"c": {bad, good}}))

			const n = 10
			retried := 0
			for i := range n {
				payload := fmt.Sprintf("payload-%d", i)
				req, err := http.NewRequest(http.MethodPost, "http://"+svcHost+"/p", io.NopCloser(strings.NewReader(payload)))
				if err != nil {
					t.Fatal(err)
				}
				got, err := e.do(req)
				if err != nil {
					t.Fatalf("POST %d: %v", i, err)
				}
				if got.status != http.StatusOK || !strings.HasSuffix(got.body, "body="+payload) {
					t.Fatalf("POST %d: %d %q, want 200 from good with its body", i, got.status, got.body)
				}
				if !strings.HasPrefix(got.body, "good attempt=1 ") {
					retried++
				}
			}
			// Round robin over the two endpoints sends about every other
			// first attempt to bad; each of those got good on a later one.
			if bad.count() == 0 || retried != bad.count() {
				t.Errorf("bad answered %d attempts and %d requests were retried; want as many, more than 0", bad.count(), retried)
			}
		})
	}
}
