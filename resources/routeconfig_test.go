package resources

import (
	"reflect"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestDecodeRouteConfigRules(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(rc *routev3.RouteConfiguration)
		wantErr string
	}{
		{name: "valid"},
		{name: "no virtual hosts", edit: func(rc *routev3.RouteConfiguration) { rc.VirtualHosts = nil }},
		{name: "empty name", edit: func(rc *routev3.RouteConfiguration) { rc.Name = "" }, wantErr: "name: must not be empty"},
		{
			name:    "nil virtual host",
			edit:    func(rc *routev3.RouteConfiguration) { rc.VirtualHosts = append(rc.VirtualHosts, nil) },
			wantErr: "virtual_hosts[1].domains: must not be empty",
		},
		{
			name:    "virtual host without domains",
			edit:    func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[0].Domains = nil },
			wantErr: "virtual_hosts[0].domains: must not be empty",
		},
		{
			name: "every kind of valid domain",
			edit: func(rc *routev3.RouteConfiguration) {
				rc.VirtualHosts[0].Domains = []string{"*", "foo.com", "*.foo.com", "*foo.com", "foo.*", "foo*", "foo.com:8080"}
			},
		},
		{
			name:    "empty domain",
			edit:    func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[0].Domains = []string{"a.com", ""} },
			wantErr: "virtual_hosts[0].domains[1]: must not be empty",
		},
		{
			name:    "wildcard in the middle",
			edit:    func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[0].Domains = []string{"foo.*.com"} },
			wantErr: `virtual_hosts[0].domains[0]: "foo.*.com" has a wildcard that is neither its first nor its last character`,
		},
		{
			name:    "two wildcards",
			edit:    func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[0].Domains = []string{"*.foo.*"} },
			wantErr: `virtual_hosts[0].domains[0]: "*.foo.*" has more than one wildcard`,
		},
		{
			name:    "double star",
			edit:    func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[0].Domains = []string{"**"} },
			wantErr: "has more than one wildcard",
		},
		{
			name: "invalid route in a later virtual host",
			edit: func(rc *routev3.RouteConfiguration) {
				bad := prefixRoute("/", "c")
				bad.Match.PathSpecifier = nil
				rc.VirtualHosts = append(rc.VirtualHosts, vhost("b", []string{"b"}, prefixRoute("/", "c"), prefixRoute("/", "c"), bad))
			},
			wantErr: "virtual_hosts[1].routes[2].match: no path specifier",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := simpleRouteConfig("rc", "c")
			if tt.edit != nil {
				tt.edit(rc)
			}
			name, v, err := decodeMsg(RouteConfigType, rc)
			checkErr(t, err, tt.wantErr)
			if name != rc.GetName() {
				t.Errorf("name = %q, want %q", name, rc.GetName())
			}
			if err == nil && (v.Name != rc.GetName() || !proto.Equal(v.Raw(), rc) || len(v.VirtualHosts) != len(rc.GetVirtualHosts())) {
				t.Errorf("value = %+v does not reflect the input", v)
			}
		})
	}
}

func TestDecodeRouteConfigGarbage(t *testing.T) {
	_, _, err := RouteConfigType.DecodeTyped(nil, &anypb.Any{TypeUrl: RouteConfigTypeURL, Value: []byte{0x12, 0x05}})
	checkErr(t, err, "RouteConfiguration: unmarshal RouteConfiguration")
}

func TestDecodeRouteConfigValue(t *testing.T) {
	retry := &routev3.RetryPolicy{RetryOn: "unavailable"}
	in := routeConfig("rc",
		&routev3.VirtualHost{
			Name:        "a",
			Domains:     []string{"a.com", "*.a.com"},
			Routes:      []*routev3.Route{prefixRoute("/x", "c1"), weightedRoute("/", map[string]uint32{"c2": 1, "c3": 2}, "c2", "c3")},
			RetryPolicy: retry,

			IncludeRequestAttemptCount: true,
		},
		vhost("b", []string{"*"}, prefixRoute("", "c1")),
	)
	_, rc, err := decodeMsg(RouteConfigType, in)
	if err != nil {
		t.Fatal(err)
	}
	if rc.ResourceName() != "rc" || !proto.Equal(rc.Proto(), in) {
		t.Error("ResourceName/Proto do not reflect the value")
	}
	if len(rc.VirtualHosts) != 2 {
		t.Fatalf("got %d virtual hosts", len(rc.VirtualHosts))
	}
	a := rc.VirtualHosts[0]
	if a.Name != "a" || !reflect.DeepEqual(a.Domains, []string{"a.com", "*.a.com"}) || len(a.Routes) != 2 || !proto.Equal(a.Raw(), in.VirtualHosts[0]) {
		t.Errorf("virtual host a = %+v", a)
	}
	if a.RetryPolicy.GetRetryOn() != "unavailable" {
		t.Errorf("virtual host retry policy not kept: %v", a.RetryPolicy)
	}
	if !a.IncludeRequestAttemptCount || rc.VirtualHosts[1].IncludeRequestAttemptCount {
		t.Errorf("include_request_attempt_count: a %t, b %t; want true, false", a.IncludeRequestAttemptCount, rc.VirtualHosts[1].IncludeRequestAttemptCount)
	}
	if got, want := rc.ClusterNames(), []string{"c1", "c2", "c3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterNames = %v, want %v", got, want)
	}
}

func TestRouteConfigClusterNames(t *testing.T) {
	direct := prefixRoute("/d", "")
	direct.Action = &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 404}}
	in := routeConfig("rc",
		vhost("a", []string{"a"}, prefixRoute("/1", "zeta"), weightedRoute("/2", map[string]uint32{"alpha": 1, "zeta": 1, "off": 0}, "alpha", "zeta", "off"), direct),
		vhost("b", []string{"b"}, prefixRoute("/3", "alpha"), prefixRoute("/4", "mid")),
	)
	_, rc, err := decodeMsg(RouteConfigType, in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rc.ClusterNames(), []string{"alpha", "mid", "zeta"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterNames = %v, want %v", got, want)
	}
	empty := &RouteConfig{}
	if got := empty.ClusterNames(); len(got) != 0 {
		t.Errorf("empty ClusterNames = %v", got)
	}
}
