package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// indent is one level of the printed tree.
const indent = "  "

// render draws a snapshot as an indented tree, one line per element:
// listener, virtual host, routes, the clusters each route sends to
// (aggregate clusters with their leaves below them), localities and
// endpoints. A cluster that cannot be used shows its error in place.
func render(s *watchers.Snapshot) []string {
	var lines []string
	add := func(depth int, format string, args ...any) {
		lines = append(lines, strings.Repeat(indent, depth)+fmt.Sprintf(format, args...))
	}
	rcSource := "inline"
	if s.Listener.RouteConfigName != "" {
		rcSource = "RDS"
	}
	add(0, "listener %q → route config %q (%s)", s.Listener.Name, s.RouteConfig.Name, rcSource)
	add(1, "virtual host %q %v", s.VirtualHost.Name, s.VirtualHost.Domains)
	for _, r := range s.VirtualHost.Routes {
		match := pathMatch(r)
		switch {
		case r.Action != resources.RouteActionRoute:
			add(2, "route %s → %v (no cluster)", match, r.Action)
		case r.Cluster != "":
			add(2, "route %s → cluster %s", match, r.Cluster)
			renderCluster(add, s, 3, "", r.Cluster)
		default:
			add(2, "route %s → weighted clusters", match)
			for _, wc := range r.WeightedClusters {
				renderCluster(add, s, 3, strconv.FormatUint(uint64(wc.Weight), 10)+" ", wc.Name)
			}
		}
	}
	return lines
}

func pathMatch(r *resources.Route) string {
	switch r.PathMatch {
	case resources.PathMatchExact:
		return fmt.Sprintf("path %q", r.Path)
	case resources.PathMatchRegex:
		return fmt.Sprintf("regex %q", r.Regex.String())
	}
	return fmt.Sprintf("prefix %q", r.Prefix)
}

// renderCluster draws one cluster at depth, prefix before its name (a
// weight), and for an aggregate cluster its leaves below it.
func renderCluster(add func(int, string, ...any), s *watchers.Snapshot, depth int, prefix, name string) {
	cc := s.Clusters.Get(name)
	switch {
	case cc == nil: // cannot happen in a snapshot; say so rather than panic
		add(depth, "%s%s  (not in the snapshot)", prefix, name)
	case cc.Err != nil:
		add(depth, "%s%s  ERROR: %v", prefix, name, cc.Err)
	case cc.Cluster.Kind == resources.ClusterKindLogicalDNS:
		add(depth, "%s%s  LOGICAL_DNS %s", prefix, name, cc.DNSAddress)
	case cc.Cluster.Kind == resources.ClusterKindAggregate:
		add(depth, "%s%s  AGGREGATE → %v", prefix, name, cc.Leaves)
		for _, leaf := range cc.Leaves {
			renderCluster(add, s, depth+1, "", leaf)
		}
	default:
		add(depth, "%s%s  EDS %q", prefix, name, cc.Cluster.EDSServiceName())
		for _, loc := range cc.Endpoints.Localities {
			add(depth+1, "locality %s/%s  weight %d  priority %d", loc.ID.Region, loc.ID.Zone, loc.Weight, loc.Priority)
			for _, ep := range loc.Endpoints {
				add(depth+2, "%s  %v", strings.Join(ep.Addresses, ", "), ep.HealthStatus)
			}
		}
	}
}
