package resources

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// ClusterSpecifierConfig is a cluster specifier plugin's parsed
// configuration, as its [ClusterSpecifierType]'s ParseConfig returned it.
// It is an empty interface so that the package that routes with the plugin
// (grpcxds, for gRPC's route lookup service) can use its own types; like
// every decoded value it is shared and must not be modified.
type ClusterSpecifierConfig interface{}

// ClusterSpecifierType is one kind of cluster specifier plugin
// (RouteConfiguration.cluster_specifier_plugins, gRFC A28 as gRPC's RLS
// support amends it): a route whose action names such a plugin has its
// cluster chosen per request by the plugin. Register it with
// [RegisterClusterSpecifier] (the default registry) or
// [Registry.RegisterClusterSpecifier] (one client's); with none registered
// in the decoding client's registry, every plugin is unsupported, and the
// routes that use an optional one are skipped.
type ClusterSpecifierType struct {
	// Name names the plugin kind in errors and logs, e.g. "rls".
	Name string
	// TypeURLs are the full type URLs of the configuration messages the
	// plugin accepts. Unlike HTTP filters, a plugin is known by its whole
	// type URL, as gRPC looks it up.
	TypeURLs []string
	// ParseConfig validates a plugin's typed_config, as received. An error
	// makes the route configuration invalid, optional plugin or not.
	ParseConfig func(*anypb.Any) (ClusterSpecifierConfig, error)
}

// RegisterClusterSpecifier adds t to r under each of its type URLs. It
// refuses a type with no type URL or no ParseConfig, and a type URL already
// registered.
func (r *Registry) RegisterClusterSpecifier(t ClusterSpecifierType) error {
	if len(t.TypeURLs) == 0 || t.ParseConfig == nil {
		return fmt.Errorf("resources: cluster specifier %q needs TypeURLs and ParseConfig", t.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range t.TypeURLs {
		if _, ok := r.specifiers[u]; ok {
			return fmt.Errorf("resources: a cluster specifier is already registered for %s", u)
		}
	}
	ct := &t
	for _, u := range t.TypeURLs {
		r.specifiers[u] = ct
	}
	return nil
}

// LookupClusterSpecifier returns the plugin type r has for typeURL.
func (r *Registry) LookupClusterSpecifier(typeURL string) (ClusterSpecifierType, bool) {
	t := r.clusterSpecifier(typeURL)
	if t == nil {
		return ClusterSpecifierType{}, false
	}
	return *t, true
}

// clusterSpecifier is LookupClusterSpecifier without the copy; nil if none.
func (r *Registry) clusterSpecifier(typeURL string) *ClusterSpecifierType {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.specifiers[typeURL]
}

// RegisterClusterSpecifier adds t to the default registry (see
// Registry.RegisterClusterSpecifier). Register plugins from an init
// function, before any client is made.
func RegisterClusterSpecifier(t ClusterSpecifierType) error {
	return defaultRegistry.RegisterClusterSpecifier(t)
}

// clusterPlugins are the cluster specifier plugins of a route
// configuration, by name: the parsed configuration of a supported one, nil
// for an optional one no registered type supports.
type clusterPlugins struct {
	configs map[string]ClusterSpecifierConfig
	// used are the supported plugins some route names, which are all a
	// RouteConfig keeps (gRPC hands its consumers no others).
	used map[string]ClusterSpecifierConfig
}

// noClusterPlugins is a route configuration's empty plugin list; it is
// never modified (no route can name a plugin of an empty list).
var noClusterPlugins = &clusterPlugins{}

// newClusterPlugins validates the plugin list, as gRPC does: a plugin of a
// registered type must parse, optional or not; one of an unknown type is
// invalid unless optional. Like gRPC, it does not check names: the last
// of two plugins with one name wins.
func newClusterPlugins(ctx *DecodeContext, in []*routev3.ClusterSpecifierPlugin) (*clusterPlugins, error) {
	if len(in) == 0 {
		return noClusterPlugins, nil // the common case costs nothing
	}
	cp := &clusterPlugins{configs: make(map[string]ClusterSpecifierConfig, len(in))}
	for i, p := range in {
		path := index("cluster_specifier_plugins", i) + ".extension.typed_config"
		ext := p.GetExtension()
		t := ctx.registry().clusterSpecifier(ext.GetTypedConfig().GetTypeUrl())
		if t == nil {
			if !p.GetIsOptional() {
				return nil, fieldErrorf(path, "plugin %q has unsupported type %s and is not optional", ext.GetName(), anyName(ext.GetTypedConfig()))
			}
			cp.configs[ext.GetName()] = nil
			continue
		}
		cfg, err := t.ParseConfig(ext.GetTypedConfig())
		if err != nil {
			return nil, fieldErrorf(path, "%s plugin %q: %v", t.Name, ext.GetName(), err)
		}
		cp.configs[ext.GetName()] = cfg
	}
	return cp, nil
}

// route judges a route whose action names the plugin name: the route
// configuration is invalid if it has no such plugin, the route is skipped
// if the plugin is unsupported (and so optional), and routes by the
// plugin otherwise. A virtual host that came alone (VHDS, cp nil) cannot
// tell, and skips the route.
func (cp *clusterPlugins) route(name string) (skip string, err error) {
	if cp == nil {
		return fmt.Sprintf("cluster specifier plugin %q is optional and not supported", name), nil
	}
	cfg, ok := cp.configs[name]
	switch {
	case !ok:
		return "", fieldErrorf("cluster_specifier_plugin", "names %q, which is not in the route configuration's cluster_specifier_plugins", name)
	case cfg == nil:
		return fmt.Sprintf("cluster specifier plugin %q is optional and not supported", name), nil
	}
	if cp.used == nil {
		cp.used = make(map[string]ClusterSpecifierConfig)
	}
	cp.used[name] = cfg
	return "", nil
}
