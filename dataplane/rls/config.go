package rls

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits and defaults of a route lookup config, as gRPC applies them.
const (
	// MaxMaxAge caps max_age, and stale_age with it; it is also the age
	// of an entry when max_age is unset.
	MaxMaxAge = 5 * time.Minute
	// MaxCacheSizeBytes caps cache_size_bytes (grpc-go's cap).
	MaxCacheSizeBytes = 40 << 20
	// DefaultLookupServiceTimeout is the lookup's deadline when
	// lookup_service_timeout is unset.
	DefaultLookupServiceTimeout = 10 * time.Second
)

// Config is a validated route lookup config
// (grpc.lookup.v1.RouteLookupConfig), with gRPC's defaults and caps
// applied. It is immutable once parsed: decoded route configurations
// share it.
type Config struct {
	// Keys builds a request's lookup keys (grpc_keybuilders).
	Keys *KeyBuilders
	// LookupService is the target of the route lookup service, as the
	// config gave it; the adapter checks that its transport can reach
	// such a target.
	LookupService string
	// LookupServiceTimeout is each lookup's deadline.
	LookupServiceTimeout time.Duration
	// MaxAge is how long a lookup's answer is used; StaleAge (at most
	// MaxAge) how long before it is looked up again in the background.
	MaxAge, StaleAge time.Duration
	// CacheSizeBytes bounds the cache (see the package doc for what
	// counts).
	CacheSizeBytes int64
	// DefaultTarget is where requests go while no answer is at hand
	// (a failed or throttled lookup); "": they fail.
	DefaultTarget string
}

// rawConfig is a RouteLookupConfig as decoded, before validation.
type rawConfig struct {
	keyBuilders          []rawKeyBuilder
	lookupService        string
	lookupServiceTimeout time.Duration
	maxAge, staleAge     time.Duration
	maxAgeSet            bool
	staleAgeSet          bool
	cacheSizeBytes       int64
	defaultTarget        string
}

// rawKeyBuilder is a GrpcKeyBuilder as decoded.
type rawKeyBuilder struct {
	names                 []rawName
	headers               []rawMatcher
	host, service, method string // extra_keys
	constantKeys          map[string]string
}

// rawName is a GrpcKeyBuilder.Name.
type rawName struct{ service, method string }

// rawMatcher is a NameMatcher.
type rawMatcher struct {
	key           string
	names         []string
	requiredMatch bool
}

// validate turns a decoded config into a Config, or says what is wrong
// with it: the checks and defaults of gRPC's RLS design (gRFC A27), which
// make a route configuration with such a plugin invalid, optional or not.
func (rc *rawConfig) validate() (*Config, error) {
	keys, err := newKeyBuilders(rc.keyBuilders)
	if err != nil {
		return nil, err
	}
	if rc.lookupService == "" {
		return nil, errors.New("lookup_service is empty")
	}
	cfg := &Config{
		Keys:                 keys,
		LookupService:        rc.lookupService,
		LookupServiceTimeout: rc.lookupServiceTimeout,
		MaxAge:               rc.maxAge,
		StaleAge:             rc.staleAge,
		CacheSizeBytes:       rc.cacheSizeBytes,
		DefaultTarget:        rc.defaultTarget,
	}
	if cfg.LookupServiceTimeout == 0 {
		cfg.LookupServiceTimeout = DefaultLookupServiceTimeout
	}
	// An unset age is the cap; a stale_age needs a max_age to be stale
	// within; both are capped, stale_age at max_age too. max_age alone
	// is capped at MaxMaxAge as well.
	if rc.staleAgeSet && !rc.maxAgeSet {
		return nil, errors.New("stale_age is set but max_age is not")
	}
	if !rc.maxAgeSet || cfg.MaxAge > MaxMaxAge {
		cfg.MaxAge = MaxMaxAge
	}
	if !rc.staleAgeSet || cfg.StaleAge > MaxMaxAge {
		cfg.StaleAge = MaxMaxAge
	}
	if cfg.StaleAge > cfg.MaxAge {
		cfg.StaleAge = cfg.MaxAge
	}
	if cfg.CacheSizeBytes <= 0 {
		return nil, fmt.Errorf("cache_size_bytes is %d; it must be positive", cfg.CacheSizeBytes)
	}
	if cfg.CacheSizeBytes > MaxCacheSizeBytes {
		cfg.CacheSizeBytes = MaxCacheSizeBytes
	}
	return cfg, nil
}

// newKeyBuilders validates grpc_keybuilders: at least one; each with a
// name, every name with a service, a method without "/", no path named
// twice; no required_match header; no key given twice within a builder
// (headers and constant_keys share one key space, which extra_keys may
// not reuse). Header keys and names are not checked further, as gRPC
// does not: a route configuration gRPC accepts is accepted.
func newKeyBuilders(in []rawKeyBuilder) (*KeyBuilders, error) {
	if len(in) == 0 {
		return nil, errors.New("grpc_keybuilders is empty: a GrpcKeyBuilder is required")
	}
	kb := &KeyBuilders{byPath: make(map[string]*keyBuilder)}
	for i, rb := range in {
		where := fmt.Sprintf("grpc_keybuilders[%d]", i)
		b := &keyBuilder{host: rb.host, service: rb.service, method: rb.method, constants: rb.constantKeys}
		seen := make(map[string]bool)
		for k := range rb.constantKeys {
			seen[k] = true
		}
		for j, h := range rb.headers {
			switch {
			case h.requiredMatch:
				return nil, fmt.Errorf("%s (GrpcKeyBuilder): headers[%d] (key %q) sets required_match, which gRPC does not allow", where, j, h.key)
			case seen[h.key]:
				return nil, fmt.Errorf("%s (GrpcKeyBuilder): key %q is given twice (headers, constant_keys and extra_keys share keys)", where, h.key)
			}
			seen[h.key] = true
			names := make([]string, len(h.names))
			for n, name := range h.names {
				// Headers are matched by their lower-case name, as
				// both gRPC metadata and HTTP/2 carry them.
				names[n] = strings.ToLower(name)
			}
			b.headers = append(b.headers, headerKey{key: h.key, names: names})
		}
		// An extra key may not be a header's or constant's key (gRPC
		// does not compare the extra keys with one another).
		for _, extra := range []struct{ field, key string }{{"host", rb.host}, {"service", rb.service}, {"method", rb.method}} {
			if seen[extra.key] {
				return nil, fmt.Errorf("%s (GrpcKeyBuilder): extra_keys.%s %q is the key of a header or constant too", where, extra.field, extra.key)
			}
		}
		if len(rb.names) == 0 {
			return nil, fmt.Errorf("%s (GrpcKeyBuilder) has no names", where)
		}
		for j, n := range rb.names {
			switch {
			case n.service == "":
				return nil, fmt.Errorf("%s (GrpcKeyBuilder): names[%d] has no service", where, j)
			case strings.Contains(n.method, "/"):
				return nil, fmt.Errorf("%s (GrpcKeyBuilder): names[%d] has method %q, which contains \"/\"", where, j, n.method)
			}
			path := "/" + n.service + "/" + n.method
			if _, dup := kb.byPath[path]; dup {
				return nil, fmt.Errorf("%s (GrpcKeyBuilder): names[%d] (service %q, method %q) is named by an earlier GrpcKeyBuilder too", where, j, n.service, n.method)
			}
			kb.byPath[path] = b
		}
	}
	return kb, nil
}
