package resources

import (
	"errors"
	"fmt"
	"sort"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// RouteConfigType is the built-in RDS type: RouteConfiguration resources,
// decoded into *RouteConfig.
var RouteConfigType = NewType(TypeOptions[*RouteConfig]{
	TypeURL: RouteConfigTypeURL,
	Decode:  decodeRouteConfig,
})

// RouteConfig is a validated RouteConfiguration. Like every decoded value it
// is immutable and shared: callers must not modify it.
type RouteConfig struct {
	// Name is the resource name. A route configuration inlined in a
	// Listener may have none.
	Name string
	// VirtualHosts are in the order received; pick one for a request's
	// authority with FindVirtualHost.
	VirtualHosts []*VirtualHost
	// ClusterSpecifierPlugins are the parsed configurations of the
	// supported cluster specifier plugins some route uses, by plugin name
	// (see Route.ClusterSpecifierPlugin); nil when there are none.
	ClusterSpecifierPlugins map[string]ClusterSpecifierConfig
	// hostRewrite: some route asks for auto_host_rewrite, which only a
	// trusted server is followed in (DependsOnSource).
	hostRewrite bool
	// raw is the serialized message, unmarshalled again by Raw: kept as
	// bytes because the decoded message, which few callers read, is
	// several times larger. Its virtual hosts and routes keep sub-slices.
	raw []byte
}

// VirtualHost is one validated virtual host of a RouteConfig.
type VirtualHost struct {
	// Name is the virtual host's name.
	Name string
	// Domains are the host patterns the virtual host serves, as
	// configured; each is valid (see FindVirtualHost).
	Domains []string
	// Routes are tried in order; the first match wins. Routes gRPC
	// cannot use are not here (see SkippedRoutes).
	Routes []*Route
	// SkippedRoutes are the routes left out because gRPC cannot use them
	// (gRFC A28): a route action whose target is a cluster_header, an
	// inline or optional unsupported cluster specifier plugin (see
	// RegisterClusterSpecifier), or none.
	SkippedRoutes []SkippedRoute
	// RetryPolicy is the virtual host's retry_policy, nil when unset. A
	// route's own policy replaces it.
	RetryPolicy *routev3.RetryPolicy
	// IncludeRequestAttemptCount is include_request_attempt_count: an
	// HTTP client sets x-envoy-attempt-count on each attempt it sends.
	IncludeRequestAttemptCount bool
	// FilterOverrides are the virtual host's typed_per_filter_config, as
	// in Route.FilterOverrides; a route's or weighted cluster's own
	// override of a filter beats this one.
	FilterOverrides map[string]HTTPFilterConfig
	// raw is the virtual host's part of the bytes received (see
	// RouteConfig.raw).
	raw []byte
	// hostRewrite: some route asks for auto_host_rewrite (see
	// RouteConfig.hostRewrite).
	hostRewrite bool
}

// SkippedRoute is a route of a virtual host that gRPC cannot use, left out
// of VirtualHost.Routes; for logs and status pages.
type SkippedRoute struct {
	// Index is the route's index in the virtual host as received.
	Index int
	// Name is the route's name, if it has one.
	Name string
	// Reason says why the route was left out.
	Reason string
}

// ResourceName implements Resource.
func (rc *RouteConfig) ResourceName() string {
	if rc == nil {
		return ""
	}
	return rc.Name
}

// Raw returns the message as received, for the fields RouteConfig does
// not model. It is unmarshalled from the bytes received on each call: the
// caller owns the result. A route configuration inlined in another
// resource gives back that resource's copy of it. Raw returns nil for a
// value not made by the decoder.
func (rc *RouteConfig) Raw() *routev3.RouteConfiguration {
	m := new(routev3.RouteConfiguration)
	if rc == nil || !unmarshalRaw(rc.raw, m) {
		return nil
	}
	return m
}

// Proto implements Resource; it returns Raw.
func (rc *RouteConfig) Proto() proto.Message { return rc.Raw() }

// Raw returns the virtual host as received, unmarshalled anew on each call
// as RouteConfig.Raw is; nil for a value not made by the decoder.
func (vh *VirtualHost) Raw() *routev3.VirtualHost {
	m := new(routev3.VirtualHost)
	if vh == nil || !unmarshalRaw(vh.raw, m) {
		return nil
	}
	return m
}

// ClusterNames returns every cluster some route of some virtual host can
// send a request to, sorted and without duplicates.
func (rc *RouteConfig) ClusterNames() []string {
	seen := make(map[string]struct{})
	for _, vh := range rc.VirtualHosts {
		for _, r := range vh.Routes {
			if r.Action != RouteActionRoute {
				continue
			}
			if r.Cluster != "" {
				seen[r.Cluster] = struct{}{}
			}
			for _, wc := range r.WeightedClusters {
				seen[wc.Name] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func decodeRouteConfig(ctx *DecodeContext, body *anypb.Any) (string, *RouteConfig, error) {
	m := new(routev3.RouteConfiguration)
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return "", nil, fmt.Errorf("unmarshal RouteConfiguration: %v", err)
	}
	if m.GetName() == "" {
		return "", nil, fieldErrorf("name", "must not be empty")
	}
	rc, err := newRouteConfig(ctx, m, body.GetValue())
	if err != nil {
		return m.GetName(), nil, err
	}
	return m.GetName(), rc, nil
}

// newRouteConfig validates a RouteConfiguration, either a resource of its
// own or one inlined in a Listener; raw is m serialized, or nil for an
// inlined one, which is then serialized here.
func newRouteConfig(ctx *DecodeContext, m *routev3.RouteConfiguration, raw []byte) (*RouteConfig, error) {
	if raw == nil {
		raw = marshalOrNil(m)
	}
	rc := &RouteConfig{Name: m.GetName(), raw: raw}
	plugins, err := newClusterPlugins(ctx, m.GetClusterSpecifierPlugins())
	if err != nil {
		return nil, err
	}
	vhs := m.GetVirtualHosts()
	rc.VirtualHosts = make([]*VirtualHost, len(vhs))
	vhBytes := fieldCursor{b: raw, num: vhostsField}
	for i, p := range vhs {
		vh, err := newVirtualHost(ctx, p, vhBytes.next(), plugins)
		if err != nil {
			return nil, at(index("virtual_hosts", i), err)
		}
		rc.VirtualHosts[i] = vh
		rc.hostRewrite = rc.hostRewrite || vh.hostRewrite
	}
	rc.ClusterSpecifierPlugins = plugins.used
	return rc, nil
}

// newVirtualHost validates a virtual host of a route configuration whose
// cluster specifier plugins are plugins (nil for a virtual host that came
// alone, over VHDS); raw is p serialized, nil if not at hand.
func newVirtualHost(ctx *DecodeContext, p *routev3.VirtualHost, raw []byte, plugins *clusterPlugins) (*VirtualHost, error) {
	if p == nil {
		return nil, errors.New("missing")
	}
	if raw == nil {
		raw = marshalOrNil(p)
	}
	vh := &VirtualHost{
		Name:        p.GetName(),
		Domains:     p.GetDomains(),
		RetryPolicy: p.GetRetryPolicy(),
		raw:         raw,

		IncludeRequestAttemptCount: p.GetIncludeRequestAttemptCount(),
	}
	if len(vh.Domains) == 0 {
		return nil, fieldErrorf("domains", "must not be empty")
	}
	var err error
	if vh.FilterOverrides, err = parseFilterOverrides(ctx, p.GetTypedPerFilterConfig()); err != nil {
		return nil, err
	}
	for i, d := range vh.Domains {
		if err := validateDomain(d); err != nil {
			return nil, at(index("domains", i), err)
		}
	}
	routes := p.GetRoutes()
	// One allocation for all routes of the virtual host.
	backing := make([]Route, len(routes))
	vh.Routes = make([]*Route, 0, len(routes))
	routeBytes := fieldCursor{b: raw, num: routesField}
	for i, rp := range routes {
		r := &backing[i]
		skip, err := r.init(ctx, rp, routeBytes.next(), plugins)
		if err != nil {
			return nil, at(index("routes", i), err)
		}
		if skip != "" {
			vh.SkippedRoutes = append(vh.SkippedRoutes, SkippedRoute{Index: i, Name: rp.GetName(), Reason: skip})
			continue
		}
		vh.hostRewrite = vh.hostRewrite || rp.GetRoute().GetAutoHostRewrite().GetValue()
		vh.Routes = append(vh.Routes, r)
	}
	return vh, nil
}
