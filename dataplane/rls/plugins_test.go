package rls

import (
	"errors"
	"strings"
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

// A plugin whose config a new route configuration replaces keeps its
// Policy, given the new config (its default target moves), and the set of
// Policies is unchanged; a dial that fails is the Update's error, and its
// Policy runs. Close stops every Policy, which let go of their targets,
// and an Update after it starts nothing.
func TestPluginsReplacedAndClosed(t *testing.T) {
	e := newEnv(t, keyedConfig+`}`, 0.5) // for its fakes
	dialErr := errors.New("no resolver for scheme")
	ps := NewPlugins(Options{Host: e.host, Clock: e.clock, Dial: func(target string, backToReady func()) (Lookuper, error) {
		if target == "broken:1" {
			return nil, dialErr
		}
		return e.dial(target, backToReady)
	}})
	defer ps.Close()
	route := &resources.Route{Action: resources.RouteActionRoute, ClusterSpecifierPlugin: "one"}
	snap := func(cfg string) (*resources.VirtualHost, *resources.RouteConfig) {
		vh := &resources.VirtualHost{Routes: []*resources.Route{route}}
		return vh, &resources.RouteConfig{ClusterSpecifierPlugins: map[string]resources.ClusterSpecifierConfig{"one": mustParse(t, cfg)}}
	}
	pols, changed, err := ps.Update(snap(keyedConfig + `, "defaultTarget": "P1"}`))
	if err != nil || !changed || pols["one"] == nil {
		t.Fatalf("Update: %v, changed %v, err %v; want a policy for plugin one", pols, changed, err)
	}
	pols2, changed, err := ps.Update(snap(keyedConfig + `, "defaultTarget": "P3"}`))
	if err != nil || changed || pols2 != nil {
		t.Fatalf("Update replacing plugin one's config: %v, changed %v, err %v; want the policies unchanged", pols2, changed, err)
	}
	if got := e.host.held(); got["P1"] != 0 || got["P3"] != 1 {
		t.Errorf("targets held %v after the config was replaced; want P3 and not P1", got)
	}
	broken := strings.Replace(keyedConfig, "rls.test:1", "broken:1", 1) + `}`
	if _, changed, err := ps.Update(snap(broken)); changed || !errors.Is(err, dialErr) {
		t.Errorf("Update to a lookup service that fails to dial: changed %v, err %v; want unchanged, %v", changed, err, dialErr)
	}
	ps.Close()
	if got := e.host.held(); len(got) != 0 {
		t.Errorf("targets held %v after Close; want none", got)
	}
	if pols, changed, err := ps.Update(snap(keyedConfig + `, "defaultTarget": "P4"}`)); pols != nil || changed || err != nil {
		t.Errorf("Update after Close: %v, changed %v, err %v; want nothing", pols, changed, err)
	}
	if got := e.host.held(); len(got) != 0 {
		t.Errorf("targets held %v after an Update after Close; want none", got)
	}
}
