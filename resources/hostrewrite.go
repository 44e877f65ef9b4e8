package resources

// A route's auto_host_rewrite is honoured only from a server marked
// trusted_xds_server (gRFC A81, Route.AutoHostRewrite), so a resource
// holding a route that asks for it decodes differently by its sender. The
// client decodes such bytes again when another server sends them (a
// fallback, gRFC A71, or the return to the primary): the methods below say
// which values those are, from a flag set once at decode, since the client
// asks on every response that repeats the bytes.

// DependsOnSource implements SourceDependent: a route configuration is
// when one of its routes asks for auto_host_rewrite, or one of its filter
// overrides names a side-channel service (an ext_proc override's
// GrpcService, gRFC A102).
func (rc *RouteConfig) DependsOnSource() bool { return rc != nil && rc.hostRewrite }

// DependsOnSource implements SourceDependent, as RouteConfig's.
func (v *VirtualHostResource) DependsOnSource() bool {
	return v != nil && v.VirtualHost != nil && v.VirtualHost.hostRewrite
}

// DependsOnSource implements SourceDependent: a scope is when its inline
// route configuration is.
func (s *ScopedRouteConfig) DependsOnSource() bool {
	return s != nil && s.InlineRouteConfig.DependsOnSource()
}

// routesDependOnSource reports whether a route configuration inline in l
// asks for auto_host_rewrite.
func (l *Listener) routesDependOnSource() bool {
	if l == nil {
		return false
	}
	if l.InlineRouteConfig.DependsOnSource() {
		return true
	}
	s := l.Server
	if s == nil {
		return false
	}
	if s.DefaultFilterChain != nil && s.DefaultFilterChain.InlineRouteConfig.DependsOnSource() {
		return true
	}
	for _, fc := range s.FilterChains {
		if fc.InlineRouteConfig.DependsOnSource() {
			return true
		}
	}
	return false
}

// overridesDependOnSource reports whether one of a typed_per_filter_config
// map's parsed overrides depends on the server that sent it.
func overridesDependOnSource(m map[string]HTTPFilterConfig) bool {
	for _, c := range m {
		if sd, ok := c.(SourceDependent); ok && sd.DependsOnSource() {
			return true
		}
	}
	return false
}

// overridesDependOnSource reports whether the route's overrides, or its
// weighted clusters', depend on their source.
func (r *Route) overridesDependOnSource() bool {
	if overridesDependOnSource(r.FilterOverrides) {
		return true
	}
	for i := range r.WeightedClusters {
		if overridesDependOnSource(r.WeightedClusters[i].FilterOverrides) {
			return true
		}
	}
	return false
}
