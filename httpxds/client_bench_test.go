package httpxds_test

import (
	"context"
	"io"
	"net/http"
	"syscall"
	"testing"

	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/metrics/promxds"
)

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkClientRoundTrip is the client's cost per request against a
// plain http.Client to the same backend over loopback: a GET with a few
// headers and a small body, keep-alive over HTTP/1.1, and HTTP/2 without
// TLS (h2c, which the cluster's HttpProtocolOptions ask for). The
// httpxds case routes by a route configuration of three routes (the last
// matching), with the default 15 s route timeout, to a round-robin
// cluster of one endpoint; httpxds+connmetrics is the same with
// TransportOptions.ConnectionMetrics (promxds's collector), whose cost is
// per connection, not per request.
func BenchmarkClientRoundTrip(b *testing.B) {
	for _, proto := range []string{"http1", "h2c"} {
		h2 := proto == "h2c"
		a := newBackendWith(b, "a", func(s *http.Server) {
			s.Protocols = new(http.Protocols)
			s.Protocols.SetHTTP1(true)
			s.Protocols.SetUnencryptedHTTP2(true)
		})
		a.handler = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
		plain := &http.Transport{Protocols: new(http.Protocols), MaxIdleConnsPerHost: 100}
		if h2 {
			plain.Protocols.SetUnencryptedHTTP2(true)
		} else {
			plain.Protocols.SetHTTP1(true)
		}
		b.Cleanup(plain.CloseIdleConnections)
		e := newCEnv(b, cenvOptions{})
		em := newCEnv(b, cenvOptions{opts: func(o *httpxds.TransportOptions) {
			o.ConnectionMetrics = promxds.NewHTTPConnectionCollector()
		}})
		rc := routes("rc", toCluster(prefix("/health"), "c", nil), toCluster(prefix("/static/"), "c", nil), toCluster(prefix("/api/"), "c", nil))
		res := world(rc, map[string][]*backend{"c": {a}})
		if h2 {
			res.Clusters[0].TypedExtensionProtocolOptions = h2cOptions()
		}
		for _, e := range []*cenv{e, em} {
			e.update(res)
			e.want(e.get("/api/warm"), 200, "ok")
		}
		for _, tc := range []struct {
			name string
			rt   http.RoundTripper
			url  string
		}{
			{"plain", plain, a.srv.URL + "/api/users/42?fields=name"},
			{"httpxds", e.tr, "http://" + svcHost + "/api/users/42?fields=name"},
			{"httpxds+connmetrics", em.tr, "http://" + svcHost + "/api/users/42?fields=name"},
		} {
			b.Run(proto+"/"+tc.name, func(b *testing.B) {
				c := &http.Client{Transport: tc.rt}
				// Not e.ctx: the benchmark may outlast the tests' timeout.
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, tc.url, nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Accept", "application/json")
				req.Header.Set("User-Agent", "bench")
				req.Header.Set("X-Request-Id", "0f1e2d3c")
				b.ReportAllocs()
				cpu0 := cpuTime()
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
				// The process's CPU time, the backend's included (the same
				// for both): wall time on a shared machine says more about
				// the neighbours than about the client.
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
