package httpxds_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The route's timeout ends a request the same way whatever the
// application's context: one never cancelled (context.Background, its
// values), whose request carries the timeout in its own context
// (client_deadline.go), and a cancellable one, bounded by
// context.WithTimeout. A response not begun by then is Envoy's 504; a
// body that stalls past it fails its read; a quick response is untouched;
// and the application's cancellation still ends a request.
func TestClientRouteTimeoutContexts(t *testing.T) {
	const timeout = 200 * time.Millisecond
	type key struct{}
	for _, tc := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		{"background", func(*testing.T) context.Context { return context.Background() }},
		{"values", func(*testing.T) context.Context { return context.WithValue(context.Background(), key{}, "v") }},
		{"cancellable", func(t *testing.T) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			return ctx
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCEnv(t, cenvOptions{})
			a := newBackend(t, "a")
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			a.handler = func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/quick":
					io.WriteString(w, "quick")
					return
				case "/stall":
					io.WriteString(w, "part")
					w.(http.Flusher).Flush()
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			r := toCluster(prefix("/"), "c", func(ra *routev3.RouteAction) { ra.Timeout = durationpb.New(timeout) })
			e.update(world(routes("rc", r), map[string][]*backend{"c": {a}}))
			do := func(path string) (*http.Response, error) {
				req, err := http.NewRequestWithContext(tc.ctx(t), http.MethodGet, "http://"+svcHost+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				return e.hc.Do(req)
			}

			for range 3 { // and the shared timer keeps serving requests
				resp, err := do("/quick")
				if err != nil {
					t.Fatalf("GET /quick: %v", err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || err != nil || string(b) != "quick" {
					t.Fatalf("GET /quick = %d %q, %v; want 200 quick", resp.StatusCode, b, err)
				}
			}

			start := time.Now()
			resp, err := do("/slow")
			if err != nil {
				t.Fatalf("GET /slow: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if took := time.Since(start); took < timeout {
				t.Errorf("GET /slow answered after %v; want not before the route timeout %v", took, timeout)
			}
			if resp.StatusCode != 504 || !strings.Contains(string(b), "upstream request timeout: route timeout 200ms") {
				t.Errorf("GET /slow = %d %q; want 504 naming the route timeout", resp.StatusCode, b)
			}

			start = time.Now()
			resp, err = do("/stall")
			if err != nil {
				t.Fatalf("GET /stall: %v", err)
			}
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || err == nil {
				t.Errorf("GET /stall = %d %q, read error %v; want 200 and the body's read failing at the route timeout", resp.StatusCode, b, err)
			}
			if took := time.Since(start); took < timeout {
				t.Errorf("GET /stall's body ended after %v; want not before the route timeout %v", took, timeout)
			}

			if tc.name == "cancellable" {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+svcHost+"/slow", nil)
				got := make(chan error, 1)
				go func() {
					resp, err := e.hc.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					got <- err
				}()
				cancel()
				select {
				case err := <-got:
					if err == nil {
						t.Error("GET /slow with its context cancelled succeeded; want its error")
					}
				case <-time.After(20 * time.Second):
					t.Fatal("GET /slow with its context cancelled never ended")
				}
			}
		})
	}
}
