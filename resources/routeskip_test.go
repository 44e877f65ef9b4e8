package resources

import (
	"reflect"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

const rlsPluginURL = "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"

func plugin(name, typeURL string, optional bool) *routev3.ClusterSpecifierPlugin {
	return &routev3.ClusterSpecifierPlugin{
		Extension:  &corev3.TypedExtensionConfig{Name: name, TypedConfig: &anypb.Any{TypeUrl: typeURL}},
		IsOptional: optional,
	}
}

// routeTo is a route on prefix whose action's cluster specifier is cs.
func routeTo(name, prefix string, cs func(a *routev3.RouteAction)) *routev3.Route {
	r := prefixRoute(prefix, "unused")
	r.Name = name
	cs(r.GetRoute())
	return r
}

func viaPlugin(name string) func(a *routev3.RouteAction) {
	return func(a *routev3.RouteAction) {
		a.ClusterSpecifier = &routev3.RouteAction_ClusterSpecifierPlugin{ClusterSpecifierPlugin: name}
	}
}

// TestRouteSkipping holds gRFC A28's rule that a route gRPC cannot use is
// skipped, not fatal, with the verdicts of gRPC's xDS client (grpc-go's
// unmarshal_rds.go) on the same inputs. Each case's virtual host has the
// route under test, "/a/", then a route "/" to cluster "default".
func TestRouteSkipping(t *testing.T) {
	tests := []struct {
		name    string
		plugins []*routev3.ClusterSpecifierPlugin
		route   *routev3.Route
		wantErr string
		skipped string // the reason, when the route is skipped
	}{
		{
			name: "cluster_header",
			route: routeTo("r", "/a/", func(a *routev3.RouteAction) {
				a.ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
			}),
			skipped: "cluster_header is not supported",
		},
		{
			name: "inline cluster specifier plugin",
			route: routeTo("r", "/a/", func(a *routev3.RouteAction) {
				a.ClusterSpecifier = &routev3.RouteAction_InlineClusterSpecifierPlugin{
					InlineClusterSpecifierPlugin: plugin("p", "type.googleapis.com/acme.Plugin", false),
				}
			}),
			skipped: "inline_cluster_specifier_plugin is not supported",
		},
		{
			name:    "no cluster specifier",
			route:   routeTo("r", "/a/", func(a *routev3.RouteAction) { a.ClusterSpecifier = nil }),
			skipped: "no cluster specifier",
		},
		{
			name:    "optional plugin of an unknown type",
			plugins: []*routev3.ClusterSpecifierPlugin{plugin("p", "type.googleapis.com/acme.Plugin", true)},
			route:   routeTo("r", "/a/", viaPlugin("p")),
			skipped: `cluster specifier plugin "p" is optional and not supported`,
		},
		{
			// RLS is supported where grpcxds adds it to a client's
			// registry; package resources alone knows no plugin type.
			name:    "optional RLS plugin",
			plugins: []*routev3.ClusterSpecifierPlugin{plugin("rls", rlsPluginURL, true)},
			route:   routeTo("r", "/a/", viaPlugin("rls")),
			skipped: `cluster specifier plugin "rls" is optional and not supported`,
		},
		{
			// Even when no route uses it.
			name:    "required plugin of an unknown type",
			plugins: []*routev3.ClusterSpecifierPlugin{plugin("ok", "type.googleapis.com/acme.Plugin", true), plugin("p", "type.googleapis.com/acme.Plugin", false)},
			route:   prefixRoute("/a/", "a"),
			wantErr: `cluster_specifier_plugins[1].extension.typed_config: plugin "p" has unsupported type acme.Plugin and is not optional`,
		},
		{
			name:    "required plugin without a config",
			plugins: []*routev3.ClusterSpecifierPlugin{{Extension: &corev3.TypedExtensionConfig{Name: "p"}}},
			route:   prefixRoute("/a/", "a"),
			wantErr: `cluster_specifier_plugins[0].extension.typed_config: plugin "p" has unsupported type (empty type_url)`,
		},
		{
			name:    "plugin not in the list",
			plugins: []*routev3.ClusterSpecifierPlugin{plugin("p", "type.googleapis.com/acme.Plugin", true)},
			route:   routeTo("r", "/a/", viaPlugin("q")),
			wantErr: `virtual_hosts[0].routes[0].route.cluster_specifier_plugin: names "q", which is not in the route configuration's cluster_specifier_plugins`,
		},
		{
			name:    "plugin and no list",
			route:   routeTo("r", "/a/", viaPlugin("p")),
			wantErr: `routes[0].route.cluster_specifier_plugin: names "p"`,
		},
		{
			// What a skipped route would carry is not looked at.
			name: "skipped route with a bad override and a bad timeout",
			route: func() *routev3.Route {
				r := routeTo("r", "/a/", func(a *routev3.RouteAction) {
					a.ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
					a.Timeout = durationpb.New(-1)
				})
				r.TypedPerFilterConfig = map[string]*anypb.Any{"f": unknownConfig}
				return r
			}(),
			skipped: "cluster_header is not supported",
		},
		{
			// Its match and hash policies are checked first, as gRPC does.
			name: "skipped route with a bad match",
			route: func() *routev3.Route {
				r := routeTo("r", "/a/", func(a *routev3.RouteAction) { a.ClusterSpecifier = nil })
				r.Match.PathSpecifier = nil
				return r
			}(),
			wantErr: "virtual_hosts[0].routes[0].match: no path specifier",
		},
		{
			name: "skipped route with a bad hash policy",
			route: routeTo("r", "/a/", func(a *routev3.RouteAction) {
				a.ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
				a.HashPolicy = []*routev3.RouteAction_HashPolicy{headerHash("", nil)}
			}),
			wantErr: "virtual_hosts[0].routes[0].route.hash_policy[0].header.header_name: must not be empty",
		},
		{
			name:  "usable route kept",
			route: prefixRoute("/a/", "a"),
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
			if tt.skipped == "" {
				if len(vh.Routes) != 2 || vh.SkippedRoutes != nil {
					t.Fatalf("routes %d, skipped %+v; want both routes kept", len(vh.Routes), vh.SkippedRoutes)
				}
				return
			}
			want := []SkippedRoute{{Index: 0, Name: "r", Reason: tt.skipped}}
			if !reflect.DeepEqual(vh.SkippedRoutes, want) {
				t.Errorf("SkippedRoutes = %+v, want %+v", vh.SkippedRoutes, want)
			}
			if len(vh.Routes) != 1 || vh.Routes[0].Cluster != "default" || !vh.Routes[0].MatchPath("/a/M") {
				t.Errorf("routes = %+v, want only the default route", vh.Routes)
			}
			if got := rc.ClusterNames(); !reflect.DeepEqual(got, []string{"default"}) {
				t.Errorf("ClusterNames = %v, want [default]", got)
			}
		})
	}
}

// A virtual host whose routes are all skipped is valid and still chosen by
// its domains; it just has no route, so no request matches.
func TestRouteSkippingAllRoutes(t *testing.T) {
	header := routeTo("h", "/", func(a *routev3.RouteAction) {
		a.ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
	})
	m := routeConfig("rc", vhost("vh", []string{"svc"}, header, routeTo("n", "/", func(a *routev3.RouteAction) { a.ClusterSpecifier = nil })))
	_, rc, err := decodeMsg(RouteConfigType, m)
	if err != nil {
		t.Fatal(err)
	}
	vh := FindVirtualHost(rc.VirtualHosts, "svc")
	if vh == nil || len(vh.Routes) != 0 || len(vh.SkippedRoutes) != 2 || vh.SkippedRoutes[1].Index != 1 {
		t.Fatalf("virtual host = %+v, want one with no routes and two skipped", vh)
	}
	if got := rc.ClusterNames(); len(got) != 0 {
		t.Errorf("ClusterNames = %v, want none", got)
	}
}

// A virtual host that comes alone over VHDS has no plugin list to check a
// route's plugin against; the route is skipped.
func TestRouteSkippingVHDS(t *testing.T) {
	vh := vhost("rc/vh", []string{"*"}, routeTo("r", "/a/", viaPlugin("p")), prefixRoute("/", "default"))
	_, v, err := decodeMsg(VirtualHostType, vh)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.VirtualHost.Routes) != 1 || len(v.VirtualHost.SkippedRoutes) != 1 {
		t.Errorf("routes %d, skipped %+v; want the plugin route skipped", len(v.VirtualHost.Routes), v.VirtualHost.SkippedRoutes)
	}
}
