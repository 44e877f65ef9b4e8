package main

import (
	"fmt"
	"strings"

	"github.com/goxds/xds/resources"
)

// describe prints a decoded value in one line: what a reader checks first
// (where a listener's routes come from, a cluster's kind and policy, how
// many endpoints), in the words of the resources' String methods where
// they have one (LBPolicy, DropOverload). It is validate's only printer of
// values, kept in this one file so that it becomes a call of the value
// types' own String methods as they gain them.
func describe(v resources.Resource) string {
	switch v := v.(type) {
	case *resources.Listener:
		if s := v.Server; s != nil {
			return describeServerListener(s)
		}
		return "client Listener (api_listener): " + routeSource(v.RouteConfigName, v.InlineRouteConfig) + "; HTTP filters " + filterNames(v.HTTPFilters)
	case *resources.RouteConfig:
		return describeRouteConfig(v)
	case *resources.Cluster:
		return describeCluster(v)
	case *resources.Endpoints:
		n := 0
		for _, l := range v.Localities {
			n += len(l.Endpoints)
		}
		s := fmt.Sprintf("%d endpoint(s) in %d locality(ies)", n, len(v.Localities))
		for _, d := range v.Drops {
			s += "; drop " + d.String()
		}
		return s
	case nil:
		return "(no value)"
	}
	return fmt.Sprintf("%T %q", v, v.ResourceName())
}

func describeServerListener(s *resources.ServerListener) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server Listener on %s:%d, %d filter chain(s)", s.Address, s.Port, len(s.FilterChains))
	chains := s.FilterChains
	if s.DefaultFilterChain != nil {
		b.WriteString(" and a default one")
		chains = append(chains[:len(chains):len(chains)], s.DefaultFilterChain)
	}
	for i, fc := range chains {
		name := fc.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		tls := "plaintext"
		if fc.Security != nil {
			tls = "TLS"
			if fc.RequireClientCert {
				tls = "mTLS"
			}
		}
		fmt.Fprintf(&b, "; chain %s: %s, %s, HTTP filters %s", name, tls, routeSource(fc.RouteConfigName, fc.InlineRouteConfig), filterNames(fc.HTTPFilters))
	}
	return b.String()
}

func routeSource(rdsName string, inline *resources.RouteConfig) string {
	if rdsName != "" {
		return fmt.Sprintf("routes from RDS %q", rdsName)
	}
	if inline != nil {
		return "inline routes (" + describeRouteConfig(inline) + ")"
	}
	return "no routes"
}

func filterNames(fs []resources.HTTPFilter) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func describeRouteConfig(rc *resources.RouteConfig) string {
	var parts []string
	for _, vh := range rc.VirtualHosts {
		p := fmt.Sprintf("virtual host %q %v: %d route(s)", vh.Name, vh.Domains, len(vh.Routes))
		if n := len(vh.SkippedRoutes); n > 0 {
			p += fmt.Sprintf(", %d skipped (unusable by gRPC)", n)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "no virtual hosts"
	}
	return strings.Join(parts, "; ") + "; clusters " + fmt.Sprint(rc.ClusterNames())
}

func describeCluster(c *resources.Cluster) string {
	var s string
	switch c.Kind {
	case resources.ClusterKindEDS:
		s = fmt.Sprintf("EDS, endpoints %q", c.EDSServiceName())
	case resources.ClusterKindLogicalDNS:
		s = fmt.Sprintf("LOGICAL_DNS %s:%d", c.DNSHost, c.DNSPort)
	case resources.ClusterKindAggregate:
		s = fmt.Sprintf("AGGREGATE of %v", c.AggregateChildren)
	default:
		s = c.Kind.String()
	}
	s += fmt.Sprintf(", lb_policy %v", c.LBPolicy)
	if c.Security != nil {
		s += ", TLS"
	}
	if c.LRSServerSelf {
		s += ", load reported to its server"
	}
	return s
}
