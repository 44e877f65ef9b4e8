package resources

import (
	"errors"
	"reflect"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestDecodeVirtualHostRules(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(vh *routev3.VirtualHost)
		wantErr string
	}{
		{name: "valid"},
		{name: "empty name", edit: func(vh *routev3.VirtualHost) { vh.Name = "" }, wantErr: "name: must not be empty"},
		{name: "name without a route configuration", edit: func(vh *routev3.VirtualHost) { vh.Name = "vh" }},
		{name: "no routes", edit: func(vh *routev3.VirtualHost) { vh.Routes = nil }},
		{name: "no domains", edit: func(vh *routev3.VirtualHost) { vh.Domains = nil }, wantErr: "domains: must not be empty"},
		{name: "bad domain", edit: func(vh *routev3.VirtualHost) { vh.Domains = []string{"a.com", "a.*.com"} },
			wantErr: `domains[1]: "a.*.com" has a wildcard that is neither its first nor its last character`},
		{name: "bad route", edit: func(vh *routev3.VirtualHost) {
			bad := prefixRoute("/", "c")
			bad.Match.PathSpecifier = nil
			vh.Routes = append(vh.Routes, bad)
		}, wantErr: "routes[1].match: no path specifier"},
		{name: "bad weighted clusters", edit: func(vh *routev3.VirtualHost) {
			vh.Routes = []*routev3.Route{weightedRoute("/", map[string]uint32{"a": 0}, "a")}
		}, wantErr: "routes[0].route.weighted_clusters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vh := vhost("rc/foo.example.com", []string{"foo.example.com"}, prefixRoute("/", "c"))
			if tt.edit != nil {
				tt.edit(vh)
			}
			name, v, err := decodeMsg(VirtualHostType, vh)
			checkErr(t, err, tt.wantErr)
			if name != vh.GetName() {
				t.Errorf("name = %q, want %q", name, vh.GetName())
			}
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("error %v does not wrap a *FieldError", err)
				}
				return
			}
			if v.Name != vh.GetName() || !proto.Equal(v.Raw(), vh) || v.VirtualHost == nil ||
				len(v.VirtualHost.Routes) != len(vh.GetRoutes()) {
				t.Errorf("value = %+v does not reflect the input", v)
			}
		})
	}
}

// A VHDS virtual host decodes exactly as the same virtual host inside a
// route configuration does.
func TestDecodeVirtualHostMatchesRouteConfig(t *testing.T) {
	in := benchVirtualHost()
	_, got, err := decodeMsg(VirtualHostType, in)
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := decodeMsg(RouteConfigType, routeConfig("rc", in))
	if err != nil {
		t.Fatal(err)
	}
	want := rc.VirtualHosts[0]
	g, w := *got.VirtualHost, *want
	g.raw, w.raw = nil, nil
	if !reflect.DeepEqual(g.Domains, w.Domains) || g.Name != w.Name || len(g.Routes) != len(w.Routes) {
		t.Fatalf("VHDS virtual host %+v, in a route config %+v", g, w)
	}
	for i := range g.Routes {
		gr, wr := *g.Routes[i], *w.Routes[i]
		gr.raw, wr.raw = nil, nil
		if !reflect.DeepEqual(gr, wr) {
			t.Errorf("route %d: VHDS %+v, in a route config %+v", i, gr, wr)
		}
	}
	if FindVirtualHost([]*VirtualHost{got.VirtualHost}, "api.example.com") != got.VirtualHost {
		t.Error("FindVirtualHost does not find the VHDS virtual host by its domain")
	}
}

func TestVirtualHostResourceValue(t *testing.T) {
	tests := []struct{ name, routeConfig string }{
		{"rc/foo.example.com", "rc"},
		{"ns/rc/foo.example.com:8080", "ns/rc"},
		{"/foo", ""},
		{"vh", ""},
	}
	for _, tt := range tests {
		_, v, err := decodeMsg(VirtualHostType, vhost(tt.name, []string{"*"}))
		if err != nil {
			t.Fatal(err)
		}
		if v.ResourceName() != tt.name || !proto.Equal(v.Proto(), v.Raw()) || v.VirtualHost.Name != tt.name {
			t.Errorf("%q: ResourceName/Proto do not reflect the value", tt.name)
		}
		if got := v.RouteConfigName(); got != tt.routeConfig {
			t.Errorf("RouteConfigName(%q) = %q, want %q", tt.name, got, tt.routeConfig)
		}
	}
	if !VirtualHostType.DeltaOnly() || VirtualHostType.AllResourcesRequiredInSotW() || VirtualHostType.SupportsWildcard() {
		t.Error("VHDS type flags wrong")
	}
}

func TestDecodeVirtualHostGarbage(t *testing.T) {
	_, _, err := VirtualHostType.DecodeTyped(nil, &anypb.Any{TypeUrl: VirtualHostTypeURL, Value: []byte{0x12, 0x05}})
	checkErr(t, err, "VirtualHost: unmarshal VirtualHost")
}
