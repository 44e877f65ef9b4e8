package resources

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// HTTPFilterConfig is a filter's parsed configuration, as returned by the
// ParseConfig or ParseOverride function of its [HTTPFilterType]: for the
// built-in filters a [*RouterConfig] or a [*FaultConfig], for a filter
// override that switches the filter off a [DisabledFilterOverride]. It is
// an empty interface so that a filter defined in another package can use
// its own types; like every decoded value it is shared and must not be
// modified.
type HTTPFilterConfig interface{}

// DisabledFilterOverride is the parsed value of a typed_per_filter_config
// entry wrapped in an envoy.config.route.v3.FilterConfig with disabled set:
// the filter does not run for requests that entry applies to.
type DisabledFilterOverride struct{}

// EffectiveConfig returns the configuration f runs with for one request,
// and whether it runs at all (gRFC A39). overrides are the request's
// typed_per_filter_config maps, most specific first (weighted cluster,
// route, virtual host; nil maps are skipped): the first that names f
// decides, a DisabledFilterOverride switching it off and any other value
// replacing its configuration and switching it on, even where the
// listener disabled it. With no override, f runs with its own
// configuration unless it is disabled.
func (f *HTTPFilter) EffectiveConfig(overrides ...map[string]HTTPFilterConfig) (HTTPFilterConfig, bool) {
	for _, level := range overrides {
		if o, ok := level[f.Name]; ok {
			_, off := o.(DisabledFilterOverride)
			return o, !off
		}
	}
	return f.Parsed, !f.Disabled
}

// RouterConfig is the parsed configuration of the router filter
// (envoy.extensions.filters.http.router.v3.Router). gRPC uses none of its
// fields.
type RouterConfig struct{}

// HTTPFilterType is one kind of HTTP filter, identified by the proto
// message type(s) of its configuration (gRFC A39). Register it with
// [RegisterHTTPFilter] (the default registry, which clients copy) or
// [Registry.RegisterHTTPFilter] (one client's) so that listeners and route
// configurations that use it decode.
type HTTPFilterType struct {
	// Name names the filter kind in errors and logs, e.g. "fault".
	Name string
	// TypeURLs are the type URLs of the configuration messages the filter
	// accepts, top-level and override; only the part after the last '/'
	// counts, as for any Any.
	TypeURLs []string
	// ParseConfig validates a top-level config (HttpFilter.typed_config).
	// It gets the Any as received: for a config wrapped in a TypedStruct,
	// the TypedStruct, which it may refuse.
	ParseConfig func(*anypb.Any) (HTTPFilterConfig, error)
	// ParseConfigFrom, when set, is used instead of ParseConfig and is
	// also told where the config came from: a filter whose configuration
	// names a side-channel service (a GrpcService, gRFC A102) trusts it
	// according to the server that sent it and the bootstrap. ctx may be
	// nil (see DecodeContext). A type sets ParseConfig, ParseConfigFrom or
	// both.
	ParseConfigFrom func(ctx *DecodeContext, a *anypb.Any) (HTTPFilterConfig, error)
	// ParseOverride validates a typed_per_filter_config entry, already
	// taken out of any FilterConfig wrapper. nil: the filter accepts no
	// overrides, and a route configuration that has one for it is invalid.
	ParseOverride func(*anypb.Any) (HTTPFilterConfig, error)
	// ParseOverrideFrom, when set, is used instead of ParseOverride and is
	// told where the override came from, as ParseConfigFrom is: for an
	// override that may name a side-channel service (gRFC A102). An
	// override that does should make the value implement SourceDependent.
	ParseOverrideFrom func(ctx *DecodeContext, a *anypb.Any) (HTTPFilterConfig, error)
	// ClientSide and ServerSide say where the filter can run. A client
	// Listener using a filter that cannot run on a client is invalid
	// unless the filter is optional, in which case it is left out.
	ClientSide, ServerSide bool
	// Terminal filters end the chain: one must be last, and only there.
	Terminal bool
}

// RegisterHTTPFilter adds t to r under each of its type URLs. It refuses a
// type with no type URL or with neither ParseConfig nor ParseConfigFrom,
// and a type URL already
// registered, so that two filters cannot silently fight over one config
// type.
func (r *Registry) RegisterHTTPFilter(t HTTPFilterType) error {
	if len(t.TypeURLs) == 0 || (t.ParseConfig == nil && t.ParseConfigFrom == nil) {
		return fmt.Errorf("resources: HTTP filter %q needs TypeURLs and ParseConfig", t.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range t.TypeURLs {
		if _, ok := r.filters[messageName(u)]; ok {
			return fmt.Errorf("resources: an HTTP filter is already registered for %s", u)
		}
	}
	ft := &t
	for _, u := range t.TypeURLs {
		r.filters[messageName(u)] = ft
	}
	return nil
}

// parseConfig parses a top-level config with whichever parser t has.
func (t *HTTPFilterType) parseConfig(ctx *DecodeContext, a *anypb.Any) (HTTPFilterConfig, error) {
	if t.ParseConfigFrom != nil {
		return t.ParseConfigFrom(ctx, a)
	}
	return t.ParseConfig(a)
}

// LookupHTTPFilter returns the filter type r has for typeURL (any URL
// prefix is accepted, only the message name counts).
func (r *Registry) LookupHTTPFilter(typeURL string) (HTTPFilterType, bool) {
	t := r.httpFilter(typeURL)
	if t == nil {
		return HTTPFilterType{}, false
	}
	return *t, true
}

// httpFilter is LookupHTTPFilter without the copy; nil if none.
func (r *Registry) httpFilter(typeURL string) *HTTPFilterType {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.filters[messageName(typeURL)]
}

// RegisterHTTPFilter adds t to the default registry (see
// Registry.RegisterHTTPFilter). Register filters from an init function,
// before any client is made.
func RegisterHTTPFilter(t HTTPFilterType) error { return defaultRegistry.RegisterHTTPFilter(t) }

// LookupHTTPFilter returns the filter type the default registry has for
// typeURL (any URL prefix is accepted, only the message name counts).
func LookupHTTPFilter(typeURL string) (HTTPFilterType, bool) {
	return defaultRegistry.LookupHTTPFilter(typeURL)
}

// messageName is the full message name in a type URL: what follows the last
// '/'.
func messageName(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '/')+1:]
}

func init() {
	for _, t := range []HTTPFilterType{routerFilterType, faultFilterType} {
		if err := RegisterHTTPFilter(t); err != nil {
			panic(err)
		}
	}
}

// routerFilterType is the terminal filter every client chain ends with.
var routerFilterType = HTTPFilterType{
	Name:     "router",
	TypeURLs: []string{"type.googleapis.com/" + routerName},
	ParseConfig: func(a *anypb.Any) (HTTPFilterConfig, error) {
		if !anyIs(a, routerName) {
			return nil, fmt.Errorf("holds %s, want %s", anyName(a), routerName)
		}
		if err := proto.Unmarshal(a.GetValue(), new(routerv3.Router)); err != nil {
			return nil, fmt.Errorf("unmarshal Router: %v", err)
		}
		return &RouterConfig{}, nil
	},
	// No ParseOverride: the router takes no per-route config.
	ClientSide: true,
	ServerSide: true,
	Terminal:   true,
}

// parseHTTPFilters validates an HTTP filter chain as gRPC does (gRFC A39):
// named filters with unique names; each of a registered type that can run
// on this side (client or server) and whose config parses, unless it is
// optional, in which case it is left out; and a terminal filter last and
// only last.
func parseHTTPFilters(ctx *DecodeContext, in []*hcmv3.HttpFilter, server bool) ([]HTTPFilter, error) {
	out := make([]HTTPFilter, 0, len(in))
	seen := make(map[string]bool, len(in))
	// Parallel to out: whether each filter is terminal, and its index in
	// the list received, for errors.
	var (
		terminal []bool
		from     []int
	)
	for i, f := range in {
		path := index("http_filters", i)
		name := f.GetName()
		if name == "" {
			return nil, fieldErrorf(path+".name", "must not be empty")
		}
		// Names are unique across the whole list, skipped filters too.
		if seen[name] {
			return nil, fieldErrorf(path+".name", "duplicate filter name %q", name)
		}
		seen[name] = true
		hf := HTTPFilter{Name: name, IsOptional: f.GetIsOptional(), Disabled: f.GetDisabled()}
		ft, err := hf.setType(ctx.registry(), f)
		if err != nil {
			return nil, at(path, err)
		}
		if ft == nil {
			continue // optional and unknown
		}
		if (server && !ft.ServerSide) || (!server && !ft.ClientSide) {
			if hf.IsOptional {
				continue
			}
			side := "client"
			if server {
				side = "server"
			}
			return nil, fieldErrorf(path, "filter %q of type %s cannot run on a gRPC %s", name, messageName(hf.TypeURL), side)
		}
		if hf.Parsed, err = ft.parseConfig(ctx, hf.Config); err != nil {
			return nil, fieldErrorf(path+".typed_config", "filter %q (%s): %v", name, ft.Name, err)
		}
		hf.Terminal = ft.Terminal
		out = append(out, hf)
		terminal = append(terminal, ft.Terminal)
		from = append(from, i)
	}
	if len(out) == 0 {
		return nil, fieldErrorf("http_filters", "no filter this client supports (want at least the router %s)", routerName)
	}
	last := len(out) - 1
	for i, f := range out[:last] {
		if terminal[i] {
			return nil, fieldErrorf(index("http_filters", from[i]), "terminal filter %q must be the last filter", f.Name)
		}
	}
	if !terminal[last] {
		return nil, fieldErrorf(index("http_filters", from[last]), "last filter %q is not a terminal filter such as the router %s", out[last].Name, routerName)
	}
	// gRPC accepts a disabled terminal filter and routes anyway: the chain
	// must end somewhere. So disabled is dropped here rather than left
	// for the chain to trip on.
	out[last].Disabled = false
	return out, nil
}

// setType fills hf's Config and TypeURL from f and returns the registered
// type of its config; nil with a nil error means the filter is optional
// and of no known type, so it is left out. A filter with no typed_config
// (config_discovery, which gRPC does not follow, or nothing) is of no known
// type.
func (hf *HTTPFilter) setType(reg *Registry, f *hcmv3.HttpFilter) (*HTTPFilterType, error) {
	cfg := f.GetTypedConfig()
	if cfg == nil {
		if hf.IsOptional {
			return nil, nil
		}
		if f.GetConfigDiscovery() != nil {
			return nil, fieldErrorf("config_discovery", "not supported (filter %q; gRPC needs typed_config)", hf.Name)
		}
		return nil, fmt.Errorf("filter %q has no typed_config", hf.Name)
	}
	typeURL, err := filterTypeURL(cfg)
	if err != nil {
		return nil, at("typed_config", err)
	}
	hf.TypeURL, hf.Config = typeURL, cfg
	ft := reg.httpFilter(typeURL)
	if ft == nil {
		if hf.IsOptional {
			return nil, nil
		}
		return nil, fieldErrorf("typed_config", "filter %q has unknown type %s and is not optional", hf.Name, messageName(typeURL))
	}
	return ft, nil
}

// filterConfigName is the wrapper a typed_per_filter_config value may come
// in to carry is_optional and disabled.
const filterConfigName = "envoy.config.route.v3.FilterConfig"

// parseFilterOverrides validates a typed_per_filter_config map (gRFC A39):
// each value, out of its FilterConfig wrapper if it has one, must be of a
// registered filter type that accepts overrides and must parse, unless the
// wrapper says it is optional, in which case an unknown type is left out.
// Keys need not name a filter of any listener, and a filter that runs only
// on the other side is still accepted: a route configuration does not know
// who will use it. nil when nothing is left.
func parseFilterOverrides(ctx *DecodeContext, in map[string]*anypb.Any) (map[string]HTTPFilterConfig, error) {
	if len(in) == 0 {
		return nil, nil
	}
	// Sorted, so that of several bad entries the same one is reported each
	// time.
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	sort.Strings(names)
	var out map[string]HTTPFilterConfig
	for _, name := range names {
		c, err := parseFilterOverride(ctx, name, in[name])
		if err != nil {
			return nil, at("typed_per_filter_config["+strconv.Quote(name)+"]", err)
		}
		if c == nil {
			continue
		}
		if out == nil {
			out = make(map[string]HTTPFilterConfig, len(in))
		}
		out[name] = c
	}
	return out, nil
}

// parseFilterOverride parses one override; nil with a nil error means an
// optional override of an unknown type, to be left out.
func parseFilterOverride(ctx *DecodeContext, name string, cfg *anypb.Any) (HTTPFilterConfig, error) {
	reg := ctx.registry()
	optional := false
	if anyIs(cfg, filterConfigName) {
		fc := new(routev3.FilterConfig)
		if err := proto.Unmarshal(cfg.GetValue(), fc); err != nil {
			return nil, fmt.Errorf("unmarshal FilterConfig: %v", err)
		}
		if fc.GetDisabled() {
			// The config, if any, is moot: the filter is off here.
			return DisabledFilterOverride{}, nil
		}
		optional, cfg = fc.GetIsOptional(), fc.GetConfig()
	}
	if cfg == nil {
		if optional {
			return nil, nil
		}
		return nil, errors.New("no config")
	}
	typeURL, err := filterTypeURL(cfg)
	if err != nil {
		return nil, err
	}
	ft := reg.httpFilter(typeURL)
	if ft == nil {
		if optional {
			return nil, nil
		}
		return nil, fmt.Errorf("override for filter %q has unknown type %s and is not optional", name, messageName(typeURL))
	}
	var c HTTPFilterConfig
	switch {
	case ft.ParseOverrideFrom != nil:
		c, err = ft.ParseOverrideFrom(ctx, cfg)
	case ft.ParseOverride != nil:
		c, err = ft.ParseOverride(cfg)
	default:
		return nil, fmt.Errorf("filter %q (%s) does not accept overrides", name, ft.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("filter %q (%s): %v", name, ft.Name, err)
	}
	return c, nil
}
