package resources

import (
	"errors"
	"reflect"
	"testing"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Filter types only these tests register, under type URLs of their own.
const (
	serverOnlyURL = "type.googleapis.com/goxds.test.ServerOnly"
	pickyURL      = "type.googleapis.com/goxds.test.Picky"
)

// testFilterConfig is what the test filter types parse a config into.
type testFilterConfig struct{ override bool }

func init() {
	parse := func(override bool) func(*anypb.Any) (HTTPFilterConfig, error) {
		return func(a *anypb.Any) (HTTPFilterConfig, error) {
			if len(a.GetValue()) != 0 {
				return nil, errors.New("want an empty config")
			}
			return &testFilterConfig{override: override}, nil
		}
	}
	for _, ft := range []HTTPFilterType{
		{Name: "server-only", TypeURLs: []string{serverOnlyURL}, ParseConfig: parse(false), ParseOverride: parse(true), ServerSide: true},
		{Name: "picky", TypeURLs: []string{pickyURL}, ParseConfig: parse(false), ParseOverride: parse(true), ClientSide: true},
	} {
		if err := RegisterHTTPFilter(ft); err != nil {
			panic(err)
		}
	}
}

func TestHTTPFilterRegistry(t *testing.T) {
	for _, url := range []string{
		"type.googleapis.com/" + routerName,
		"example.com/" + routerName, // any prefix
		routerName,
	} {
		ft, ok := LookupHTTPFilter(url)
		if !ok || ft.Name != "router" || !ft.Terminal || !ft.ClientSide || ft.ParseOverride != nil {
			t.Errorf("LookupHTTPFilter(%q) = %+v, %v; want the terminal router, no overrides", url, ft, ok)
		}
	}
	if ft, ok := LookupHTTPFilter("type.googleapis.com/" + faultName); !ok || ft.Terminal || !ft.ClientSide || ft.ServerSide || ft.ParseOverride == nil {
		t.Errorf("fault filter = %+v, %v; want a client-side filter with overrides", ft, ok)
	}
	if _, ok := LookupHTTPFilter("type.googleapis.com/acme.Fault"); ok {
		t.Error("an unregistered type was found")
	}
	parse := func(*anypb.Any) (HTTPFilterConfig, error) { return nil, nil }
	tests := []struct {
		name    string
		ft      HTTPFilterType
		wantErr string
	}{
		{"no type urls", HTTPFilterType{Name: "x", ParseConfig: parse}, `HTTP filter "x" needs TypeURLs and ParseConfig`},
		{"no parser", HTTPFilterType{Name: "x", TypeURLs: []string{"type.googleapis.com/goxds.test.X"}}, "needs TypeURLs and ParseConfig"},
		{
			// The second URL is the router's under another prefix: nothing
			// of this type may be registered, not even its first URL.
			name:    "a taken url",
			ft:      HTTPFilterType{Name: "x", TypeURLs: []string{"type.googleapis.com/goxds.test.Y", "example.com/" + routerName}, ParseConfig: parse},
			wantErr: "an HTTP filter is already registered for example.com/" + routerName,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, RegisterHTTPFilter(tt.ft), tt.wantErr)
		})
	}
	if _, ok := LookupHTTPFilter("type.googleapis.com/goxds.test.Y"); ok {
		t.Error("a refused registration left a type behind")
	}
}

// TestDecodeListenerFilterTypes holds the A39 rules that depend on what a
// filter type says of itself: where it runs and whether its config parses.
func TestDecodeListenerFilterTypes(t *testing.T) {
	const path = "api_listener.api_listener.http_filters[0]"
	serverOnly := &anypb.Any{TypeUrl: serverOnlyURL}
	tests := []struct {
		name    string
		filter  *hcmv3.HttpFilter
		want    int // filters in the chain, router included
		wantErr string
	}{
		{name: "fault", filter: namedFilter("f", faultAny(nil), false), want: 2},
		{name: "optional fault", filter: namedFilter("f", faultAny(nil), true), want: 2},
		{
			name:    "server-only filter",
			filter:  namedFilter("s", serverOnly, false),
			wantErr: path + `: filter "s" of type goxds.test.ServerOnly cannot run on a gRPC client`,
		},
		{name: "optional server-only filter", filter: namedFilter("s", serverOnly, true), want: 1},
		{
			name:    "config the filter refuses",
			filter:  namedFilter("p", &anypb.Any{TypeUrl: pickyURL, Value: []byte{1}}, false),
			wantErr: path + `.typed_config: filter "p" (picky): want an empty config`,
		},
		{
			// Optional only excuses an unknown type, not a bad config.
			name:    "optional config the filter refuses",
			filter:  namedFilter("p", &anypb.Any{TypeUrl: pickyURL, Value: []byte{1}}, true),
			wantErr: path + `.typed_config: filter "p" (picky): want an empty config`,
		},
		{
			name:    "fault garbage",
			filter:  namedFilter("f", &anypb.Any{TypeUrl: "type.googleapis.com/" + faultName, Value: []byte{0xff}}, false),
			wantErr: path + `.typed_config: filter "f" (fault): unmarshal HTTPFault`,
		},
		{
			// The type inside the TypedStruct selects the filter, which
			// then gets the TypedStruct; the fault filter, like gRPC's,
			// wants its own message.
			name:    "fault in an xds typed struct",
			filter:  namedFilter("f", toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/" + faultName}), false),
			wantErr: path + `.typed_config: filter "f" (fault): holds xds.type.v3.TypedStruct, want ` + faultName,
		},
		{
			name:    "fault in a udpa typed struct",
			filter:  namedFilter("f", toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/" + faultName}), false),
			wantErr: path + `.typed_config: filter "f" (fault): holds udpa.type.v1.TypedStruct`,
		},
		{
			name:   "optional unknown in a udpa typed struct",
			filter: namedFilter("u", toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/acme.Wrapped"}), true),
			want:   1,
		},
		{
			name:    "required unknown in a udpa typed struct",
			filter:  namedFilter("u", toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/acme.Wrapped"}), false),
			wantErr: path + `.typed_config: filter "u" has unknown type acme.Wrapped and is not optional`,
		},
		{
			name:    "typed struct garbage, even optional",
			filter:  namedFilter("u", &anypb.Any{TypeUrl: "type.googleapis.com/" + typedStructName, Value: []byte{0xff}}, true),
			wantErr: path + ".typed_config: unmarshal TypedStruct",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rdsHCM("rc")
			h.HttpFilters = []*hcmv3.HttpFilter{tt.filter, routerFilter()}
			_, l, err := decodeMsg(ListenerType, listenerWith("lis", h))
			checkErr(t, err, tt.wantErr)
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("error %v does not wrap a *FieldError", err)
				}
				return
			}
			if len(l.HTTPFilters) != tt.want {
				t.Fatalf("got %d filters, want %d: %+v", len(l.HTTPFilters), tt.want, l.HTTPFilters)
			}
			for _, f := range l.HTTPFilters {
				if f.Parsed == nil {
					t.Errorf("filter %q has no parsed config", f.Name)
				}
			}
		})
	}
}

// filterConfig wraps cfg in an envoy.config.route.v3.FilterConfig.
func filterConfig(cfg *anypb.Any, optional, disabled bool) *anypb.Any {
	return toAny(&routev3.FilterConfig{Config: cfg, IsOptional: optional, Disabled: disabled})
}

func TestFilterOverrides(t *testing.T) {
	fault := faultAny(&faultv3.HTTPFault{MaxActiveFaults: wrapperspb.UInt32(3)})
	unknown := &anypb.Any{TypeUrl: "type.googleapis.com/acme.Fault"}
	wantFault := func(t *testing.T, c HTTPFilterConfig) {
		t.Helper()
		if fc, ok := c.(*FaultConfig); !ok || fc.MaxActiveFaults == nil || *fc.MaxActiveFaults != 3 {
			t.Errorf("override = %#v, want the fault config", c)
		}
	}
	tests := []struct {
		name    string
		in      map[string]*anypb.Any
		check   func(t *testing.T, got map[string]HTTPFilterConfig) // nil: want no overrides
		wantErr string                                              // after the level's path
	}{
		{name: "none", in: map[string]*anypb.Any{}},
		{
			name:  "fault",
			in:    map[string]*anypb.Any{"f": fault},
			check: func(t *testing.T, got map[string]HTTPFilterConfig) { wantFault(t, got["f"]) },
		},
		{
			name:  "fault in a FilterConfig",
			in:    map[string]*anypb.Any{"f": filterConfig(fault, false, false)},
			check: func(t *testing.T, got map[string]HTTPFilterConfig) { wantFault(t, got["f"]) },
		},
		{
			name: "disabled, with or without a config",
			in:   map[string]*anypb.Any{"a": filterConfig(nil, false, true), "b": filterConfig(unknown, false, true)},
			check: func(t *testing.T, got map[string]HTTPFilterConfig) {
				if got["a"] != (DisabledFilterOverride{}) || got["b"] != (DisabledFilterOverride{}) || len(got) != 2 {
					t.Errorf("overrides = %#v, want both disabled", got)
				}
			},
		},
		{
			// A39: the xDS client cannot tell who will use a route
			// configuration, so a server-only filter's override is parsed.
			name: "server-only filter",
			in:   map[string]*anypb.Any{"s": {TypeUrl: serverOnlyURL}},
			check: func(t *testing.T, got map[string]HTTPFilterConfig) {
				if c, ok := got["s"].(*testFilterConfig); !ok || !c.override {
					t.Errorf("override = %#v, want one parsed by ParseOverride", got["s"])
				}
			},
		},
		{name: "optional unknown left out", in: map[string]*anypb.Any{"u": filterConfig(unknown, true, false)}},
		{
			name: "optional unknown in a typed struct left out, the rest kept",
			in: map[string]*anypb.Any{
				"u": filterConfig(toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/acme.X"}), true, false),
				"f": fault,
			},
			check: func(t *testing.T, got map[string]HTTPFilterConfig) {
				if len(got) != 1 {
					t.Errorf("overrides = %#v, want only f", got)
				}
				wantFault(t, got["f"])
			},
		},
		{name: "optional without a config", in: map[string]*anypb.Any{"u": filterConfig(nil, true, false)}},
		{
			name:    "unknown",
			in:      map[string]*anypb.Any{"u": unknown},
			wantErr: `typed_per_filter_config["u"]: override for filter "u" has unknown type acme.Fault and is not optional`,
		},
		{
			name:    "unknown in a FilterConfig, not optional",
			in:      map[string]*anypb.Any{"u": filterConfig(unknown, false, false)},
			wantErr: `typed_per_filter_config["u"]: override for filter "u" has unknown type acme.Fault`,
		},
		{
			name:    "unknown in a typed struct, not optional",
			in:      map[string]*anypb.Any{"u": toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/acme.X"})},
			wantErr: `typed_per_filter_config["u"]: override for filter "u" has unknown type acme.X`,
		},
		{
			name:    "FilterConfig without a config",
			in:      map[string]*anypb.Any{"u": filterConfig(nil, false, false)},
			wantErr: `typed_per_filter_config["u"]: no config`,
		},
		{
			name:    "FilterConfig garbage",
			in:      map[string]*anypb.Any{"u": {TypeUrl: "type.googleapis.com/" + filterConfigName, Value: []byte{0xff}}},
			wantErr: `typed_per_filter_config["u"]: unmarshal FilterConfig`,
		},
		{
			name:    "router takes no override",
			in:      map[string]*anypb.Any{"r": routerFilter().GetTypedConfig()},
			wantErr: `typed_per_filter_config["r"]: filter "r" (router) does not accept overrides`,
		},
		{
			name:    "override the filter refuses, optional or not",
			in:      map[string]*anypb.Any{"p": filterConfig(&anypb.Any{TypeUrl: pickyURL, Value: []byte{1}}, true, false)},
			wantErr: `typed_per_filter_config["p"]: filter "p" (picky): want an empty config`,
		},
		{
			// Of two bad entries, the first by name is reported, every time.
			name:    "several bad entries",
			in:      map[string]*anypb.Any{"z": unknown, "b": unknown, "m": unknown},
			wantErr: `typed_per_filter_config["b"]`,
		},
	}
	// Where each level's overrides go, and the path its errors carry.
	levels := []struct {
		name string
		path string
		set  func(vh *routev3.VirtualHost, in map[string]*anypb.Any)
		get  func(rc *RouteConfig) map[string]HTTPFilterConfig
	}{
		{
			name: "virtual host",
			path: "virtual_hosts[0].",
			set:  func(vh *routev3.VirtualHost, in map[string]*anypb.Any) { vh.TypedPerFilterConfig = in },
			get:  func(rc *RouteConfig) map[string]HTTPFilterConfig { return rc.VirtualHosts[0].FilterOverrides },
		},
		{
			name: "route",
			path: "virtual_hosts[0].routes[0].",
			set:  func(vh *routev3.VirtualHost, in map[string]*anypb.Any) { vh.Routes[0].TypedPerFilterConfig = in },
			get:  func(rc *RouteConfig) map[string]HTTPFilterConfig { return rc.VirtualHosts[0].Routes[0].FilterOverrides },
		},
		{
			name: "weighted cluster",
			path: "virtual_hosts[0].routes[0].route.weighted_clusters.clusters[1].",
			set: func(vh *routev3.VirtualHost, in map[string]*anypb.Any) {
				vh.Routes[0].GetRoute().GetWeightedClusters().Clusters[1].TypedPerFilterConfig = in
			},
			get: func(rc *RouteConfig) map[string]HTTPFilterConfig {
				return rc.VirtualHosts[0].Routes[0].WeightedClusters[1].FilterOverrides
			},
		},
	}
	for _, lv := range levels {
		for _, tt := range tests {
			t.Run(lv.name+"/"+tt.name, func(t *testing.T) {
				vh := vhost("vh", []string{"*"}, weightedRoute("/", map[string]uint32{"a": 1, "b": 2}, "a", "b"))
				lv.set(vh, tt.in)
				_, rc, err := decodeMsg(RouteConfigType, routeConfig("rc", vh))
				if tt.wantErr != "" {
					checkErr(t, err, lv.path+tt.wantErr)
					return
				}
				checkErr(t, err, "")
				got := lv.get(rc)
				if tt.check == nil {
					if got != nil {
						t.Errorf("overrides = %#v, want nil", got)
					}
					return
				}
				tt.check(t, got)
			})
		}
	}
}

// An override is parsed even for a filter no listener has: the key is only
// a name (A39).
func TestFilterOverrideKeyNeedNotExist(t *testing.T) {
	vh := vhost("vh", []string{"*"}, prefixRoute("/", "c"))
	vh.TypedPerFilterConfig = map[string]*anypb.Any{"no-such-filter": faultAny(nil)}
	_, rc, err := decodeMsg(RouteConfigType, routeConfig("rc", vh))
	if err != nil {
		t.Fatal(err)
	}
	if got := reflect.TypeOf(rc.VirtualHosts[0].FilterOverrides["no-such-filter"]); got != reflect.TypeOf(&FaultConfig{}) {
		t.Errorf("override type = %v", got)
	}
}

// The most specific override naming a filter decides whether it runs and
// with what; without one the filter's own config, unless it is disabled.
func TestHTTPFilterEffectiveConfig(t *testing.T) {
	own, route, vhost := &FaultConfig{}, &FaultConfig{}, &FaultConfig{}
	off := DisabledFilterOverride{}
	levels := func(ms ...map[string]HTTPFilterConfig) []map[string]HTTPFilterConfig { return ms }
	for _, tt := range []struct {
		name      string
		disabled  bool
		overrides []map[string]HTTPFilterConfig
		want      HTTPFilterConfig
		wantOn    bool
	}{
		{name: "no override", want: own, wantOn: true},
		{name: "disabled, no override", disabled: true, want: own},
		{name: "route over virtual host", overrides: levels(nil, map[string]HTTPFilterConfig{"f": route}, map[string]HTTPFilterConfig{"f": vhost}), want: route, wantOn: true},
		{name: "virtual host", overrides: levels(map[string]HTTPFilterConfig{"g": route}, map[string]HTTPFilterConfig{"f": vhost}), want: vhost, wantOn: true},
		{name: "override switches a disabled filter on", disabled: true, overrides: levels(map[string]HTTPFilterConfig{"f": route}), want: route, wantOn: true},
		{name: "disabled override", overrides: levels(map[string]HTTPFilterConfig{"f": off}, map[string]HTTPFilterConfig{"f": vhost}), want: off},
	} {
		f := HTTPFilter{Name: "f", Parsed: own, Disabled: tt.disabled}
		got, on := f.EffectiveConfig(tt.overrides...)
		if got != tt.want || on != tt.wantOn {
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, got, on, tt.want, tt.wantOn)
		}
	}
}
