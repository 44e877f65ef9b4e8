package xdsdebug

import (
	"strings"
	"time"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// treeSummary is a tracked tree as the overview lists it.
type treeSummary struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
	// Listener, RouteConfig and VirtualHost name the parts of the latest
	// snapshot; empty without one.
	Listener    string `json:"listener,omitempty"`
	RouteConfig string `json:"route_config,omitempty"`
	// InlineRoutes: the route configuration is the Listener's own.
	InlineRoutes    bool       `json:"inline_routes,omitempty"`
	VirtualHost     string     `json:"virtual_host,omitempty"`
	Clusters        int        `json:"clusters"`
	ClustersInError int        `json:"clusters_in_error"`
	Updates         int        `json:"updates"`
	UpdatedAt       *time.Time `json:"updated_at,omitempty"`
	// Error is the ResourceError since the latest snapshot: the tree as a
	// whole cannot be used.
	Error   string     `json:"error,omitempty"`
	ErrorAt *time.Time `json:"error_at,omitempty"`
	// AmbientError is the latest AmbientError: the snapshot stays.
	AmbientError   string     `json:"ambient_error,omitempty"`
	AmbientErrorAt *time.Time `json:"ambient_error_at,omitempty"`
}

func summarize(t *trackedTree) treeSummary {
	s := treeSummary{ID: t.id, Name: t.name, Updates: t.updates, UpdatedAt: timePtr(t.snapAt),
		Error: errText(t.resErr), AmbientError: errText(t.ambErr)}
	if t.resErr != nil {
		s.ErrorAt = timePtr(t.resErrAt)
	}
	if t.ambErr != nil {
		s.AmbientErrorAt = timePtr(t.ambErrAt)
	}
	if snap := t.snap; snap != nil {
		if snap.Listener != nil {
			s.Listener = snap.Listener.Name
			s.InlineRoutes = snap.Listener.InlineRouteConfig != nil
		}
		if snap.RouteConfig != nil {
			s.RouteConfig = snap.RouteConfig.Name
		}
		if snap.VirtualHost != nil {
			s.VirtualHost = snap.VirtualHost.Name
		}
		s.Clusters = snap.Clusters.Len()
		for _, cc := range snap.Clusters.All() {
			if cc.Err != nil {
				s.ClustersInError++
			}
		}
	}
	return s
}

// treeDetail is one tracked tree with one page of its clusters or routes.
type treeDetail struct {
	treeSummary
	Domains []string `json:"domains,omitempty"`
	// Routes counts the routes of the virtual host; SkippedRoutes those
	// left out as gRPC cannot use them.
	Routes        int    `json:"routes"`
	SkippedRoutes int    `json:"skipped_routes"`
	List          string `json:"list"`
	Filter        string `json:"filter,omitempty"`
	// ErrorsOnly: status=ERROR, clusters in error only.
	ErrorsOnly  bool         `json:"errors_only,omitempty"`
	Page        pageInfo     `json:"page"`
	ClusterRows []clusterRow `json:"clusters_page,omitempty"`
	RouteRows   []routeRow   `json:"routes_page,omitempty"`
	// Text is the tree as the watchers package prints it (list=text),
	// cut at 512 KiB if TextCut.
	Text    string `json:"text,omitempty"`
	TextCut bool   `json:"text_cut,omitempty"`
	// Cluster is the cluster= asked for, printed.
	Cluster *clusterDetail `json:"cluster,omitempty"`
}

// clusterDetail is one cluster of a tree, printed: Node for tools, Text
// for people.
type clusterDetail struct {
	Name string             `json:"name"`
	Node *watchers.TreeNode `json:"node"`
	Text string             `json:"-"`
	// EDSService names the endpoints resource of an EDS cluster.
	EDSService string `json:"eds_service_name,omitempty"`
}

func (h *Handler) tree(q query) (treeDetail, error) {
	h.mu.Lock()
	var t *trackedTree
	for _, o := range h.trees {
		if o.id == q.tree {
			c := *o
			t = &c
		}
	}
	h.mu.Unlock()
	if t == nil {
		return treeDetail{}, notFound("tree: no tree %d on the page (untracked, or never tracked)", q.tree)
	}
	d := treeDetail{treeSummary: summarize(t), List: q.list, Filter: q.q, ErrorsOnly: q.status == "ERROR"}
	if q.status != "" && q.status != "ERROR" {
		return d, badRequest("status: a tree's clusters have no status but ERROR, got %q", q.status)
	}
	snap := t.snap
	if snap == nil {
		_, _, d.Page = paginate(q, 0)
		return d, nil
	}
	if vh := snap.VirtualHost; vh != nil {
		d.Domains, d.Routes, d.SkippedRoutes = vh.Domains, len(vh.Routes), len(vh.SkippedRoutes)
	}
	if q.cluster != "" {
		node, text, ok := printCluster(snap, q.cluster)
		if !ok {
			return d, notFound("cluster: no cluster %q in the tree's snapshot", q.cluster)
		}
		d.Cluster = &clusterDetail{Name: q.cluster, Node: node, Text: text}
		if c := snap.Clusters.Get(q.cluster).Cluster; c != nil && c.Kind == resources.ClusterKindEDS {
			d.Cluster.EDSService = c.EDSServiceName()
		}
	}
	if q.list == "text" {
		d.Text, d.TextCut = printTree(snap)
		_, _, d.Page = paginate(q, 0)
		return d, nil
	}
	if q.list == "routes" {
		var rows []routeRow
		if vh := snap.VirtualHost; vh != nil {
			for i, r := range vh.Routes {
				row := newRouteRow(i, r)
				if q.q == "" || strings.Contains(row.Name, q.q) || strings.Contains(row.Match, q.q) || strings.Contains(row.Action, q.q) {
					rows = append(rows, row)
				}
			}
		}
		lo, hi, p := paginate(q, len(rows))
		d.Page, d.RouteRows = p, rows[lo:hi]
		return d, nil
	}
	var names []string
	for _, name := range snap.Clusters.Names() {
		if q.q != "" && !strings.Contains(name, q.q) {
			continue
		}
		if d.ErrorsOnly && snap.Clusters.Get(name).Err == nil {
			continue
		}
		names = append(names, name)
	}
	lo, hi, p := paginate(q, len(names))
	d.Page = p
	d.ClusterRows = make([]clusterRow, 0, hi-lo)
	for _, name := range names[lo:hi] {
		d.ClusterRows = append(d.ClusterRows, newClusterRow(snap.Clusters.Get(name)))
	}
	return d, nil
}
