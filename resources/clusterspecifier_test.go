package resources

import (
	"errors"
	"reflect"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// testPluginURL is a plugin type registered for these tests only: its
// config is the Any's value as a string, and "bad" does not parse.
const testPluginURL = "type.googleapis.com/goxds.test.ClusterPlugin"

func init() {
	err := RegisterClusterSpecifier(ClusterSpecifierType{
		Name:     "test",
		TypeURLs: []string{testPluginURL},
		ParseConfig: func(a *anypb.Any) (ClusterSpecifierConfig, error) {
			if string(a.GetValue()) == "bad" {
				return nil, errors.New("bad config")
			}
			return string(a.GetValue()), nil
		},
	})
	if err != nil {
		panic(err)
	}
}

func testPlugin(name, config string, optional bool) *routev3.ClusterSpecifierPlugin {
	p := plugin(name, testPluginURL, optional)
	p.Extension.TypedConfig.Value = []byte(config)
	return p
}

// TestClusterSpecifierPlugins holds the verdicts of gRPC's xDS client on
// route configurations whose plugins are of a registered type: such a
// plugin must parse, optional or not; a route naming it is kept and routes
// by it; only the plugins some route names are handed on.
func TestClusterSpecifierPlugins(t *testing.T) {
	tests := []struct {
		name        string
		plugins     []*routev3.ClusterSpecifierPlugin
		route       *routev3.Route
		wantErr     string
		wantPlugins map[string]ClusterSpecifierConfig
	}{
		{
			name:        "route by a plugin",
			plugins:     []*routev3.ClusterSpecifierPlugin{testPlugin("p", "cfg", false)},
			route:       routeTo("r", "/a/", viaPlugin("p")),
			wantPlugins: map[string]ClusterSpecifierConfig{"p": "cfg"},
		},
		{
			name:        "optional supported plugin",
			plugins:     []*routev3.ClusterSpecifierPlugin{testPlugin("p", "cfg", true)},
			route:       routeTo("r", "/a/", viaPlugin("p")),
			wantPlugins: map[string]ClusterSpecifierConfig{"p": "cfg"},
		},
		{
			name:    "unused plugin is not handed on",
			plugins: []*routev3.ClusterSpecifierPlugin{testPlugin("p", "cfg", false), testPlugin("q", "cfg", false)},
			route:   routeTo("r", "/a/", viaPlugin("q")),
			// p is left out.
			wantPlugins: map[string]ClusterSpecifierConfig{"q": "cfg"},
		},
		{
			name:        "two plugins of one name: the last wins",
			plugins:     []*routev3.ClusterSpecifierPlugin{testPlugin("p", "first", false), testPlugin("p", "second", false)},
			route:       routeTo("r", "/a/", viaPlugin("p")),
			wantPlugins: map[string]ClusterSpecifierConfig{"p": "second"},
		},
		{
			name:    "bad config of an optional plugin",
			plugins: []*routev3.ClusterSpecifierPlugin{testPlugin("p", "bad", true)},
			route:   routeTo("r", "/a/", viaPlugin("p")),
			wantErr: `cluster_specifier_plugins[0].extension.typed_config: test plugin "p": bad config`,
		},
		{
			name:    "bad config of an unused plugin",
			plugins: []*routev3.ClusterSpecifierPlugin{testPlugin("ok", "cfg", false), testPlugin("p", "bad", false)},
			route:   prefixRoute("/a/", "a"),
			wantErr: `cluster_specifier_plugins[1].extension.typed_config: test plugin "p": bad config`,
		},
		{
			// The rest of the action is validated as for a cluster.
			name:    "plugin route with a bad timeout",
			plugins: []*routev3.ClusterSpecifierPlugin{testPlugin("p", "cfg", false)},
			route: routeTo("r", "/a/", func(a *routev3.RouteAction) {
				viaPlugin("p")(a)
				a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(-1)}
			}),
			wantErr: "virtual_hosts[0].routes[0].route.max_stream_duration.max_stream_duration",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := routeConfig("rc", vhost("vh", []string{"*"}, tt.route, prefixRoute("/", "default")))
			m.ClusterSpecifierPlugins = tt.plugins
			_, rc, err := decodeMsg(RouteConfigType, m)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			vh := rc.VirtualHosts[0]
			if len(vh.Routes) != 2 || vh.SkippedRoutes != nil {
				t.Fatalf("routes %d, skipped %+v; want both routes kept", len(vh.Routes), vh.SkippedRoutes)
			}
			r := vh.Routes[0]
			if r.Action != RouteActionRoute || r.ClusterSpecifierPlugin != tt.route.GetRoute().GetClusterSpecifierPlugin() || r.Cluster != "" {
				t.Errorf("route = action %v, plugin %q, cluster %q", r.Action, r.ClusterSpecifierPlugin, r.Cluster)
			}
			if !reflect.DeepEqual(rc.ClusterSpecifierPlugins, tt.wantPlugins) {
				t.Errorf("ClusterSpecifierPlugins = %v, want %v", rc.ClusterSpecifierPlugins, tt.wantPlugins)
			}
			if got := rc.ClusterNames(); !reflect.DeepEqual(got, []string{"default"}) {
				t.Errorf("ClusterNames = %v, want [default]: a plugin's clusters are not known in advance", got)
			}
		})
	}
}

func TestRegisterClusterSpecifierRefuses(t *testing.T) {
	if err := RegisterClusterSpecifier(ClusterSpecifierType{Name: "x", TypeURLs: []string{testPluginURL}, ParseConfig: func(*anypb.Any) (ClusterSpecifierConfig, error) { return nil, nil }}); err == nil {
		t.Error("a second registration of a type URL was accepted")
	}
	if err := RegisterClusterSpecifier(ClusterSpecifierType{Name: "x", TypeURLs: []string{"type.googleapis.com/goxds.test.Other"}}); err == nil {
		t.Error("a type without ParseConfig was accepted")
	}
}
