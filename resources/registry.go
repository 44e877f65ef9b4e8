package resources

import (
	"fmt"
	"sort"
	"sync"
)

// The registry maps type URLs to resource types. It is the package's only
// global state: built-in types register themselves in init, and users add
// their own with Register before creating clients.
var registry = struct {
	mu    sync.RWMutex
	types map[string]AnyType
}{types: make(map[string]AnyType)}

// Register adds t to the registry. Registering a second type for a type URL
// already registered is an error, so two packages cannot silently fight over
// one URL; use Replace to override a built-in type deliberately.
func Register(t AnyType) error {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, ok := registry.types[t.TypeURL()]; ok {
		return fmt.Errorf("resources: a type is already registered for %s", t.TypeURL())
	}
	registry.types[t.TypeURL()] = t
	return nil
}

// Replace registers t, replacing any type registered for its type URL.
func Replace(t AnyType) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.types[t.TypeURL()] = t
}

// Lookup returns the type registered for typeURL.
func Lookup(typeURL string) (AnyType, bool) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	t, ok := registry.types[typeURL]
	return t, ok
}

// Registered returns every registered type, sorted by type URL.
func Registered() []AnyType {
	registry.mu.RLock()
	out := make([]AnyType, 0, len(registry.types))
	for _, t := range registry.types {
		out = append(out, t)
	}
	registry.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].TypeURL() < out[j].TypeURL() })
	return out
}

func mustRegister(t AnyType) {
	if err := Register(t); err != nil {
		panic(err)
	}
}
