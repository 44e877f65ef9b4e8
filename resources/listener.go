package resources

import (
	"errors"
	"fmt"
	"time"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// ListenerType is the built-in LDS type: Listener resources decoded into
// *Listener, client-side ones (with an api_listener) and server-side ones
// (without, gRFC A36; see Listener.Server). Every SotW response
// carries all listeners, and the wildcard may be used.
var ListenerType = NewType(TypeOptions[*Listener]{
	TypeURL:                    ListenerTypeURL,
	AllResourcesRequiredInSotW: true,
	SupportsWildcard:           true,
	Decode:                     decodeListener,
})

// Full proto names of the messages a Listener embeds in Any fields.
const (
	hcmName         = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
	routerName      = "envoy.extensions.filters.http.router.v3.Router"
	typedStructName = "xds.type.v3.TypedStruct"
	udpaStructName  = "udpa.type.v1.TypedStruct"
)

// Listener is a validated Listener: either a client-side one, an
// api_listener holding an HttpConnectionManager, or (Server set) a
// server-side one. Like every decoded value it is immutable and
// shared: callers must not modify it.
type Listener struct {
	// Name is the resource name.
	Name string
	// RouteConfigName is the RouteConfiguration to fetch over RDS; empty
	// when the route configuration is inline.
	RouteConfigName string
	// InlineRouteConfig is the route configuration carried inline; nil
	// when RouteConfigName is set.
	InlineRouteConfig *RouteConfig
	// HTTPFilters are the connection manager's filters in order, each of
	// a type registered with RegisterHTTPFilter that runs on a client; the
	// last is a terminal filter (the router). Optional filters of unknown
	// types are left out; a non-optional one makes the Listener invalid
	// (gRFC A39).
	HTTPFilters []HTTPFilter
	// MaxStreamDuration is common_http_protocol_options.max_stream_duration
	// of the connection manager, 0 when unset.
	MaxStreamDuration time.Duration
	// StripHostPort and StripTrailingHostDot are the connection manager's
	// strip_matching_host_port or strip_any_host_port and its
	// strip_trailing_host_dot: how an HTTP client (package httpxds)
	// rewrites a request's host before its virtual host is chosen, as
	// Envoy's connection manager does. gRPC ignores them. Envoy refuses
	// both port fields set; a client Listener is not refused for it, since
	// grpc-go accepts it, and strip_any_host_port wins.
	StripHostPort        HostPortStrip
	StripTrailingHostDot bool
	// HTTPConnectionManager is the decoded api_listener, for fields not
	// modelled here.
	HTTPConnectionManager *hcmv3.HttpConnectionManager
	// Server is the server-side Listener, set for a Listener without an
	// api_listener; then every field above but Name and Raw is zero.
	Server *ServerListener
	// Raw is the message as received.
	Raw *listenerv3.Listener
}

// HTTPFilter is one filter of an HttpConnectionManager's chain.
type HTTPFilter struct {
	// Name is the filter's unique name in the chain.
	Name string
	// TypeURL is the type of the filter's configuration: Config's type URL,
	// or for a config wrapped in a TypedStruct the type URL inside it. It
	// selects the filter's HTTPFilterType in the registry of the client
	// that decoded it (DecodeContext.Registry).
	TypeURL string
	// Config is the filter's typed_config as received.
	Config *anypb.Any
	// Parsed is Config as the filter type's ParseConfig returned it: for
	// the built-in filters a *RouterConfig or a *FaultConfig.
	Parsed HTTPFilterConfig
	// IsOptional: a client that does not support the filter may skip it.
	IsOptional bool
	// Disabled: the filter runs only where an override (of a virtual
	// host, route or weighted cluster) enables it. Never set on the
	// terminal filter, which always runs.
	Disabled bool
	// Terminal: the filter's type ends the chain (the router); it is the
	// chain's last filter. Recorded here so that whoever runs the chain
	// need not look the type up in a registry, which may not be the one
	// the Listener was decoded with.
	Terminal bool
}

// ResourceName implements Resource.
func (l *Listener) ResourceName() string {
	if l == nil {
		return ""
	}
	return l.Name
}

// Proto implements Resource; it returns Raw.
func (l *Listener) Proto() proto.Message { return l.Raw }

func decodeListener(ctx *DecodeContext, body *anypb.Any) (string, *Listener, error) {
	m := new(listenerv3.Listener)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal Listener: %v", err)
	}
	name := m.GetName()
	if name == "" {
		return "", nil, fieldErrorf("name", "must not be empty")
	}
	l := &Listener{Name: name, Raw: m}
	if m.GetApiListener() == nil {
		// As gRPC decides: no api_listener makes a server Listener.
		if err := l.setServerListener(ctx, m); err != nil {
			return name, nil, err
		}
		return name, l, nil
	}
	if err := l.setAPIListener(ctx, m.GetApiListener()); err != nil {
		return name, nil, at("api_listener", err)
	}
	return name, l, nil
}

func (l *Listener) setAPIListener(ctx *DecodeContext, al *listenerv3.ApiListener) error {
	if al == nil {
		return errors.New("missing (only client-side listeners, which have one, are supported)")
	}
	a := al.GetApiListener()
	if !anyIs(a, hcmName) {
		return fieldErrorf("api_listener", "holds %s, want %s", anyName(a), hcmName)
	}
	hcm := new(hcmv3.HttpConnectionManager)
	if err := proto.Unmarshal(a.GetValue(), hcm); err != nil {
		return fieldErrorf("api_listener", "unmarshal HttpConnectionManager: %v", err)
	}
	l.HTTPConnectionManager = hcm
	if err := l.setHCM(ctx, hcm); err != nil {
		return at("api_listener", err)
	}
	return nil
}

func (l *Listener) setHCM(ctx *DecodeContext, hcm *hcmv3.HttpConnectionManager) error {
	switch rs := hcm.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		if err := checkConfigSource(rs.Rds.GetConfigSource()); err != nil {
			return at("rds.config_source", err)
		}
		if rs.Rds.GetRouteConfigName() == "" {
			return fieldErrorf("rds.route_config_name", "must not be empty")
		}
		l.RouteConfigName = rs.Rds.GetRouteConfigName()
	case *hcmv3.HttpConnectionManager_RouteConfig:
		rc, err := newRouteConfig(ctx, rs.RouteConfig, nil)
		if err != nil {
			return at("route_config", err)
		}
		l.InlineRouteConfig = rc
	case *hcmv3.HttpConnectionManager_ScopedRoutes:
		return fieldErrorf("scoped_routes", "not supported (use rds or route_config)")
	case nil:
		return errors.New("no route specifier (want rds or route_config)")
	default:
		return fmt.Errorf("unsupported route specifier %T", rs)
	}
	if msd := hcm.GetCommonHttpProtocolOptions().GetMaxStreamDuration(); msd != nil {
		d, err := duration(msd)
		if err != nil {
			return at("common_http_protocol_options.max_stream_duration", err)
		}
		l.MaxStreamDuration = d
	}
	filters, err := parseHTTPFilters(ctx, hcm.GetHttpFilters(), false)
	if err != nil {
		return err
	}
	l.HTTPFilters = filters
	switch {
	case hcm.GetStripAnyHostPort():
		l.StripHostPort = HostPortStripAny
	case hcm.GetStripMatchingHostPort():
		l.StripHostPort = HostPortStripMatching
	}
	l.StripTrailingHostDot = hcm.GetStripTrailingHostDot()
	return nil
}

// checkConfigSource accepts the only config sources a client on one ADS
// stream can follow: ads and self.
func checkConfigSource(cs *corev3.ConfigSource) error {
	switch k := configSourceKind(cs); k {
	case "ads", "self":
		return nil
	case "":
		return errors.New("missing (want ads or self)")
	default:
		return fmt.Errorf("unsupported config source %s (want ads or self)", k)
	}
}

// configSourceKind names the config_source_specifier set in cs, "" if none.
func configSourceKind(cs *corev3.ConfigSource) string {
	switch s := cs.GetConfigSourceSpecifier().(type) {
	case nil:
		return ""
	case *corev3.ConfigSource_Ads:
		return "ads"
	case *corev3.ConfigSource_Self:
		return "self"
	case *corev3.ConfigSource_Path:
		return "path"
	case *corev3.ConfigSource_PathConfigSource:
		return "path_config_source"
	case *corev3.ConfigSource_ApiConfigSource:
		return "api_config_source"
	default:
		return fmt.Sprintf("%T", s)
	}
}

// filterTypeURL returns the type URL of a filter config, looking inside
// the TypedStruct wrappers that carry configs of types the control plane
// has no proto for.
func filterTypeURL(a *anypb.Any) (string, error) {
	switch {
	case anyIs(a, typedStructName):
		ts := new(xdstypev3.TypedStruct)
		if err := proto.Unmarshal(a.GetValue(), ts); err != nil {
			return "", fmt.Errorf("unmarshal TypedStruct: %v", err)
		}
		return ts.GetTypeUrl(), nil
	case anyIs(a, udpaStructName):
		ts := new(udpatypev1.TypedStruct)
		if err := proto.Unmarshal(a.GetValue(), ts); err != nil {
			return "", fmt.Errorf("unmarshal TypedStruct: %v", err)
		}
		return ts.GetTypeUrl(), nil
	case a.GetTypeUrl() == "":
		return "", errors.New("empty type_url")
	}
	return a.GetTypeUrl(), nil
}
