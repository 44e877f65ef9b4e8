package watchers

import (
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/goxds/xds/resources"
)

// TreeNodeKind says what a TreeNode stands for. Its values are the words
// that begin the node's line.
type TreeNodeKind string

// The kinds of TreeNode, from the root down.
const (
	TreeListener    TreeNodeKind = "listener"
	TreeRouteConfig TreeNodeKind = "route_config"
	TreeVirtualHost TreeNodeKind = "virtual_host"
	TreeRoute       TreeNodeKind = "route"
	TreeCluster     TreeNodeKind = "cluster"
	TreeLocality    TreeNodeKind = "locality"
	TreeEndpoint    TreeNodeKind = "endpoint"
	// TreeOtherClusters holds the clusters of a snapshot that no route
	// names: those of TreeOptions.Clusters.
	TreeOtherClusters TreeNodeKind = "other_clusters"
)

// TreeNode is one element of a Snapshot as it is printed: one line, and the
// elements below it. A snapshot's tree runs listener, route_config,
// virtual_host (the one chosen), route, cluster (an aggregate cluster's
// leaves below it), locality, endpoint. [Snapshot.Tree] builds it for
// programs that show the tree their own way (an HTML page, JSON for
// scripts); [TreeNode.WriteTo] and [Snapshot.WriteTo] print it as indented
// text.
//
// A tree is a copy: it shares nothing with the snapshot, and its users may
// change it (to prune, filter or page a large tree).
type TreeNode struct {
	// Kind says what the node stands for.
	Kind TreeNodeKind `json:"kind"`
	// Name is the resource's name (listener, route_config, virtual_host,
	// cluster), the route's name, a locality's ID as text, an endpoint's
	// first address; "" when there is none.
	Name string `json:"name,omitempty"`
	// Text is the node's line after its kind: the name, quoted, then what
	// the element says (a route's match and action, a cluster's kind and
	// load balancing policy, an endpoint's health).
	Text string `json:"text,omitempty"`
	// Err is why the element cannot be used, "" if it can: a cluster's
	// ClusterConfig.Err.
	Err string `json:"error,omitempty"`
	// Children are the elements below this one, in order.
	Children []*TreeNode `json:"children,omitempty"`
}

// treeIndent is one level of a printed tree.
const treeIndent = "  "

// Line returns the node's own line, without indentation: its kind, its
// text, and its error after "  error: ".
func (n *TreeNode) Line() string {
	s := string(n.Kind)
	if n.Text != "" {
		s += " " + n.Text
	}
	if n.Err != "" {
		s += "  error: " + n.Err
	}
	return s
}

// WriteTo writes the node and everything below it to w, one line each,
// indented two spaces a level. It implements io.WriterTo.
func (n *TreeNode) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	n.appendLines(&b, 0)
	m, err := io.WriteString(w, b.String())
	return int64(m), err
}

func (n *TreeNode) appendLines(b *strings.Builder, depth int) {
	for range depth {
		b.WriteString(treeIndent)
	}
	b.WriteString(n.Line())
	b.WriteByte('\n')
	for _, c := range n.Children {
		c.appendLines(b, depth+1)
	}
}

// WriteTo prints the snapshot's tree to w, as [TreeNode.WriteTo] does. It
// implements io.WriterTo. For example:
//
//	listener "svc"
//	  route_config "svc-routes" (RDS)
//	    virtual_host "svc" domains=[svc svc.example.com]
//	      route prefix "/" -> cluster "svc-a"
//	        cluster "svc-a" EDS lb=round_robin in wrr_locality
//	          locality {region="r1" zone="z1" sub_zone=""} weight=1 priority=0
//	            endpoint 10.0.0.1:8080 HEALTHY
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) { return s.Tree().WriteTo(w) }

// String summarizes the snapshot on one line, for logs and fmt.Print:
//
//	snapshot of listener "svc": route_config "svc-routes" (RDS), virtual_host "svc", 12 clusters
//
// It costs the same whatever the size of the snapshot, because it may be
// called where nobody reads it: gRPC prints the values of a resolver
// state's attributes with their String methods (with channelz on, at every
// update), and grpcxds hands a snapshot to the channel in one. WriteTo
// prints the whole tree.
func (s *Snapshot) String() string {
	if s == nil {
		return "snapshot (nil)"
	}
	var b strings.Builder
	b.WriteString("snapshot of listener ")
	if l := s.Listener; l != nil {
		b.WriteString(strconv.Quote(l.Name))
	} else {
		b.WriteString("(none)")
	}
	b.WriteString(": route_config ")
	if rc := s.RouteConfig; rc != nil {
		b.WriteString(strconv.Quote(rc.Name))
		if l := s.Listener; l != nil && l.RouteConfigName == "" {
			b.WriteString(" (inline)")
		} else {
			b.WriteString(" (RDS)")
		}
	} else {
		b.WriteString("(none)")
	}
	b.WriteString(", virtual_host ")
	if vh := s.VirtualHost; vh != nil {
		b.WriteString(strconv.Quote(vh.Name))
	} else {
		b.WriteString("(none)")
	}
	b.WriteString(", " + strconv.Itoa(s.Clusters.Len()) + " clusters")
	return b.String()
}

// Tree returns the snapshot as a tree of TreeNodes, the listener at its
// root. A snapshot made by hand with parts missing gets "(none)" in their
// place rather than a panic.
func (s *Snapshot) Tree() *TreeNode {
	if s == nil {
		return &TreeNode{Kind: TreeListener, Text: "(none)"}
	}
	p := printer{s: s, named: make(map[string]bool)}
	return p.listener()
}

// printer builds the tree of one snapshot.
type printer struct {
	s *Snapshot
	// named holds the clusters reached from the routes, so that the others
	// (TreeOptions.Clusters) can be listed apart.
	named map[string]bool
}

func (p *printer) listener() *TreeNode {
	l := p.s.Listener
	root := &TreeNode{Kind: TreeListener, Text: "(none)"}
	if l != nil {
		root.Name, root.Text = l.Name, strconv.Quote(l.Name)
		if len(l.HTTPFilters) > 0 {
			names := make([]string, len(l.HTTPFilters))
			for i, f := range l.HTTPFilters {
				names[i] = f.Name
			}
			root.Text += " http_filters=[" + strings.Join(names, " ") + "]"
		}
	}
	root.Children = append(root.Children, p.routeConfig())
	var other []string
	for name := range p.s.Clusters.All() {
		if !p.named[name] {
			other = append(other, name)
		}
	}
	if len(other) > 0 {
		slices.Sort(other)
		group := &TreeNode{Kind: TreeOtherClusters, Text: "(named by no route)"}
		for _, name := range other {
			group.Children = append(group.Children, p.cluster(name, "", 0))
		}
		root.Children = append(root.Children, group)
	}
	return root
}

func (p *printer) routeConfig() *TreeNode {
	rc := p.s.RouteConfig
	n := &TreeNode{Kind: TreeRouteConfig, Text: "(none)"}
	if rc == nil {
		return n
	}
	source := "(RDS)"
	if l := p.s.Listener; l != nil && l.RouteConfigName == "" {
		source = "(inline)"
	}
	n.Name, n.Text = rc.Name, strconv.Quote(rc.Name)+" "+source
	if len(rc.VirtualHosts) > 1 {
		n.Text += " virtual_hosts=" + strconv.Itoa(len(rc.VirtualHosts))
	}
	n.Children = append(n.Children, p.virtualHost())
	return n
}

func (p *printer) virtualHost() *TreeNode {
	vh := p.s.VirtualHost
	n := &TreeNode{Kind: TreeVirtualHost, Text: "(none)"}
	if vh == nil {
		return n
	}
	n.Name = vh.Name
	n.Text = strconv.Quote(vh.Name) + " domains=[" + strings.Join(vh.Domains, " ") + "]"
	// Routes and skipped routes in the order received, so that a reader
	// sees where a skipped route stood. SkippedRoutes are in that order.
	routes, skipped := vh.Routes, vh.SkippedRoutes
	for i := 0; len(routes)+len(skipped) > 0; i++ {
		if len(skipped) > 0 && (skipped[0].Index <= i || len(routes) == 0) {
			n.Children = append(n.Children, skippedRoute(skipped[0]))
			skipped = skipped[1:]
			continue
		}
		n.Children = append(n.Children, p.route(routes[0]))
		routes = routes[1:]
	}
	return n
}

func skippedRoute(sr resources.SkippedRoute) *TreeNode {
	text := "#" + strconv.Itoa(sr.Index)
	if sr.Name != "" {
		text += " " + strconv.Quote(sr.Name)
	}
	return &TreeNode{Kind: TreeRoute, Name: sr.Name, Text: text + " skipped: " + sr.Reason}
}

func (p *printer) route(r *resources.Route) *TreeNode {
	var b strings.Builder
	if r.Name != "" {
		b.WriteString(strconv.Quote(r.Name) + " ")
	}
	b.WriteString(routeMatch(r))
	b.WriteString(" -> ")
	n := &TreeNode{Kind: TreeRoute, Name: r.Name}
	switch {
	case r.Action != resources.RouteActionRoute:
		b.WriteString(r.Action.String())
	case r.Cluster != "":
		b.WriteString("cluster " + strconv.Quote(r.Cluster))
		n.Children = append(n.Children, p.cluster(r.Cluster, "", 0))
	case len(r.WeightedClusters) > 0:
		b.WriteString("weighted_clusters")
		for _, wc := range r.WeightedClusters {
			n.Children = append(n.Children, p.cluster(wc.Name, " weight="+strconv.FormatUint(uint64(wc.Weight), 10), 0))
		}
	case r.ClusterSpecifierPlugin != "":
		// The plugin picks a cluster per request; those in use are the
		// snapshot's other clusters.
		b.WriteString("cluster_specifier_plugin " + strconv.Quote(r.ClusterSpecifierPlugin))
	default:
		b.WriteString("no cluster")
	}
	n.Text = b.String()
	return n
}

// routeMatch describes what a route matches, in the words of the xDS
// configuration: the path matcher, then headers, query parameters and the
// runtime fraction when there are any.
func routeMatch(r *resources.Route) string {
	var s string
	switch r.PathMatch {
	case resources.PathMatchExact:
		s = "path " + strconv.Quote(r.Path)
	case resources.PathMatchRegex:
		s = "safe_regex " + strconv.Quote(r.RegexPattern())
	default:
		s = "prefix " + strconv.Quote(r.Prefix)
	}
	if r.CaseInsensitive && r.PathMatch != resources.PathMatchRegex {
		s += " case_insensitive"
	}
	for _, h := range r.Headers {
		s += " header(" + h.String() + ")"
	}
	for _, q := range r.QueryParameters {
		s += " query_parameter(" + q.Name() + ")"
	}
	if r.RuntimeFraction >= 0 && r.RuntimeFraction < 1000000 {
		s += " runtime_fraction=" + strconv.FormatFloat(float64(r.RuntimeFraction)/10000, 'g', -1, 64) + "%"
	}
	return s
}

// cluster describes the named cluster of the snapshot, extra after its
// name (a weight), with its localities and endpoints, or an aggregate
// cluster's leaves, below it. depth counts the aggregate clusters above
// it: leaves are clusters of their own kinds, so this never recurses far,
// but a hand-made snapshot whose leaves lead back must not loop.
func (p *printer) cluster(name, extra string, depth int) *TreeNode {
	p.named[name] = true
	n := &TreeNode{Kind: TreeCluster, Name: name, Text: strconv.Quote(name) + extra}
	cc := p.s.Clusters.Get(name)
	if cc == nil {
		n.Err = "not in the snapshot"
		return n
	}
	if cc.Err != nil {
		n.Err = cc.Err.Error()
	}
	c := cc.Cluster
	if c == nil {
		return n
	}
	switch c.Kind {
	case resources.ClusterKindEDS:
		n.Text += " EDS"
		if svc := c.EDSServiceName(); svc != c.Name {
			n.Text += " service_name=" + strconv.Quote(svc)
		}
	case resources.ClusterKindLogicalDNS:
		n.Text += " LOGICAL_DNS " + cc.DNSAddress
	case resources.ClusterKindAggregate:
		n.Text += " AGGREGATE [" + strings.Join(c.AggregateChildren, " ") + "]"
	default:
		n.Text += " " + c.Kind.String()
	}
	if c.Security != nil {
		n.Text += " tls"
	}
	if e := cc.Endpoints; e != nil {
		if len(e.Drops) > 0 {
			drops := make([]string, len(e.Drops))
			for i, d := range e.Drops {
				drops[i] = d.String()
			}
			n.Text += " drops=[" + strings.Join(drops, " ") + "]"
		}
		for _, loc := range e.Localities {
			n.Children = append(n.Children, locality(loc))
		}
	}
	// Last: the policy's text has spaces of its own.
	if c.Kind != resources.ClusterKindAggregate {
		n.Text += " lb=" + c.LBPolicy.String()
	}
	if depth < MaxAggregateDepth {
		for _, leaf := range cc.Leaves {
			n.Children = append(n.Children, p.cluster(leaf, "", depth+1))
		}
	}
	return n
}

func locality(loc resources.Locality) *TreeNode {
	id := loc.ID.String()
	n := &TreeNode{
		Kind: TreeLocality,
		Name: id,
		Text: id + " weight=" + strconv.FormatUint(uint64(loc.Weight), 10) +
			" priority=" + strconv.FormatUint(uint64(loc.Priority), 10),
	}
	if loc.EndpointCollection != "" {
		n.Text += " collection=" + strconv.Quote(loc.EndpointCollection)
	}
	for _, ep := range loc.Endpoints {
		name := ""
		if len(ep.Addresses) > 0 {
			name = ep.Addresses[0]
		}
		n.Children = append(n.Children, &TreeNode{Kind: TreeEndpoint, Name: name, Text: ep.String()})
	}
	return n
}
