package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// The JSON form of watch's events: one object per line, so that a script
// reads them as they come (jq -c, a line reader). Field names follow the
// xDS protos' where there is one.

type eventJSON struct {
	Time string `json:"time"`
	// Event is "snapshot" (a new complete tree), "resource_error" (the
	// tree cannot be had: no snapshot until it can) or "ambient_error"
	// (the last snapshot stays in force).
	Event    string        `json:"event"`
	Error    string        `json:"error,omitempty"`
	Snapshot *snapshotJSON `json:"snapshot,omitempty"`
}

type snapshotJSON struct {
	Listener    string `json:"listener"`
	RouteConfig string `json:"route_config"`
	// RouteConfigSource is "RDS" or "inline".
	RouteConfigSource string          `json:"route_config_source"`
	VirtualHost       virtualHostJSON `json:"virtual_host"`
	Routes            []routeJSON     `json:"routes"`
	Clusters          []clusterJSON   `json:"clusters"`
}

type virtualHostJSON struct {
	Name    string   `json:"name"`
	Domains []string `json:"domains"`
}

type routeJSON struct {
	Match string `json:"match"`
	// Action is the route's action (route, a non-forwarding one...).
	Action           string                `json:"action"`
	Cluster          string                `json:"cluster,omitempty"`
	WeightedClusters []weightedClusterJSON `json:"weighted_clusters,omitempty"`
	Plugin           string                `json:"cluster_specifier_plugin,omitempty"`
}

type weightedClusterJSON struct {
	Name   string `json:"name"`
	Weight uint32 `json:"weight"`
}

type clusterJSON struct {
	Name           string         `json:"name"`
	Kind           string         `json:"kind,omitempty"`
	EDSServiceName string         `json:"eds_service_name,omitempty"`
	DNSAddress     string         `json:"dns_address,omitempty"`
	Leaves         []string       `json:"leaves,omitempty"`
	Error          string         `json:"error,omitempty"`
	Localities     []localityJSON `json:"localities,omitempty"`
}

type localityJSON struct {
	Region    string         `json:"region,omitempty"`
	Zone      string         `json:"zone,omitempty"`
	SubZone   string         `json:"sub_zone,omitempty"`
	Weight    uint32         `json:"weight"`
	Priority  uint32         `json:"priority"`
	Endpoints []endpointJSON `json:"endpoints"`
}

type endpointJSON struct {
	Addresses []string `json:"addresses"`
	Health    string   `json:"health_status"`
	Weight    uint32   `json:"weight"`
}

func printEventJSON(w io.Writer, ev event) {
	out := eventJSON{Time: ev.at.UTC().Format(time.RFC3339Nano)}
	switch {
	case ev.ambient:
		out.Event, out.Error = "ambient_error", ev.err.Error()
	case ev.err != nil:
		out.Event, out.Error = "resource_error", ev.err.Error()
	default:
		out.Event, out.Snapshot = "snapshot", snapshotToJSON(ev.snap)
	}
	b, err := json.Marshal(out)
	if err != nil {
		// Only strings and numbers: cannot fail. Say so if it does.
		fmt.Fprintf(w, "{\"event\":\"error\",\"error\":%q}\n", err.Error())
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}

func snapshotToJSON(s *watchers.Snapshot) *snapshotJSON {
	out := &snapshotJSON{
		Listener:          s.Listener.Name,
		RouteConfig:       s.RouteConfig.Name,
		RouteConfigSource: "inline",
		VirtualHost:       virtualHostJSON{Name: s.VirtualHost.Name, Domains: s.VirtualHost.Domains},
		Routes:            []routeJSON{},
		Clusters:          []clusterJSON{},
	}
	if s.Listener.RouteConfigName != "" {
		out.RouteConfigSource = "RDS"
	}
	for _, r := range s.VirtualHost.Routes {
		rj := routeJSON{Match: pathMatch(r), Action: fmt.Sprint(r.Action), Cluster: r.Cluster, Plugin: r.ClusterSpecifierPlugin}
		for _, wc := range r.WeightedClusters {
			rj.WeightedClusters = append(rj.WeightedClusters, weightedClusterJSON{Name: wc.Name, Weight: wc.Weight})
		}
		out.Routes = append(out.Routes, rj)
	}
	for _, name := range s.Clusters.Names() {
		out.Clusters = append(out.Clusters, clusterToJSON(s.Clusters.Get(name)))
	}
	return out
}

func clusterToJSON(cc *watchers.ClusterConfig) clusterJSON {
	out := clusterJSON{Name: cc.Name, DNSAddress: cc.DNSAddress, Leaves: cc.Leaves}
	if cc.Err != nil {
		out.Error = cc.Err.Error()
	}
	if c := cc.Cluster; c != nil {
		out.Kind = c.Kind.String()
		if c.Kind == resources.ClusterKindEDS {
			out.EDSServiceName = c.EDSServiceName()
		}
	}
	if cc.Endpoints != nil {
		for _, loc := range cc.Endpoints.Localities {
			lj := localityJSON{Region: loc.ID.Region, Zone: loc.ID.Zone, SubZone: loc.ID.SubZone, Weight: loc.Weight, Priority: loc.Priority, Endpoints: []endpointJSON{}}
			for _, ep := range loc.Endpoints {
				lj.Endpoints = append(lj.Endpoints, endpointJSON{Addresses: ep.Addresses, Health: fmt.Sprint(ep.HealthStatus), Weight: ep.Weight})
			}
			out.Localities = append(out.Localities, lj)
		}
	}
	return out
}
