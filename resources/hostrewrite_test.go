package resources

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
)

// rewritingRoute is prefixRoute with auto_host_rewrite set to v.
func rewritingRoute(prefix, cluster string, v bool) *routev3.Route {
	r := prefixRoute(prefix, cluster)
	r.GetRoute().HostRewriteSpecifier = &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(v)}
	return r
}

// rewritingConfig has one route with auto_host_rewrite true ("/a") and
// one without ("/").
func rewritingConfig(name string) *routev3.RouteConfiguration {
	return routeConfig(name, vhost("vh", []string{"*"}, rewritingRoute("/a", "A", true), prefixRoute("/", "B")))
}

var (
	trustedServer   = &bootstrap.ServerConfig{ServerURI: "trusted:443", ServerFeatures: []string{bootstrap.FeatureTrustedXDSServer}}
	untrustedServer = &bootstrap.ServerConfig{ServerURI: "untrusted:443", ServerFeatures: []string{bootstrap.FeatureIgnoreResourceDeletion}}
)

// gRFC A81: a route's auto_host_rewrite is honoured only when the server
// that sent it is marked trusted_xds_server: from any other server, or
// none known, the route does not rewrite. Either way the value depends on
// its source when a route asks for the rewrite, and only then, whether
// the route configuration came alone, inline in a Listener (client or
// server side), in a scope or as a VHDS virtual host.
func TestAutoHostRewriteOnlyFromATrustedServer(t *testing.T) {
	contexts := []struct {
		name string
		ctx  *DecodeContext
		want bool
	}{
		{"trusted server", &DecodeContext{Server: trustedServer}, true},
		{"untrusted server", &DecodeContext{Server: untrustedServer}, false},
		{"no server known", &DecodeContext{}, false},
		{"no context", nil, false},
	}
	inlineListener := func(rc *routev3.RouteConfiguration) *listenerv3.Listener {
		return listenerWith("L", &hcmv3.HttpConnectionManager{
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
			HttpFilters:    []*hcmv3.HttpFilter{routerFilter()},
		})
	}
	serverWith := func(rc *routev3.RouteConfiguration) *listenerv3.Listener {
		hcm := serverHCM()
		hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc}
		return serverListener(&listenerv3.FilterChain{Name: "fc", Filters: []*listenerv3.Filter{hcmFilter("hcm", hcm)}})
	}
	for _, c := range contexts {
		t.Run(c.name, func(t *testing.T) {
			_, rc, err := RouteConfigType.DecodeTyped(c.ctx, toAny(rewritingConfig("R")))
			if err != nil {
				t.Fatal(err)
			}
			routes := rc.VirtualHosts[0].Routes
			if routes[0].AutoHostRewrite != c.want || routes[1].AutoHostRewrite {
				t.Errorf("AutoHostRewrite of the routes = %v, %v; want %v, false", routes[0].AutoHostRewrite, routes[1].AutoHostRewrite, c.want)
			}
			if !rc.DependsOnSource() {
				t.Error("route configuration with auto_host_rewrite: DependsOnSource false")
			}

			_, l, err := ListenerType.DecodeTyped(c.ctx, toAny(inlineListener(rewritingConfig(""))))
			if err != nil {
				t.Fatal(err)
			}
			if got := l.InlineRouteConfig.VirtualHosts[0].Routes[0].AutoHostRewrite; got != c.want || !l.DependsOnSource() {
				t.Errorf("inline: AutoHostRewrite %v, DependsOnSource %v; want %v, true", got, l.DependsOnSource(), c.want)
			}

			_, sl, err := ListenerType.DecodeTyped(c.ctx, toAny(serverWith(rewritingConfig(""))))
			if err != nil {
				t.Fatal(err)
			}
			if got := sl.Server.FilterChains[0].InlineRouteConfig.VirtualHosts[0].Routes[0].AutoHostRewrite; got != c.want || !sl.DependsOnSource() {
				t.Errorf("server listener: AutoHostRewrite %v, DependsOnSource %v; want %v, true", got, sl.DependsOnSource(), c.want)
			}

			_, vh, err := VirtualHostType.DecodeTyped(c.ctx, toAny(rewritingConfig("R").VirtualHosts[0]))
			if err != nil {
				t.Fatal(err)
			}
			if got := vh.VirtualHost.Routes[0].AutoHostRewrite; got != c.want || !vh.DependsOnSource() {
				t.Errorf("VHDS: AutoHostRewrite %v, DependsOnSource %v; want %v, true", got, vh.DependsOnSource(), c.want)
			}
		})
	}

	// Without a route asking for it (auto_host_rewrite absent or false),
	// nothing depends on the source.
	plain := routeConfig("R", vhost("vh", []string{"*"}, rewritingRoute("/a", "A", false), prefixRoute("/", "B")))
	for _, c := range contexts {
		_, rc, err := RouteConfigType.DecodeTyped(c.ctx, toAny(plain))
		if err != nil {
			t.Fatal(err)
		}
		if rc.DependsOnSource() || rc.VirtualHosts[0].Routes[0].AutoHostRewrite {
			t.Errorf("%s: auto_host_rewrite false: DependsOnSource %v, AutoHostRewrite %v; want false, false",
				c.name, rc.DependsOnSource(), rc.VirtualHosts[0].Routes[0].AutoHostRewrite)
		}
		_, l, err := ListenerType.DecodeTyped(c.ctx, toAny(inlineListener(simpleRouteConfig("", "A"))))
		if err != nil {
			t.Fatal(err)
		}
		_, rl, err := ListenerType.DecodeTyped(c.ctx, toAny(listenerWith("L", rdsHCM("R"))))
		if err != nil {
			t.Fatal(err)
		}
		if l.DependsOnSource() || rl.DependsOnSource() {
			t.Errorf("%s: Listener without auto_host_rewrite: DependsOnSource %v (inline), %v (rds); want false", c.name, l.DependsOnSource(), rl.DependsOnSource())
		}
	}
}
