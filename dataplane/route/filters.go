package route

import "github.com/goxds/xds/resources"

// The HTTP filters of a listener run on each request (gRFC A39), in order,
// before it is sent; the router, always last, is the transport itself.
// Each runs with its effective configuration for the request: the most
// specific typed_per_filter_config override (the weighted cluster's, else
// the route's, else the virtual host's), else its own. An override that
// disables the filter switches it off there; a filter disabled in the
// listener runs only where an override switches it on. What each filter
// does is the adapter's: this package says which run, with what.

// FilterConfig is one HTTP filter to run for a request, with its
// configuration for that request.
type FilterConfig struct {
	// Index is the filter's place in the listener's HTTP filters, by which
	// an adapter finds what it made of the filter.
	Index int
	// Filter is the listener's filter (shared, not to be modified).
	Filter *resources.HTTPFilter
	// Config is its effective configuration, as its
	// resources.HTTPFilterType parsed it.
	Config resources.HTTPFilterConfig
}

// chainFilter is a non-terminal filter of the listener.
type chainFilter struct {
	index  int
	filter *resources.HTTPFilter
}

// chainOf returns the filters of l that run before the router.
func chainOf(l *resources.Listener) []chainFilter {
	if l == nil {
		return nil
	}
	var out []chainFilter
	for i := range l.HTTPFilters {
		f := &l.HTTPFilters[i]
		if t, ok := resources.LookupHTTPFilter(f.TypeURL); ok && t.Terminal {
			continue
		}
		out = append(out, chainFilter{index: i, filter: f})
	}
	return out
}

// filtersFor returns the filters that run for a request of virtual host vh
// routed by r, to its weighted cluster wc when wc >= 0, each with its
// effective configuration; nil if none runs.
func (t *Table) filtersFor(vh *resources.VirtualHost, r *resources.Route, wc int) []FilterConfig {
	levels := make([]map[string]resources.HTTPFilterConfig, 0, 3)
	if wc >= 0 {
		levels = append(levels, r.WeightedClusters[wc].FilterOverrides)
	}
	levels = append(levels, r.FilterOverrides)
	if vh != nil {
		levels = append(levels, vh.FilterOverrides)
	}
	var out []FilterConfig
	for _, f := range t.filters {
		if config, on := f.filter.EffectiveConfig(levels...); on {
			out = append(out, FilterConfig{Index: f.index, Filter: f.filter, Config: config})
		}
	}
	return out
}
