package testutils

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// typedResources maps type URL → resource name → resource, the shape both
// go-control-plane caches consume.
type typedResources map[string]map[string]types.ResourceWithTTL

// byType checks r (non-nil resources, non-empty unique names, TTL keys that
// name a resource) and regroups it by type URL.
func (r Resources) byType() (typedResources, error) {
	out := make(typedResources)
	add := func(typeURL string, m proto.Message) error {
		name, ok := resourceName(m)
		switch {
		case !ok:
			return fmt.Errorf("testutils: a %s resource (%T) has no name", typeURL, m)
		case out[typeURL] == nil:
			out[typeURL] = make(map[string]types.ResourceWithTTL)
		case out[typeURL][name].Resource != nil:
			return fmt.Errorf("testutils: two %s resources named %q", typeURL, name)
		}
		out[typeURL][name] = types.ResourceWithTTL{Resource: m}
		return nil
	}
	var errs []error
	for _, l := range r.Listeners {
		errs = append(errs, add(resourcev3.ListenerType, l))
	}
	for _, rc := range r.Routes {
		errs = append(errs, add(resourcev3.RouteType, rc))
	}
	for _, c := range r.Clusters {
		errs = append(errs, add(resourcev3.ClusterType, c))
	}
	for _, e := range r.Endpoints {
		errs = append(errs, add(resourcev3.EndpointType, e))
	}
	for typeURL, ms := range r.Others {
		for _, m := range ms {
			errs = append(errs, add(typeURL, m))
		}
	}
	for name, m := range r.EndpointCollections {
		switch {
		case name == "" || m == nil:
			errs = append(errs, fmt.Errorf("testutils: an LbEndpointCollection needs a name and a message, got %q and %v", name, m))
			continue
		case out[EndpointCollectionTypeURL] == nil:
			out[EndpointCollectionTypeURL] = make(map[string]types.ResourceWithTTL)
		}
		out[EndpointCollectionTypeURL][name] = types.ResourceWithTTL{Resource: m}
	}
	for key, ttl := range r.TTLs {
		res, ok := out[key.TypeURL][key.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("testutils: TTL for %s %q, which is not among the resources", key.TypeURL, key.Name))
			continue
		}
		res.TTL = &ttl
		out[key.TypeURL][key.Name] = res
	}
	return out, errors.Join(errs...)
}

// resourceName reports the xDS name of m, if m is non-nil and has one.
func resourceName(m proto.Message) (string, bool) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return "", false
	}
	var name string
	switch v := m.(type) {
	case *endpointv3.ClusterLoadAssignment:
		name = v.GetClusterName()
	case interface{ GetName() string }:
		name = v.GetName()
	}
	return name, name != ""
}

// sameResources reports whether a and b hold equal resources with equal TTLs.
func sameResources(a, b map[string]types.ResourceWithTTL) bool {
	return maps.EqualFunc(a, b, func(x, y types.ResourceWithTTL) bool {
		sameTTL := (x.TTL == nil) == (y.TTL == nil) && (x.TTL == nil || *x.TTL == *y.TTL)
		return sameTTL && proto.Equal(x.Resource, y.Resource)
	})
}

// snapshot is the cache.ResourceSnapshot the server gives go-control-plane's
// snapshot cache. Unlike cache.Snapshot it accepts any type URL, and each
// type keeps its own version. It is immutable once handed over.
type snapshot struct {
	versions map[string]string // type URL → version of that type
	items    typedResources

	hashOnce sync.Once
	hashes   map[string]map[string]string // type URL → name → hash, for delta
	hashErr  error
}

var _ cache.ResourceSnapshot = (*snapshot)(nil)

func (s *snapshot) GetVersion(typeURL string) string { return s.versions[typeURL] }

func (s *snapshot) GetResourcesAndTTL(typeURL string) map[string]types.ResourceWithTTL {
	return s.items[typeURL]
}

func (s *snapshot) GetResources(typeURL string) map[string]types.Resource {
	out := make(map[string]types.Resource, len(s.items[typeURL]))
	for name, r := range s.items[typeURL] {
		out[name] = r.Resource
	}
	return out
}

func (s *snapshot) ConstructVersionMap() error {
	s.hashOnce.Do(func() {
		s.hashes = make(map[string]map[string]string, len(s.items))
		for typeURL, rs := range s.items {
			s.hashes[typeURL] = make(map[string]string, len(rs))
			for name, r := range rs {
				b, err := cache.MarshalResource(r.Resource)
				if err != nil {
					s.hashErr = fmt.Errorf("testutils: marshalling %s %q: %w", typeURL, name, err)
					return
				}
				s.hashes[typeURL][name] = cache.HashResource(b)
			}
		}
	})
	return s.hashErr
}

func (s *snapshot) GetVersionMap(typeURL string) map[string]string { return s.hashes[typeURL] }

// linearCaches serves ManagementServerOptions.Linear: one
// go-control-plane LinearCache per node and type URL, made on first use.
type linearCaches struct {
	mu     sync.Mutex
	caches map[linearKey]*cache.LinearCache
	log    slogAdapter
}

type linearKey struct{ node, typeURL string }

var _ cache.Cache = (*linearCaches)(nil)

func (l *linearCaches) get(node, typeURL string) *cache.LinearCache {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := linearKey{node, typeURL}
	lc := l.caches[k]
	if lc == nil {
		lc = cache.NewLinearCache(typeURL, cache.WithLogger(l.log))
		l.caches[k] = lc
	}
	return lc
}

// typesOf lists the type URLs node has caches for.
func (l *linearCaches) typesOf(node string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.caches {
		if k.node == node {
			out = append(out, k.typeURL)
		}
	}
	return out
}

// update makes node's caches hold exactly rs, touching only the resources
// that changed so that watchers hear only about those.
func (l *linearCaches) update(node string, rs typedResources) error {
	typeURLs := make(map[string]bool)
	for _, typeURL := range l.typesOf(node) {
		typeURLs[typeURL] = true
	}
	for typeURL, byName := range rs {
		typeURLs[typeURL] = true
		for name, r := range byName {
			if r.TTL != nil {
				return fmt.Errorf("testutils: %s %q has a TTL, which the linear cache cannot serve", typeURL, name)
			}
		}
	}
	var errs []error
	for typeURL := range typeURLs {
		lc := l.get(node, typeURL)
		current := lc.GetResources()
		changed := make(map[string]types.Resource)
		var deleted []string
		for name, r := range rs[typeURL] {
			if old, ok := current[name]; !ok || !proto.Equal(old, r.Resource) {
				changed[name] = r.Resource
			}
		}
		for name := range current {
			if _, ok := rs[typeURL][name]; !ok {
				deleted = append(deleted, name)
			}
		}
		if len(changed) > 0 || len(deleted) > 0 {
			errs = append(errs, lc.UpdateResources(changed, deleted))
		}
	}
	return errors.Join(errs...)
}

func (l *linearCaches) CreateWatch(req *cache.Request, sub cache.Subscription, ch chan cache.Response) (func(), error) {
	return l.get(req.GetNode().GetId(), req.GetTypeUrl()).CreateWatch(req, sub, ch)
}

func (l *linearCaches) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, ch chan cache.DeltaResponse) (func(), error) {
	return l.get(req.GetNode().GetId(), req.GetTypeUrl()).CreateDeltaWatch(req, sub, ch)
}

func (l *linearCaches) Fetch(context.Context, *cache.Request) (cache.Response, error) {
	return nil, errors.New("testutils: REST fetch is not served")
}

// slogAdapter passes go-control-plane's log lines to an slog.Logger, which
// may be nil to drop them.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) log(level slog.Level, format string, args []any) {
	if a.l == nil || !a.l.Enabled(context.Background(), level) {
		return
	}
	a.l.Log(context.Background(), level, fmt.Sprintf(format, args...), "component", "go-control-plane")
}

func (a slogAdapter) Debugf(format string, args ...any) { a.log(slog.LevelDebug, format, args) }
func (a slogAdapter) Infof(format string, args ...any)  { a.log(slog.LevelInfo, format, args) }
func (a slogAdapter) Warnf(format string, args ...any)  { a.log(slog.LevelWarn, format, args) }
func (a slogAdapter) Errorf(format string, args ...any) { a.log(slog.LevelError, format, args) }
