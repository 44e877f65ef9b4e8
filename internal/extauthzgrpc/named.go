package extauthzgrpc

import "github.com/goxds/xds/resources"

// Services gathers the side services (GrpcServices) a configuration
// names, for Channels.Name: its filters' top-level configurations and
// the overrides of its virtual hosts, routes and weighted clusters (an
// ext_proc override may name a service of its own). The zero value is
// empty.
type Services []*resources.GrpcService

// AddFilters adds the services fs's configurations name.
func (s *Services) AddFilters(fs []resources.HTTPFilter) {
	for i := range fs {
		s.add(fs[i].Parsed)
	}
}

// AddRouteConfig adds the services the overrides of every virtual host of
// rc name (a server's; nil: none).
func (s *Services) AddRouteConfig(rc *resources.RouteConfig) {
	if rc == nil {
		return
	}
	for _, vh := range rc.VirtualHosts {
		s.AddVirtualHost(vh)
	}
}

// AddVirtualHost adds the services the overrides of vh, its routes and
// their weighted clusters name (nil: none).
func (s *Services) AddVirtualHost(vh *resources.VirtualHost) {
	if vh == nil {
		return
	}
	s.addOverrides(vh.FilterOverrides)
	for _, r := range vh.Routes {
		s.addOverrides(r.FilterOverrides)
		for i := range r.WeightedClusters {
			s.addOverrides(r.WeightedClusters[i].FilterOverrides)
		}
	}
}

func (s *Services) addOverrides(m map[string]resources.HTTPFilterConfig) {
	for _, c := range m {
		s.add(c)
	}
}

// add adds the service c names, if any. A configuration type that names
// none is skipped.
func (s *Services) add(c resources.HTTPFilterConfig) {
	var gs *resources.GrpcService
	switch c := c.(type) {
	case *resources.ExtAuthzConfig:
		gs = c.GrpcService
	case *resources.ExtProcConfig:
		gs = c.GrpcService
	case *resources.ExtProcPerRouteConfig:
		gs = c.GrpcService
	}
	if gs != nil {
		*s = append(*s, gs)
	}
}

// ClientServices are the services a client's configuration names: its
// Listener's filters and the overrides of the virtual host it routes by
// (either nil: none).
func ClientServices(l *resources.Listener, vh *resources.VirtualHost) Services {
	var s Services
	if l != nil {
		s.AddFilters(l.HTTPFilters)
	}
	s.AddVirtualHost(vh)
	return s
}
