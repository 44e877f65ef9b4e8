package xdsdebug_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/goxds/xds/testutils"
)

// The cost of the page's views at 10,000 clusters (20,002 resources), on
// the server: the overview counts every resource, a list filters them all
// and renders one page.
func BenchmarkPage10k(b *testing.B) {
	e := newEnv(b, testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: clusterNames(10000)}), envOptions{})
	e.watchTreeWithin("svc", bigTimeout)
	for _, q := range []string{"", "?view=resources", "?view=tree&tree=1", "?view=resources&format=json"} {
		b.Run("q="+q, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/debug/xds"+q, nil)
			for b.Loop() {
				w := httptest.NewRecorder()
				e.h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", q, w.Code)
				}
			}
		})
	}
}
