package xdsdebug_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/watchers"
	"github.com/goxds/xds/xdsdebug"
)

// handTree is a page of a client that has contacted no server, showing a
// tree fed by hand: a tree of three clusters, one in error, under the
// given clock. Nothing of it starts a goroutine.
func handTree(t testing.TB, clock client.Clock) (*xdsdebug.Handler, watchers.TreeWatcher) {
	b, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1", NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	h := xdsdebug.New(c, xdsdebug.Options{Clock: clock})
	tw, untrack := h.Track("hand <made>", nil)
	t.Cleanup(untrack)
	return h, tw
}

func handSnapshot() *watchers.Snapshot {
	route := &resources.Route{Prefix: "/", Action: resources.RouteActionRoute, RuntimeFraction: -1,
		WeightedClusters: []resources.WeightedCluster{{Name: "a", Weight: 1}, {Name: "b<", Weight: 2}}}
	return &watchers.Snapshot{
		Listener:    &resources.Listener{Name: "l", RouteConfigName: "rc"},
		RouteConfig: &resources.RouteConfig{Name: "rc"},
		VirtualHost: &resources.VirtualHost{Name: "vh", Domains: []string{"*"}, Routes: []*resources.Route{route}},
		Clusters: watchers.NewClusterMap(map[string]*watchers.ClusterConfig{
			"a":  {Name: "a", Cluster: &resources.Cluster{Name: "a", Kind: resources.ClusterKindLogicalDNS}, DNSAddress: "a.example:80"},
			"b<": {Name: "b<", Err: client.ErrResourceNotFound},
			"c":  {Name: "c", Cluster: &resources.Cluster{Name: "c", Kind: resources.ClusterKindAggregate, AggregateChildren: []string{"a"}}, Leaves: []string{"a"}},
		}),
	}
}

// The page's ages are told by Options.Clock: a tree updated 90 s before
// the clock's now shows so.
func TestClockTellsAges(t *testing.T) {
	clock := testutils.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	h, tw := handTree(t, clock)
	tw.Update(handSnapshot())
	clock.Advance(90 * time.Second)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	body := w.Body.String()
	if !strings.Contains(body, "03:04:05 (1m30s ago)") || !strings.Contains(body, "2030-01-02 03:05:35 UTC") {
		t.Errorf("the overview does not tell the tree's age by the clock:\n%s", body)
	}
	if !strings.Contains(body, "hand &lt;made&gt;") {
		t.Errorf("the tree's name is not shown, escaped")
	}
	// HEAD: the headers, no body; no script may run.
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodHead, "/", nil))
	if w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("HEAD: %d, %d bytes, headers %v", w.Code, w.Body.Len(), w.Header())
	}
}

// Whatever the query, the page answers 200, 400 or 404, never panics, and
// its JSON is JSON.
func FuzzQuery(f *testing.F) {
	for _, q := range []string{
		"", "view=resources&type=Cluster&status=ERROR&q=a&page=2&limit=1", "view=resource&type=Listener&name=l",
		"view=tree&tree=1&list=routes&q=%3C", "view=tree&tree=1&cluster=c", "view=tree&tree=1&list=text",
		"view=tree&tree=1&status=error&limit=1000&page=1073741824", "format=json&view=tree&tree=99", "limit=-1", "page=1e9",
		"view=tree&tree=1&cluster=b%3C&format=json", "%zz", "q=%00%ff",
	} {
		f.Add(q, false)
		f.Add(q, true)
	}
	h, tw := handTree(f, nil)
	tw.Update(handSnapshot())
	f.Fuzz(func(t *testing.T, query string, asJSON bool) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.RawQuery = query
		if asJSON {
			req.Header.Set("Accept", "application/json")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
		default:
			t.Fatalf("query %q: status %d: %s", query, w.Code, w.Body)
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("query %q: invalid JSON: %s", query, w.Body)
		}
		if w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") && strings.Contains(w.Body.String(), "<b<") {
			t.Fatalf("query %q: a name unescaped", query)
		}
	})
}
