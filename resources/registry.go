package resources

import (
	"fmt"
	"maps"
	"sort"
	"sync"
)

// Registry is a set of plug-ins a client decodes with: resource types by
// type URL, HTTP filter types (gRFC A39) and cluster specifier plugin types
// (gRFC A28 as the RLS support amends it). It is safe for concurrent use.
//
// The process has one default registry ([DefaultRegistry]), which the
// built-in types and filters, and packages' init functions, register into
// through the package functions ([Register], [RegisterHTTPFilter],
// [RegisterClusterSpecifier], ...). A client does not decode with that
// registry itself but with its own copy, taken when it is made (see
// client.Options.Registry): registering into the default afterwards, or
// into another client's registry, never changes how it validates
// resources, and two clients of one process may accept different filters.
type Registry struct {
	mu         sync.RWMutex
	types      map[string]AnyType
	filters    map[string]*HTTPFilterType       // by full proto message name
	specifiers map[string]*ClusterSpecifierType // by full type URL
}

// NewRegistry returns an empty registry: no resource type, no HTTP filter
// (not even the router) and no cluster specifier plugin. Most callers want
// DefaultRegistry().Clone() instead, and add to it.
func NewRegistry() *Registry {
	return &Registry{
		types:      make(map[string]AnyType),
		filters:    make(map[string]*HTTPFilterType),
		specifiers: make(map[string]*ClusterSpecifierType),
	}
}

// defaultRegistry is the package's only global state: built-in types and
// filters register into it in init, and users add their own before
// creating clients.
var defaultRegistry = NewRegistry()

// DefaultRegistry returns the process-wide default registry, the one the
// package functions (Register, Lookup, RegisterHTTPFilter, ...) work on and
// clients copy when their options name none. It is the registry itself,
// not a copy: add to it only from init functions, before clients are
// made. For a registry of your own, Clone it.
func DefaultRegistry() *Registry { return defaultRegistry }

// Clone returns a copy of r, which later changes to either leave the other
// alone. Registered values themselves (types, filter and plugin
// descriptions) are shared, as they are immutable.
func (r *Registry) Clone() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return &Registry{
		types:      maps.Clone(r.types),
		filters:    maps.Clone(r.filters),
		specifiers: maps.Clone(r.specifiers),
	}
}

// Register adds t to r. Registering a second type for a type URL already
// registered is an error, so two packages cannot silently fight over one
// URL; use Replace to override a built-in type deliberately.
func (r *Registry) Register(t AnyType) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.types[t.TypeURL()]; ok {
		return fmt.Errorf("resources: a type is already registered for %s", t.TypeURL())
	}
	r.types[t.TypeURL()] = t
	return nil
}

// Replace registers t in r, replacing any type registered for its type URL.
func (r *Registry) Replace(t AnyType) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types[t.TypeURL()] = t
}

// Lookup returns the type registered in r for typeURL.
func (r *Registry) Lookup(typeURL string) (AnyType, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[typeURL]
	return t, ok
}

// Types returns every type registered in r, sorted by type URL.
func (r *Registry) Types() []AnyType {
	r.mu.RLock()
	out := make([]AnyType, 0, len(r.types))
	for _, t := range r.types {
		out = append(out, t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].TypeURL() < out[j].TypeURL() })
	return out
}

// Register adds t to the default registry (see Registry.Register).
func Register(t AnyType) error { return defaultRegistry.Register(t) }

// Replace registers t in the default registry, replacing any type
// registered for its type URL.
func Replace(t AnyType) { defaultRegistry.Replace(t) }

// Lookup returns the type the default registry has for typeURL.
func Lookup(typeURL string) (AnyType, bool) { return defaultRegistry.Lookup(typeURL) }

// Registered returns every type of the default registry, sorted by type
// URL.
func Registered() []AnyType { return defaultRegistry.Types() }

func mustRegister(t AnyType) {
	if err := Register(t); err != nil {
		panic(err)
	}
}
