package resources

import "fmt"

// ReplaceHTTPFilter puts t in r under each of its type URLs, in place of
// whatever filter was registered for them: how a program changes a
// built-in filter in a registry of its own, as an HTTP server does to run
// the fault injection filter on the server side (package httpxds), which
// gRPC's server does not. It refuses a type with no type URL or no
// ParseConfig.
func (r *Registry) ReplaceHTTPFilter(t HTTPFilterType) error {
	if len(t.TypeURLs) == 0 || t.ParseConfig == nil {
		return fmt.Errorf("resources: HTTP filter %q needs TypeURLs and ParseConfig", t.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ft := &t
	for _, u := range t.TypeURLs {
		r.filters[messageName(u)] = ft
	}
	return nil
}
