package rls

import (
	"testing"

	"github.com/goxds/xds/resources"
)

// Plugins runs a Policy for each RLS plugin a route uses, keeps them
// while the virtual host and route configuration are the same objects or
// name the same plugins, and stops those no route uses any more.
func TestPlugins(t *testing.T) {
	e := newEnv(t, keyedConfig+`, "defaultTarget": "D1"}`, 0.5) // for its fakes
	ps := NewPlugins(Options{Host: e.host, Dial: e.dial, Clock: e.clock})
	defer ps.Close()
	cfg1 := mustParse(t, keyedConfig+`, "defaultTarget": "P1"}`)
	cfg2 := mustParse(t, keyedConfig+`, "defaultTarget": "P2"}`)
	route := func(plugin string) *resources.Route {
		return &resources.Route{Action: resources.RouteActionRoute, ClusterSpecifierPlugin: plugin}
	}
	vh := &resources.VirtualHost{Routes: []*resources.Route{route("one"), route("other"), {Action: resources.RouteActionRoute, Cluster: "c"}}}
	rc := &resources.RouteConfig{ClusterSpecifierPlugins: map[string]resources.ClusterSpecifierConfig{
		"one": cfg1, "two": cfg2, "other": "not an RLS config",
	}}
	pols, changed, err := ps.Update(vh, rc)
	if err != nil || !changed || len(pols) != 1 || pols["one"] == nil {
		t.Fatalf("Update: %v, changed %v, err %v; want a policy for plugin one alone", pols, changed, err)
	}
	if got := e.host.held(); got["P1"] != 1 || got["P2"] != 0 {
		t.Errorf("targets held %v; want P1, the default of plugin one, and not P2", got)
	}
	if _, changed, _ := ps.Update(vh, rc); changed {
		t.Error("the same virtual host and route configuration changed the policies")
	}
	vh2 := &resources.VirtualHost{Routes: []*resources.Route{route("one"), route("two")}}
	pols2, changed, err := ps.Update(vh2, rc)
	if err != nil || !changed || len(pols2) != 2 || pols2["one"] != pols["one"] {
		t.Fatalf("Update naming one and two: %v, changed %v, err %v; want one kept and two added", pols2, changed, err)
	}
	pols3, changed, _ := ps.Update(nil, nil)
	if !changed || len(pols3) != 0 {
		t.Errorf("Update to none: %v, changed %v; want no policy", pols3, changed)
	}
	if got := e.host.held(); got["P1"] != 0 || got["P2"] != 0 {
		t.Errorf("targets held %v after the plugins left; want neither P1 nor P2", got)
	}
	if _, changed, _ := ps.Update(nil, &resources.RouteConfig{}); changed {
		t.Error("a configuration without plugins, with none running, changed the policies")
	}
}
