package resources

import (
	"errors"
	"testing"
	"time"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func namedFilter(name string, cfg *anypb.Any, optional bool) *hcmv3.HttpFilter {
	f := &hcmv3.HttpFilter{Name: name, IsOptional: optional}
	if cfg != nil {
		f.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: cfg}
	}
	return f
}

// faultAny packs a fault filter config; nil packs an empty one.
func faultAny(m *faultv3.HTTPFault) *anypb.Any {
	if m == nil {
		m = &faultv3.HTTPFault{}
	}
	return toAny(m)
}

// unknownConfig is a filter config of a type no client knows.
var unknownConfig = &anypb.Any{TypeUrl: "type.googleapis.com/acme.Fault", Value: []byte{}}

func TestDecodeListenerRules(t *testing.T) {
	const hcmPath = "api_listener.api_listener."
	tests := []struct {
		name    string
		hcm     func(h *hcmv3.HttpConnectionManager)
		lis     func(l *listenerv3.Listener) // applied after the HCM is packed
		wantErr string
	}{
		{name: "rds over ads"},
		{name: "rds over self", hcm: func(h *hcmv3.HttpConnectionManager) { h.GetRds().ConfigSource = selfSource() }},
		{
			name: "inline route config",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: simpleRouteConfig("", "c")}
			},
		},
		{name: "empty name", lis: func(l *listenerv3.Listener) { l.Name = "" }, wantErr: "name: must not be empty"},
		{name: "no api_listener", lis: func(l *listenerv3.Listener) { l.ApiListener = nil }, wantErr: "address.socket_address: missing (a server-side Listener"},
		{
			name:    "api_listener not an hcm",
			lis:     func(l *listenerv3.Listener) { l.ApiListener.ApiListener = toAny(&routerv3.Router{}) },
			wantErr: "api_listener.api_listener: holds envoy.extensions.filters.http.router.v3.Router, want " + hcmName,
		},
		{
			name: "api_listener in a typed struct",
			lis: func(l *listenerv3.Listener) {
				l.ApiListener.ApiListener = toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/" + hcmName})
			},
			wantErr: "holds xds.type.v3.TypedStruct",
		},
		{
			name:    "api_listener garbage",
			lis:     func(l *listenerv3.Listener) { l.ApiListener.ApiListener.Value = []byte{0xff} },
			wantErr: "api_listener.api_listener: unmarshal HttpConnectionManager",
		},
		{
			name:    "rds without config source",
			hcm:     func(h *hcmv3.HttpConnectionManager) { h.GetRds().ConfigSource = nil },
			wantErr: hcmPath + "rds.config_source: missing (want ads or self)",
		},
		{
			name: "rds over a path",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.GetRds().ConfigSource = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Path{Path: "/x"}}
			},
			wantErr: hcmPath + "rds.config_source: unsupported config source",
		},
		{
			name:    "rds without a name",
			hcm:     func(h *hcmv3.HttpConnectionManager) { h.GetRds().RouteConfigName = "" },
			wantErr: hcmPath + "rds.route_config_name: must not be empty",
		},
		{
			name: "invalid inline route config",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				rc := simpleRouteConfig("", "c")
				rc.VirtualHosts[0].Domains = nil
				h.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc}
			},
			wantErr: hcmPath + "route_config.virtual_hosts[0].domains: must not be empty",
		},
		{
			name: "scoped routes",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.RouteSpecifier = &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{}}
			},
			wantErr: hcmPath + "scoped_routes: not supported",
		},
		{
			name:    "no route specifier",
			hcm:     func(h *hcmv3.HttpConnectionManager) { h.RouteSpecifier = nil },
			wantErr: hcmPath[:len(hcmPath)-1] + ": no route specifier",
		},
		{
			name: "max stream duration",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(time.Second)}
			},
		},
		{
			name: "negative max stream duration",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(-time.Second)}
			},
			wantErr: hcmPath + "common_http_protocol_options.max_stream_duration: must not be negative",
		},
		{
			name: "optional filters of unknown types left out",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{
					namedFilter("opt", unknownConfig, true),
					namedFilter("opt-empty", nil, true),
					{Name: "opt-ecds", IsOptional: true, ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{}},
					routerFilter(),
				}
			},
		},
		{
			name: "required filter of an unknown type",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("acme", unknownConfig, false), routerFilter()}
			},
			wantErr: hcmPath + `http_filters[0].typed_config: filter "acme" has unknown type acme.Fault and is not optional`,
		},
		{
			name: "required filter of an unknown type in a typed struct",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				ts := toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/acme.Wrapped"})
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("acme", ts, false), routerFilter()}
			},
			wantErr: hcmPath + `http_filters[0].typed_config: filter "acme" has unknown type acme.Wrapped and is not optional`,
		},
		{
			name: "filter without a name",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("", unknownConfig, true), routerFilter()}
			},
			wantErr: hcmPath + "http_filters[0].name: must not be empty",
		},
		{
			// The first "a" is left out, but its name still counts.
			name: "duplicate filter names",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("a", unknownConfig, true), namedFilter("a", faultAny(nil), false), routerFilter()}
			},
			wantErr: hcmPath + `http_filters[1].name: duplicate filter name "a"`,
		},
		{
			name: "required filter without a config",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("a", nil, false), routerFilter()}
			},
			wantErr: hcmPath + `http_filters[0]: filter "a" has no typed_config`,
		},
		{
			name: "filter config with an empty type url",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("a", &anypb.Any{}, true), routerFilter()}
			},
			wantErr: hcmPath + "http_filters[0].typed_config: empty type_url",
		},
		{
			name: "required filter from ecds",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{{Name: "a", ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{}}, routerFilter()}
			},
			wantErr: hcmPath + `http_filters[0].config_discovery: not supported (filter "a"`,
		},
		{
			name:    "no filters",
			hcm:     func(h *hcmv3.HttpConnectionManager) { h.HttpFilters = nil },
			wantErr: hcmPath + "http_filters: no filter this client supports",
		},
		{
			name: "only optional unknown filters",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("a", unknownConfig, true)}
			},
			wantErr: hcmPath + "http_filters: no filter this client supports",
		},
		{
			name: "no router",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("a", faultAny(nil), false)}
			},
			wantErr: hcmPath + `http_filters[0]: last filter "a" is not a terminal filter`,
		},
		{
			name: "router not last",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{routerFilter(), namedFilter("a", faultAny(nil), false)}
			},
			wantErr: hcmPath + `http_filters[0]: terminal filter "envoy.filters.http.router" must be the last filter`,
		},
		{
			// The index is the one received, counting the optional
			// filter that was left out.
			name: "router not last, a left-out filter before it",
			hcm: func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = []*hcmv3.HttpFilter{namedFilter("o", unknownConfig, true), routerFilter(), namedFilter("a", faultAny(nil), false)}
			},
			wantErr: hcmPath + `http_filters[1]: terminal filter "envoy.filters.http.router" must be the last filter`,
		},
		{
			// As gRPC does: the router runs whatever disabled says.
			name: "router disabled",
			hcm:  func(h *hcmv3.HttpConnectionManager) { h.HttpFilters[0].Disabled = true },
		},
		{
			name:    "router config garbage",
			hcm:     func(h *hcmv3.HttpConnectionManager) { h.HttpFilters[0].GetTypedConfig().Value = []byte{0xff} },
			wantErr: hcmPath + `http_filters[0].typed_config: filter "envoy.filters.http.router" (router): unmarshal Router`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rdsHCM("rc")
			if tt.hcm != nil {
				tt.hcm(h)
			}
			l := listenerWith("lis", h)
			if tt.lis != nil {
				tt.lis(l)
			}
			name, v, err := decodeMsg(ListenerType, l)
			checkErr(t, err, tt.wantErr)
			if name != l.GetName() {
				t.Errorf("name = %q, want %q", name, l.GetName())
			}
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("error %v does not wrap a *FieldError", err)
				}
				return
			}
			if v.Raw == nil || v.Name != "lis" || v.HTTPConnectionManager == nil {
				t.Errorf("value = %+v, want Name, Raw and HTTPConnectionManager set", v)
			}
		})
	}
}

func TestDecodeListenerValue(t *testing.T) {
	h := rdsHCM("rc")
	h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(3 * time.Second)}
	wrapped := toAny(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/acme.Wrapped"})
	fault := faultAny(&faultv3.HTTPFault{MaxActiveFaults: wrapperspb.UInt32(7)})
	h.HttpFilters = []*hcmv3.HttpFilter{
		namedFilter("fault", fault, false),
		namedFilter("wrapped", wrapped, true),
		namedFilter("empty", nil, true),
		routerFilter(),
	}
	h.HttpFilters[0].Disabled = true
	h.HttpFilters[3].Disabled = true // ignored on the router
	_, l, err := decodeMsg(ListenerType, listenerWith("lis", h))
	if err != nil {
		t.Fatal(err)
	}
	if l.RouteConfigName != "rc" || l.InlineRouteConfig != nil || l.MaxStreamDuration != 3*time.Second {
		t.Errorf("got RouteConfigName %q, inline %v, MaxStreamDuration %v", l.RouteConfigName, l.InlineRouteConfig, l.MaxStreamDuration)
	}
	want := []HTTPFilter{
		{Name: "fault", TypeURL: "type.googleapis.com/" + faultName, Config: fault, Disabled: true},
		{Name: "envoy.filters.http.router", TypeURL: "type.googleapis.com/" + routerName, Config: h.HttpFilters[3].GetTypedConfig()},
	}
	if len(l.HTTPFilters) != len(want) {
		t.Fatalf("got %d filters, want %d: %+v", len(l.HTTPFilters), len(want), l.HTTPFilters)
	}
	for i, f := range l.HTTPFilters {
		w := want[i]
		if f.Name != w.Name || f.TypeURL != w.TypeURL || f.IsOptional != w.IsOptional || f.Disabled != w.Disabled || !proto.Equal(f.Config, w.Config) {
			t.Errorf("filter %d = %+v, want %+v", i, f, w)
		}
	}
	if fc, ok := l.HTTPFilters[0].Parsed.(*FaultConfig); !ok || fc.MaxActiveFaults == nil || *fc.MaxActiveFaults != 7 {
		t.Errorf("fault filter parsed as %#v, want a *FaultConfig with MaxActiveFaults 7", l.HTTPFilters[0].Parsed)
	}
	if _, ok := l.HTTPFilters[1].Parsed.(*RouterConfig); !ok {
		t.Errorf("router parsed as %#v, want a *RouterConfig", l.HTTPFilters[1].Parsed)
	}
	if l.ResourceName() != "lis" || l.Proto() != l.Raw {
		t.Errorf("ResourceName/Proto do not reflect the value")
	}
}

func TestDecodeListenerInline(t *testing.T) {
	h := rdsHCM("")
	h.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: simpleRouteConfig("inline", "c1")}
	_, l, err := decodeMsg(ListenerType, listenerWith("lis", h))
	if err != nil {
		t.Fatal(err)
	}
	if l.RouteConfigName != "" || l.InlineRouteConfig == nil {
		t.Fatalf("RouteConfigName %q, inline %v", l.RouteConfigName, l.InlineRouteConfig)
	}
	if got := l.InlineRouteConfig.ClusterNames(); len(got) != 1 || got[0] != "c1" {
		t.Errorf("inline ClusterNames = %v", got)
	}
	if l.InlineRouteConfig.Raw().GetName() != "inline" || l.InlineRouteConfig.Name != "inline" {
		t.Errorf("inline Raw not kept")
	}
}

func TestDecodeListenerGarbage(t *testing.T) {
	name, _, err := ListenerType.DecodeTyped(nil, &anypb.Any{TypeUrl: ListenerTypeURL, Value: []byte{0x0a, 0xff}})
	checkErr(t, err, "unmarshal Listener")
	if name != "" {
		t.Errorf("name = %q for unreadable bytes", name)
	}
	_, _, err = ListenerType.DecodeTyped(nil, &anypb.Any{TypeUrl: ClusterTypeURL})
	checkErr(t, err, `want "`+ListenerTypeURL+`"`)
	// Fields not modelled are ignored.
	l := listenerWith("lis", rdsHCM("rc"))
	l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: "x"}}
	l.PerConnectionBufferLimitBytes = wrapperspb.UInt32(1)
	_, _, err = decodeMsg(ListenerType, l)
	checkErr(t, err, "")
}
