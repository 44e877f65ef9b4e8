package rls

import (
	"testing"
)

// FuzzParseClusterSpecifier: any bytes give a config within gRPC's caps,
// with key builders and a lookup service, or an error, and never a panic.
func FuzzParseClusterSpecifier(f *testing.F) {
	f.Add([]byte{0x0a, 0x00})
	f.Add(inConfig(configMaxAge, durationBytes(10, 0)))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseClusterSpecifier(b)
		if err != nil {
			return
		}
		switch {
		case cfg.Keys == nil || len(cfg.Keys.byPath) == 0:
			t.Errorf("config without key builders: %+v", cfg)
		case cfg.LookupService == "":
			t.Errorf("config without a lookup service: %+v", cfg)
		case cfg.CacheSizeBytes <= 0 || cfg.CacheSizeBytes > MaxCacheSizeBytes:
			t.Errorf("cache size %d out of bounds", cfg.CacheSizeBytes)
		case cfg.MaxAge > MaxMaxAge || cfg.StaleAge > cfg.MaxAge || cfg.LookupServiceTimeout == 0:
			t.Errorf("ages or timeout out of bounds: %+v", cfg)
		}
		// Any request gets keys without a panic.
		cfg.Keys.Keys(&Request{Path: "/s/m", Headers: headers{"x": {"y"}}})
	})
}
