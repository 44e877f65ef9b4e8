package resources

import (
	"errors"
	"reflect"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

func scopeKeyOf(fragments ...string) *routev3.ScopedRouteConfiguration_Key {
	k := &routev3.ScopedRouteConfiguration_Key{}
	for _, f := range fragments {
		k.Fragments = append(k.Fragments, &routev3.ScopedRouteConfiguration_Key_Fragment{
			Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: f},
		})
	}
	return k
}

func scopedRoute(name, rc string, fragments ...string) *routev3.ScopedRouteConfiguration {
	return &routev3.ScopedRouteConfiguration{Name: name, RouteConfigurationName: rc, Key: scopeKeyOf(fragments...)}
}

func TestDecodeScopedRouteConfigRules(t *testing.T) {
	inline := func(rc *routev3.RouteConfiguration) func(s *routev3.ScopedRouteConfiguration) {
		return func(s *routev3.ScopedRouteConfiguration) { s.RouteConfigurationName, s.RouteConfiguration = "", rc }
	}
	tests := []struct {
		name    string
		edit    func(s *routev3.ScopedRouteConfiguration)
		wantErr string
	}{
		{name: "route configuration by name"},
		{name: "empty name", edit: func(s *routev3.ScopedRouteConfiguration) { s.Name = "" }, wantErr: "name: must not be empty"},
		{name: "on demand", edit: func(s *routev3.ScopedRouteConfiguration) { s.OnDemand = true }},
		{name: "no route configuration", edit: func(s *routev3.ScopedRouteConfiguration) { s.RouteConfigurationName = "" },
			wantErr: "route_configuration_name: must not be empty (or give an inline route_configuration)"},
		{name: "inline route configuration", edit: inline(simpleRouteConfig("inline", "c"))},
		{name: "inline route configuration without a name", edit: inline(simpleRouteConfig("", "c"))},
		{name: "invalid inline route configuration", edit: inline(routeConfig("rc", vhost("vh", nil, prefixRoute("/", "c")))),
			wantErr: "route_configuration.virtual_hosts[0].domains: must not be empty"},
		{name: "inline route configuration with a bad route", edit: func(s *routev3.ScopedRouteConfiguration) {
			rc := simpleRouteConfig("rc", "c")
			rc.VirtualHosts[0].Routes[0].Match = nil
			inline(rc)(s)
		}, wantErr: "route_configuration.virtual_hosts[0].routes[0].match: missing"},
		{name: "name and inline route configuration", edit: func(s *routev3.ScopedRouteConfiguration) {
			s.RouteConfiguration = simpleRouteConfig("inline", "c")
		}, wantErr: "route_configuration: set with route_configuration_name (want one of them)"},
		{name: "no key", edit: func(s *routev3.ScopedRouteConfiguration) { s.Key = nil }, wantErr: "key: missing"},
		{name: "no fragments", edit: func(s *routev3.ScopedRouteConfiguration) { s.Key = scopeKeyOf() },
			wantErr: "key.fragments: must not be empty"},
		{name: "several fragments", edit: func(s *routev3.ScopedRouteConfiguration) { s.Key = scopeKeyOf("a", "b", "c") }},
		{name: "empty string fragment", edit: func(s *routev3.ScopedRouteConfiguration) { s.Key = scopeKeyOf("a", "") }},
		{name: "fragment without a type", edit: func(s *routev3.ScopedRouteConfiguration) {
			s.Key.Fragments = append(s.Key.Fragments, &routev3.ScopedRouteConfiguration_Key_Fragment{})
		}, wantErr: "key.fragments[1]: no string_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scopedRoute("scope", "rc", "172.10.10.20")
			if tt.edit != nil {
				tt.edit(s)
			}
			name, v, err := decodeMsg(ScopedRouteConfigType, s)
			checkErr(t, err, tt.wantErr)
			if name != s.GetName() {
				t.Errorf("name = %q, want %q", name, s.GetName())
			}
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("error %v does not wrap a *FieldError", err)
				}
				return
			}
			if v.Name != "scope" || v.Raw == nil || v.OnDemand != s.GetOnDemand() || len(v.Key) != len(s.GetKey().GetFragments()) ||
				(v.RouteConfigName == "") == (v.InlineRouteConfig == nil) {
				t.Errorf("value = %+v does not reflect the input", v)
			}
		})
	}
}

func TestDecodeScopedRouteConfigValue(t *testing.T) {
	in := scopedRoute("scope", "route-config1", "vip", "172.10.10.20")
	in.OnDemand = true
	_, s, err := decodeMsg(ScopedRouteConfigType, in)
	if err != nil {
		t.Fatal(err)
	}
	if s.ResourceName() != "scope" || s.Proto() != s.Raw || s.RouteConfigName != "route-config1" ||
		s.InlineRouteConfig != nil || !s.OnDemand || !reflect.DeepEqual(s.Key, []string{"vip", "172.10.10.20"}) {
		t.Errorf("scoped route config = %+v", s)
	}

	in = scopedRoute("inline-scope", "", "k")
	in.RouteConfiguration = simpleRouteConfig("inline", "c1")
	_, s, err = decodeMsg(ScopedRouteConfigType, in)
	if err != nil {
		t.Fatal(err)
	}
	if s.RouteConfigName != "" || s.InlineRouteConfig == nil || s.InlineRouteConfig.Name != "inline" {
		t.Fatalf("inline scope = %+v", s)
	}
	if got := s.InlineRouteConfig.ClusterNames(); !reflect.DeepEqual(got, []string{"c1"}) {
		t.Errorf("inline ClusterNames = %v", got)
	}
}

func TestDecodeScopedRouteConfigGarbage(t *testing.T) {
	_, _, err := ScopedRouteConfigType.DecodeTyped(nil, &anypb.Any{TypeUrl: ScopedRouteConfigTypeURL, Value: []byte{0x1a, 0x05}})
	checkErr(t, err, "ScopedRouteConfiguration: unmarshal ScopedRouteConfiguration")
	_, _, err = ScopedRouteConfigType.DecodeTyped(nil, &anypb.Any{TypeUrl: RouteConfigTypeURL})
	checkErr(t, err, `want "`+ScopedRouteConfigTypeURL+`"`)
}
