package xdsdebug_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
)

// The overview shows the node, the server (connected, since when), the
// resources counted by type and status, and the tree, in HTML and JSON.
func TestOverviewShowsServersResourcesAndTrees(t *testing.T) {
	t.Parallel()
	start := time.Now()
	e := newEnv(t, testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: clusterNames(3)}), envOptions{})
	e.watchTree("svc")

	ov := waitFor(e, "", func(ov jsonOverview) bool { return len(ov.Types) == 4 })
	if ov.Node.ID != nodeID {
		t.Errorf("node id %q, want %q", ov.Node.ID, nodeID)
	}
	if len(ov.Authorities) != 1 || ov.Authorities[0].Name != "" || len(ov.Authorities[0].Servers) != 1 {
		t.Fatalf("authorities %+v, want the top-level one with one server", ov.Authorities)
	}
	s := ov.Authorities[0].Servers[0]
	if s.URI != e.ms.Address() || s.State != "connected" || !s.Current || s.Since == nil || s.Since.Before(start.Truncate(time.Second)) || s.Error != "" {
		t.Errorf("server %+v, want %s connected since the test began, current, no error", s, e.ms.Address())
	}
	want := map[string]int{resources.ListenerTypeURL: 1, resources.RouteConfigTypeURL: 1, resources.ClusterTypeURL: 3, resources.EndpointsTypeURL: 3}
	for _, tc := range ov.Types {
		if tc.Total != want[tc.TypeURL] || tc.ByStatus["ACKED"] != tc.Total || tc.Errors != 0 {
			t.Errorf("type %s: %+v, want %d, all ACKED", tc.TypeURL, tc, want[tc.TypeURL])
		}
	}
	if len(ov.Trees) != 1 || ov.Trees[0].Name != "svc" || ov.Trees[0].Clusters != 3 || ov.Trees[0].Updates != 1 {
		t.Errorf("trees %+v, want svc with 3 clusters, 1 update", ov.Trees)
	}

	code, body := e.get("")
	if code != http.StatusOK {
		t.Fatalf("GET overview: %d %s", code, body)
	}
	for _, want := range []string{
		e.ms.Address(), `class="st-connected">connected<`, `href="?view=tree&amp;tree=1"`, ">Cluster<", ">ClusterLoadAssignment<",
		`href="?status=ACKED&amp;type=type.googleapis.com%2Fenvoy.config.cluster.v3.Cluster&amp;view=resources">3<`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %s:\n%s", want, body)
		}
	}
}

// The resource list is paged and filtered on the server, and its links
// lead from page to page.
func TestResourcesPagedAndFiltered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: clusterNames(250)}), envOptions{})
	e.watchTree("svc")

	var l jsonResources
	e.getJSON("?view=resources&type=Cluster&limit=100", &l)
	if l.Page.Total != 250 || l.Page.Pages != 3 || len(l.Resources) != 100 || l.Page.Next == "" || l.Page.Prev != "" {
		t.Fatalf("first page: %+v with %d rows, want 100 of 250 on 3 pages, a next link only", l.Page, len(l.Resources))
	}
	if r := l.Resources[0]; r.Name != "cluster-00000" || r.Status != "ACKED" || r.Version == "" || r.Server != e.ms.Address() || r.Watchers != 1 {
		t.Errorf("first row %+v, want cluster-00000, ACKED with a version, from %s, 1 watcher", r, e.ms.Address())
	}
	var last jsonResources
	e.getJSON("?view=resources&type=Cluster&limit=100&page=3", &last)
	if len(last.Resources) != 50 || last.Page.Next != "" || last.Resources[49].Name != "cluster-00249" {
		t.Errorf("last page: %+v with %d rows, want the last 50, no next link", last.Page, len(last.Resources))
	}
	var second jsonResources
	e.getJSON(l.Page.Next, &second)
	if second.Page.Page != 2 || second.Resources[0].Name != "cluster-00100" {
		t.Errorf("the next link gives page %d starting at %s, want page 2 from cluster-00100", second.Page.Page, second.Resources[0].Name)
	}
	var f jsonResources
	e.getJSON("?view=resources&q=cluster-0012", &f)
	if f.Page.Total != 20 { // ten clusters and their ten endpoints
		t.Errorf("q=cluster-0012 matched %d resources, want 20", f.Page.Total)
	}
	var nacked jsonResources
	e.getJSON("?view=resources&status=nacked", &nacked)
	if nacked.Page.Total != 0 {
		t.Errorf("status=nacked matched %d resources, want none", nacked.Page.Total)
	}

	code, body := e.get("?view=resources&type=Cluster&limit=100&page=2")
	if code != http.StatusOK || strings.Count(body, `<tr class="resource">`) != 100 || !strings.Contains(body, "rows 101–200 of 250") {
		t.Errorf("HTML page 2: %d, %d rows, want 100 rows 101–200 of 250", code, strings.Count(body, `<tr class="resource">`))
	}
}

// A NACKed cluster shows its status and the error, with its value absent
// and the rejected version shown; a cluster the server does not have
// shows DOES_NOT_EXIST once its timer fires; a good one shows its value.
func TestResourceStatusErrorsAndValue(t *testing.T) {
	t.Parallel()
	res := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{"good", "bad"}})
	res.Clusters[1].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
	e := newEnv(t, res, envOptions{expiry: 300 * time.Millisecond})
	e.watchTree("svc")
	cancel := client.WatchCluster(e.c, "missing", client.WatcherFuncs[*resources.Cluster]{})
	defer cancel()

	waitFor(e, "?view=resources&status=ERROR", func(l jsonResources) bool { return l.Page.Total == 2 })
	var bad, missing, good jsonResource
	e.getJSON("?view=resource&type=Cluster&name=bad", &bad)
	if bad.Status != "NACKED" || !strings.Contains(bad.Error, "STATIC is not supported") || bad.Value != nil {
		t.Errorf("bad: %+v, want NACKED with the error and no value", bad)
	}
	e.getJSON("?view=resource&type=Cluster&name=missing", &missing)
	if missing.Status != "DOES_NOT_EXIST" || missing.Error == "" {
		t.Errorf("missing: %+v, want DOES_NOT_EXIST with an error", missing)
	}
	e.getJSON("?view=resource&type=Cluster&name=good", &good)
	var value struct{ Name, Type string }
	if err := json.Unmarshal(good.Value, &value); err != nil || good.Status != "ACKED" || value.Name != "good" || value.Type != "EDS" {
		t.Errorf("good: %+v, want ACKED with its value", good)
	}
	code, body := e.get("?view=resource&type=Cluster&name=bad")
	if code != http.StatusOK || !strings.Contains(body, `class="st-NACKED">NACKED<`) || !strings.Contains(body, "STATIC is not supported") || !strings.Contains(body, `<pre id="rejected">`) {
		t.Errorf("HTML of bad: %d\n%s", code, body)
	}
	var tr jsonTree
	e.getJSON("?view=tree&tree=1&status=ERROR", &tr)
	if tr.Page.Total != 1 || tr.ClustersPage[0].Name != "bad" || tr.ClustersPage[0].Error == "" {
		t.Errorf("tree's clusters in error: %+v, want bad alone", tr.ClustersPage)
	}
}

// Names and errors come from servers: the page escapes every one, so a
// resource named like markup shows as text.
func TestPageEscapesWhatServersSend(t *testing.T) {
	t.Parallel()
	evil := `<script>alert("x")</script><img src=x onerror=alert(1)>&amp;`
	res := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: []string{evil, "ok"}})
	res.Clusters[0].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC} // its error names it too
	e := newEnv(t, res, envOptions{})
	e.watchTree("svc")
	waitFor(e, "?view=resources&status=NACKED", func(l jsonResources) bool { return l.Page.Total == 1 })

	for _, q := range []string{"", "?view=resources", "?view=resources&q=" + "%3Cscript", "?view=tree&tree=1", "?view=tree&tree=1&list=routes", "?view=tree&tree=1&list=text",
		"?view=tree&tree=1&cluster=%3Cscript%3Ealert(%22x%22)%3C%2Fscript%3E%3Cimg+src%3Dx+onerror%3Dalert(1)%3E%26amp%3B",
		"?view=resource&type=Cluster&name=%3Cscript%3Ealert(%22x%22)%3C%2Fscript%3E%3Cimg+src%3Dx+onerror%3Dalert(1)%3E%26amp%3B"} {
		code, body := e.get(q)
		if code != http.StatusOK {
			t.Errorf("GET %q: %d %s", q, code, body)
			continue
		}
		for _, raw := range []string{"<script", "<img"} {
			if strings.Contains(body, raw) {
				t.Errorf("GET %q: the page has %s unescaped", q, raw)
			}
		}
		if q != "" && !strings.Contains(body, "&lt;script&gt;") {
			t.Errorf("GET %q: the name is not on the page, escaped", q)
		}
	}
}

// Bad requests get a clear error naming what is wrong, in the format
// asked for.
func TestBadRequestsNameTheParameter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc"}), envOptions{})
	e.watchTree("svc")
	for _, c := range []struct {
		query string
		code  int
		want  string
	}{
		{"?view=nope", 404, `view: no view "nope"`},
		{"?view=resources&page=0", 400, `page: want a whole number from 1 to`},
		{"?view=resources&limit=5000", 400, `limit: want a whole number from 1 to 1000, got "5000"`},
		{"?view=resources&limit=x", 400, `limit: want a whole number`},
		{"?view=resources&status=GOOD", 400, `status: want one of REQUESTED,`},
		{"?view=resources&type=Nope", 400, `type: no resource type "Nope" (known: `},
		{"?view=resources&q=" + strings.Repeat("x", 2000), 400, "q: the filter is 2000 bytes"},
		{"?format=xml", 400, `format: want html or json, got "xml"`},
		{"?view=resource&type=Cluster", 400, "view=resource needs type= and name="},
		{"?view=resource&type=Cluster&name=none", 404, `no type.googleapis.com/envoy.config.cluster.v3.Cluster "none" in the client's cache`},
		{"?view=tree", 400, "tree: missing"},
		{"?view=tree&tree=7", 404, "tree: no tree 7"},
		{"?view=tree&tree=1&list=nope", 400, `list: want clusters, routes or text, got "nope"`},
		{"?view=tree&tree=1&cluster=nope", 404, `cluster: no cluster "nope" in the tree's snapshot`},
		{"?view=tree&tree=1&status=ACKED", 400, "status: a tree's clusters have no status but ERROR"},
	} {
		code, body := e.get(c.query)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %.60s: %d %q, want %d with %q", c.query, code, body, c.code, c.want)
		}
		code, body = e.get(c.query + "&format=json")
		if c.query == "?format=xml" {
			continue
		}
		if code != c.code || !strings.Contains(body, `"error": `) {
			t.Errorf("GET %.60s as JSON: %d %s, want %d with an error field", c.query, code, body, c.code)
		}
	}
	resp, err := http.Post(e.url, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q; want 405, GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// With the primary server unreachable, the page says the fallback is in
// use, the primary unreachable with its error, the fallback connected.
func TestFallbackInUseShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc"}), envOptions{fallback: true})
	e.watchTree("svc")
	ov := waitFor(e, "", func(ov jsonOverview) bool { return len(ov.Authorities) == 1 && ov.Authorities[0].Current == 1 })
	a := ov.Authorities[0]
	if !a.FallbackInUse || len(a.Servers) != 2 {
		t.Fatalf("authority %+v, want the fallback in use, two servers", a)
	}
	if p := a.Servers[0]; p.State != "unreachable" || p.Error == "" || p.Since == nil || p.Current {
		t.Errorf("primary %+v, want unreachable since some time, with the error", p)
	}
	if f := a.Servers[1]; f.State != "connected" || !f.Current || f.URI != e.ms.Address() {
		t.Errorf("fallback %+v, want connected and current", f)
	}
	_, body := e.get("")
	if !strings.Contains(body, "fallback in use") || !strings.Contains(body, `class="st-unreachable">unreachable<`) {
		t.Errorf("the overview does not say the fallback is in use and the primary unreachable:\n%s", body)
	}
}

// A tree's page shows its clusters and routes; Track passes every event
// on to the service's watcher, and untrack takes the tree off the page.
// WatchTree shows a tree of the page's own until cancelled.
func TestTreesTrackedAndWatched(t *testing.T) {
	t.Parallel()
	res := testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: clusterNames(5)})
	res.Listeners = append(res.Listeners, testutils.Listener("other", "svc-route"))
	e := newEnv(t, res, envOptions{})
	s := e.watchTree("svc") // through Track, to the test's watcher
	if s == nil || s.Clusters.Len() != 5 {
		t.Fatalf("the tracked watcher got %v, want a snapshot of 5 clusters", s)
	}
	var tr jsonTree
	e.getJSON("?view=tree&tree=1&limit=2&page=2", &tr)
	if tr.Listener != "svc" || tr.RouteConfig != "svc-route" || tr.Clusters != 5 || tr.Routes != 1 || tr.Page.Total != 5 || len(tr.ClustersPage) != 2 {
		t.Fatalf("tree %+v, want svc, svc-route, a page of 2 of 5 clusters, 1 route", tr)
	}
	if c := tr.ClustersPage[0]; c.Name != "cluster-00002" || c.Kind != "EDS" || c.Target != "cluster-00002" || c.Endpoints != 1 {
		t.Errorf("cluster row %+v, want cluster-00002, EDS of itself, 1 endpoint", c)
	}
	e.getJSON("?view=tree&tree=1&list=routes", &tr)
	if len(tr.RoutesPage) != 1 || !strings.Contains(tr.RoutesPage[0].Action, "cluster-00004 (1)") || tr.RoutesPage[0].Match != `prefix "/"` {
		t.Errorf("routes %+v, want one weighted route over the five clusters", tr.RoutesPage)
	}

	// Printed by the watchers package: the tree, and one cluster.
	e.getJSON("?view=tree&tree=1&list=text", &tr)
	for _, want := range []string{`listener "svc"`, `route_config "svc-route" (RDS)`, `cluster "cluster-00004" weight=1 EDS lb=`, "endpoint 127.0.0.1:8080"} {
		if !strings.Contains(tr.Text, want) {
			t.Errorf("the tree as text lacks %q:\n%s", want, tr.Text)
		}
	}
	var cd struct {
		Cluster struct {
			Name string
			Node struct {
				Kind     string
				Text     string
				Children []struct{ Kind string }
			}
		}
	}
	e.getJSON("?view=tree&tree=1&cluster=cluster-00001", &cd)
	if n := cd.Cluster.Node; cd.Cluster.Name != "cluster-00001" || n.Kind != "cluster" || !strings.HasPrefix(n.Text, `"cluster-00001" EDS lb=`) || len(n.Children) != 1 || n.Children[0].Kind != "locality" {
		t.Errorf("cluster-00001 printed: %+v, want an EDS cluster with its locality", cd.Cluster)
	}
	if _, body := e.get("?view=tree&tree=1&cluster=cluster-00001"); !strings.Contains(body, `<pre id="cluster-tree">cluster &#34;cluster-00001&#34; EDS`) {
		t.Errorf("the HTML does not print cluster-00001:\n%s", body)
	}

	cancel := e.h.WatchTree("other", watchers.TreeOptions{})
	ov := waitFor(e, "", func(ov jsonOverview) bool { return len(ov.Trees) == 2 && ov.Trees[1].Updates == 1 })
	if ov.Trees[1].Name != "other" || ov.Trees[1].Clusters != 5 {
		t.Errorf("the page's own tree: %+v, want other with 5 clusters", ov.Trees[1])
	}
	cancel()
	cancel()
	e.getJSON("", &ov)
	if len(ov.Trees) != 1 || ov.Trees[0].Name != "svc" {
		t.Errorf("trees after cancelling the page's own: %+v, want svc alone", ov.Trees)
	}
	if code, _ := e.get("?view=tree&tree=2"); code != http.StatusNotFound {
		t.Errorf("the cancelled tree's page: %d, want 404", code)
	}
}

// Resources read from the persistence directory show as such, until a
// server sends them: a client restarted while its server is down serves
// its tree from disk, and the page says so.
func TestFromDiskShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := newEnv(t, testutils.DefaultResources(testutils.ResourceParams{ListenerName: "svc", ClusterNames: clusterNames(2)}), envOptions{persist: dir})
	first.watchTree("svc")
	var l jsonResources
	first.getJSON("?view=resources", &l)
	if l.Page.Total != 6 || l.Resources[0].FromDisk {
		t.Fatalf("first run: %+v, want 6 resources, from the server", l)
	}
	first.c.Close() // writes the files
	// The files are for the servers of the bootstrap: the restarted client
	// has the same one, down. Its port is held, never answering, so that
	// no other test's server takes it.
	addr := first.ms.Address()
	first.ms.Stop()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()

	e := newEnv(t, testutils.Resources{}, envOptions{persist: dir, noServer: true, serverURI: addr})
	e.watchTree("svc") // the server's failure may come first
	waitFor(e, "", func(ov jsonOverview) bool { return len(ov.Trees) == 1 && ov.Trees[0].Clusters == 2 })
	e.getJSON("?view=resources", &l)
	for _, r := range l.Resources {
		if !r.FromDisk || r.Status != "REQUESTED" || r.Version == "" {
			t.Errorf("%s %s: %+v, want from disk, REQUESTED, with its version", r.TypeURL, r.Name, r)
		}
	}
	_, body := e.get("?view=resource&type=Listener&name=svc")
	if !strings.Contains(body, "yes: read from the persistence directory") {
		t.Errorf("the Listener's page does not say it is from disk:\n%s", body)
	}
}
