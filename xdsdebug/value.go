package xdsdebug

// This file is the whole of how the page renders resource values: the
// cluster and route cells of a tree, a tree or one of its clusters as
// text (the watchers package's printer, Snapshot.Tree), and the value of
// one resource (protojson).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// clusterRow is one cluster of a tree.
type clusterRow struct {
	Name string `json:"name"`
	// Kind is EDS, LOGICAL_DNS or AGGREGATE; "" when the Cluster itself
	// could not be had.
	Kind string `json:"kind,omitempty"`
	// Target is what the cluster sends to: the EDS service name, the DNS
	// host:port, or the aggregate's leaves.
	Target     string   `json:"target,omitempty"`
	Leaves     []string `json:"leaves,omitempty"`
	Localities int      `json:"localities"`
	Endpoints  int      `json:"endpoints"`
	Error      string   `json:"error,omitempty"`
}

func newClusterRow(cc *watchers.ClusterConfig) clusterRow {
	r := clusterRow{Name: cc.Name, Leaves: cc.Leaves, Error: errText(cc.Err)}
	if cl := cc.Cluster; cl != nil {
		r.Kind = cl.Kind.String()
		switch cl.Kind {
		case resources.ClusterKindEDS:
			r.Target = cl.EDSServiceName()
		case resources.ClusterKindLogicalDNS:
			r.Target = cc.DNSAddress
		case resources.ClusterKindAggregate:
			r.Target = strings.Join(cc.Leaves, ", ")
		}
	}
	if eps := cc.Endpoints; eps != nil {
		r.Localities = len(eps.Localities)
		for _, l := range eps.Localities {
			r.Endpoints += len(l.Endpoints)
		}
	}
	return r
}

// routeRow is one route of a tree's virtual host.
type routeRow struct {
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	// Match is the path matcher, with the number of header and query
	// matchers beside it.
	Match string `json:"match"`
	// Action is where the route sends requests.
	Action string `json:"action"`
	// Clusters are the clusters it may send to, for links.
	Clusters []string `json:"clusters,omitempty"`
}

func newRouteRow(i int, r *resources.Route) routeRow {
	row := routeRow{Index: i, Name: r.Name}
	switch r.PathMatch {
	case resources.PathMatchPrefix:
		row.Match = "prefix " + strconv.Quote(r.Prefix)
	case resources.PathMatchExact:
		row.Match = "path " + strconv.Quote(r.Path)
	case resources.PathMatchRegex:
		row.Match = "regex " + strconv.Quote(r.RegexPattern())
	default:
		row.Match = r.PathMatch.String()
	}
	if r.CaseInsensitive {
		row.Match += " (case-insensitive)"
	}
	if n := len(r.Headers); n > 0 {
		row.Match += fmt.Sprintf(", %d header matcher(s)", n)
	}
	if n := len(r.QueryParameters); n > 0 {
		row.Match += fmt.Sprintf(", %d query matcher(s)", n)
	}
	if r.RuntimeFraction >= 0 {
		row.Match += fmt.Sprintf(", %d ppm of requests", r.RuntimeFraction)
	}
	switch {
	case r.Action != resources.RouteActionRoute:
		row.Action = r.Action.String()
	case r.Cluster != "":
		row.Action = "cluster " + r.Cluster
		row.Clusters = []string{r.Cluster}
	case len(r.WeightedClusters) > 0:
		var parts []string
		for i, wc := range r.WeightedClusters {
			if i < maxWeightedShown {
				parts = append(parts, fmt.Sprintf("%s (%d)", wc.Name, wc.Weight))
			}
			row.Clusters = append(row.Clusters, wc.Name)
		}
		row.Action = "weighted: " + strings.Join(parts, ", ")
		if n := len(r.WeightedClusters); n > maxWeightedShown {
			row.Action += fmt.Sprintf(", and %d more (the tree's clusters list them all)", n-maxWeightedShown)
		}
	case r.ClusterSpecifierPlugin != "":
		row.Action = "cluster specifier plugin " + r.ClusterSpecifierPlugin
	default:
		row.Action = r.Action.String()
	}
	if r.Timeout != nil {
		row.Action += ", timeout " + r.Timeout.String()
	}
	return row
}

// maxWeightedShown is how many clusters of weighted_clusters a route's
// action names: one route may split traffic over 10,000 clusters.
const maxWeightedShown = 50

// maxValueHTML is the most of one value's JSON an HTML page shows: a
// route configuration may be megabytes (the JSON view has it all).
const maxValueHTML = 512 << 10

// valueJSON is v, a serialized resource, as indented protojson, or why it
// cannot be shown.
func valueJSON(v *anypb.Any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	m, err := v.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("cannot read the value (%s): %w", v.GetTypeUrl(), err)
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("cannot print the value (%s): %w", v.GetTypeUrl(), err)
	}
	return b, nil
}

// cutValue is a value's JSON as an HTML page shows it: Text, cut at
// maxValueHTML if Cut.
type cutValue struct {
	Text string
	Cut  bool
}

func valueText(raw json.RawMessage) cutValue {
	if len(raw) > maxValueHTML {
		return cutValue{string(raw[:maxValueHTML]), true}
	}
	return cutValue{string(raw), false}
}

// printTree is the snapshot as the watchers package prints it, cut at
// maxValueHTML: at 10,000 clusters the whole is megabytes.
func printTree(s *watchers.Snapshot) (text string, cut bool) {
	var b strings.Builder
	s.Tree().WriteTo(&b)
	if b.Len() > maxValueHTML {
		return b.String()[:maxValueHTML], true
	}
	return b.String(), false
}

// printCluster is the tree of the cluster name of s, as the watchers
// package prints it: its kind, policy, localities and endpoints, or an
// aggregate's leaves. It prints a snapshot of that cluster and its leaves
// alone, so that it costs what the cluster costs, not what the tree does.
func printCluster(s *watchers.Snapshot, name string) (*watchers.TreeNode, string, bool) {
	cc := s.Clusters.Get(name)
	if cc == nil {
		return nil, "", false
	}
	part := map[string]*watchers.ClusterConfig{name: cc}
	for _, leaf := range cc.Leaves {
		if l := s.Clusters.Get(leaf); l != nil {
			part[leaf] = l
		}
	}
	root := (&watchers.Snapshot{Clusters: watchers.NewClusterMap(part)}).Tree()
	for _, group := range root.Children {
		if group.Kind != watchers.TreeOtherClusters {
			continue
		}
		for _, n := range group.Children {
			if n.Name == name {
				var b strings.Builder
				n.WriteTo(&b)
				return n, b.String(), true
			}
		}
	}
	return nil, "", false
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
