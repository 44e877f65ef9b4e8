package xdsdebug_test

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/goxds/xds/testutils"
)

// What a person sees: the overview and a tree's page, rendered by
// Chromium, are not blank, have the header and many lines of text, show
// the healthy server in green and the rejected cluster in red; and the
// DOM Chromium built has the rows the page is about, the name from the
// server as text.
func TestBrowserShowsThePage(t *testing.T) {
	bin := browser(t)
	t.Parallel()
	names := clusterNames(20)
	names[3] = "<b>bold</b>"
	res := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: names})
	res.Clusters[3].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
	e := newEnv(t, res, envOptions{})
	e.watchTree("svc")
	waitFor(e, "?view=resources&status=NACKED", func(l jsonResources) bool { return l.Page.Total == 1 })

	doms := make(map[string]string)
	for _, c := range []struct {
		name, query string
		minBands    int
		wantRed     bool
		wantGreen   bool
	}{
		{"overview", "", 12, false, true}, // 18 seen: titles, table rows
		{"tree", "?view=tree&tree=1", 20, true, false},
	} {
		img, dom, took := render(t, bin, e.url+c.query, 1280, 1024)
		doms[c.name] = dom
		t.Logf("%s: rendered in %v (chromium's start included)", c.name, took.Round(time.Millisecond))
		if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1024 {
			t.Errorf("%s: screenshot %v, want 1280×1024", c.name, b)
		}
		l := lookAt(img)
		t.Logf("%s: %.1f%% ink, %d bands of text, header %.0f%% dark, %d red and %d green pixels", c.name, 100*l.ink, l.textBands, 100*l.headerDark, l.red, l.green)
		if l.ink < 0.01 || l.ink > 0.5 {
			t.Errorf("%s: %.2f%% of the page is ink: blank or garbled", c.name, 100*l.ink)
		}
		if l.headerDark < 0.5 {
			t.Errorf("%s: the header strip is %.0f%% dark, want the dark header bar", c.name, 100*l.headerDark)
		}
		if l.textBands < c.minBands {
			t.Errorf("%s: %d bands of text, want at least %d (tables of servers, resources, clusters)", c.name, l.textBands, c.minBands)
		}
		if c.wantGreen && l.green < 20 {
			t.Errorf("%s: %d green pixels: the connected server or the ACKED counts are not shown in green", c.name, l.green)
		}
		if c.wantRed && l.red < 20 {
			t.Errorf("%s: %d red pixels: the rejected cluster's error is not shown in red", c.name, l.red)
		}
	}

	dom := doms["tree"]
	if n := strings.Count(dom, `<tr class="cluster">`); n != 20 {
		t.Errorf("the tree's DOM has %d cluster rows, want 20", n)
	}
	if strings.Contains(dom, "<b>bold</b>") || !strings.Contains(dom, "&lt;b&gt;bold&lt;/b&gt;") {
		t.Errorf("the DOM does not have the cluster named <b>bold</b> as text")
	}
	if !strings.Contains(dom, "type: STATIC is not supported") {
		t.Errorf("the DOM lacks the rejected cluster's error")
	}
	dom = doms["overview"]
	if n := strings.Count(dom, `<tr class="server">`); n != 1 || !strings.Contains(dom, `<td class="st-connected">connected</td>`) {
		t.Errorf("the overview's DOM has %d server rows, want 1, connected", n)
	}
	if n := strings.Count(dom, `<tr class="type">`); n != 4 {
		t.Errorf("the overview's DOM has %d resource types, want 4", n)
	}
}
