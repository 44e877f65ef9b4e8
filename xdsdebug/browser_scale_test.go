package xdsdebug_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/testutils"
)

// At 10,000 clusters (20,002 resources) no page grows with the
// configuration: lists are paged, the overview counts. Each page is
// served and rendered by Chromium in bounded time, and the largest page
// a request can ask for (1,000 rows) stays under a megabyte. The bounds
// are generous (30 s a request; a minute for Chromium past its start),
// for a loaded machine under -race; the test logs the
// figures.
func TestBrowserTenThousandClusters(t *testing.T) {
	bin := browser(t)
	if testing.Short() {
		t.Skip("10,000 clusters: not in -short")
	}
	t.Parallel()
	const n = 10000
	e := newEnv(t, testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: clusterNames(n)}), envOptions{})
	start := time.Now()
	if s := e.watchTreeWithin("svc", bigTimeout); s == nil || s.Clusters.Len() != n {
		t.Fatalf("the tree has %v, want %d clusters", s, n)
	}
	t.Logf("the tree of %d clusters arrived in %v", n, time.Since(start).Round(time.Millisecond))

	for _, c := range []struct {
		query    string
		maxBytes int
	}{
		{"", 16 << 10},
		{"?view=resources", 128 << 10},
		{"?view=resources&limit=1000", 1 << 20},
		{"?view=resources&type=Cluster&q=cluster-09&status=ACKED", 128 << 10},
		{"?view=tree&tree=1", 128 << 10},
		{"?view=tree&tree=1&limit=1000&page=10", 1 << 20},
		{"?view=tree&tree=1&list=routes", 16 << 10}, // one route, to 10,000 weighted clusters
		{"?view=tree&tree=1&list=text", 1 << 20},    // cut at 512 KiB, escaped
		{"?view=tree&tree=1&cluster=cluster-05000", 64 << 10},
		{"?view=resources&limit=1000&format=json", 1 << 20},
		{"?view=tree&tree=1&limit=1000&format=json", 1 << 20},
	} {
		t0 := time.Now()
		code, body := e.get(c.query)
		took := time.Since(t0)
		t.Logf("GET %-55s %4d KB in %v", c.query, len(body)>>10, took.Round(time.Millisecond))
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", c.query, code)
		}
		if len(body) > c.maxBytes {
			t.Errorf("GET %s: %d bytes, more than %d", c.query, len(body), c.maxBytes)
		}
		if took > 30*time.Second {
			t.Errorf("GET %s took %v, more than 30 s", c.query, took)
		}
	}

	// Chromium's start takes seconds on its own: an empty list of the
	// same page is the baseline.
	_, dom, base := render(t, bin, e.url+"?view=tree&tree=1&q=none", 1280, 1024)
	if strings.Count(dom, `<tr class="cluster">`) != 0 {
		t.Fatalf("the baseline page has cluster rows")
	}
	img, dom, took := render(t, bin, e.url+"?view=tree&tree=1&limit=1000", 1280, 1024)
	t.Logf("Chromium: the tree's page of 1,000 of %d clusters in %v, an empty one in %v", n, took.Round(time.Millisecond), base.Round(time.Millisecond))
	if got := strings.Count(dom, `<tr class="cluster">`); got != 1000 {
		t.Errorf("Chromium's DOM has %d cluster rows, want 1000", got)
	}
	for _, want := range []string{"cluster-00000", "cluster-00999", fmt.Sprintf("rows 1–1000 of %d", n)} {
		if !strings.Contains(dom, want) {
			t.Errorf("Chromium's DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, "cluster-01000<") {
		t.Errorf("Chromium's DOM has cluster-01000, of the next page")
	}
	if l := lookAt(img); l.ink < 0.01 || l.textBands < 20 {
		t.Errorf("the screenshot shows %.2f%% ink in %d bands of text: not the table", 100*l.ink, l.textBands)
	}
	if took-base > time.Minute {
		t.Errorf("Chromium took %v for the page, %v for an empty one: more than a minute for the page", took, base)
	}
}
