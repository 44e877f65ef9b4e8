package httpxds_test

import (
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkLoopback is one HTTP/1.1 keep-alive GET over loopback, client
// and server in the process: a plain http.Server against an httpxds
// server of the same handler (one chain, three routes, RBAC denying
// "/admin"), to put the wrapper's cost (BenchmarkServeHTTP) beside a whole
// request's.
func BenchmarkLoopback(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	run := func(b *testing.B, addr string) {
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		url := "http://" + addr + "/api/users/42"
		b.ReportAllocs()
		for b.Loop() {
			resp, err := hc.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.Run("plain", func(b *testing.B) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(lis)
		defer srv.Close()
		run(b, lis.Addr().String())
	})
	b.Run("httpxds+rbac", func(b *testing.B) {
		e := newEnv(b, envOptions{handler: h})
		e.serve(e.listener(routes("rc", serveRoute(prefix("/health")), serveRoute(prefix("/static/")), serveRoute(prefix("/api/"))), "", nil,
			rbacDenyingPrefix("/admin")))
		run(b, e.lis.Addr().String())
	})
}
