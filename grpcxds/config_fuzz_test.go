package grpcxds

import (
	"encoding/json"
	"testing"
)

// FuzzParseBalancerConfig feeds arbitrary service-config JSON to the
// balancer's config parser, which gRPC calls with whatever a service config
// holds. It must never panic, and a config it accepts has a positive
// failover timeout, and a cluster idle timeout only with connection on
// first RPC, positive.
func FuzzParseBalancerConfig(f *testing.F) {
	for _, s := range []string{`{}`, `{"failoverTimeout":"10s"}`, `{"failoverTimeout":"-1s"}`,
		`{"failoverTimeout":5}`, `[]`, `null`, `{"failoverTimeout":"1h0m0.5s","other":true}`,
		`{"connectOnFirstRPC":true}`, `{"connectOnFirstRPC":true,"clusterIdleTimeout":"30m"}`,
		`{"clusterIdleTimeout":"30m"}`, `{"connectOnFirstRPC":true,"clusterIdleTimeout":"0s"}`,
		`{"connectOnFirstRPC":"yes"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		cfg, err := balancerBuilder{}.ParseConfig(json.RawMessage(js))
		if err != nil {
			if cfg != nil {
				t.Fatalf("error %v with a config", err)
			}
			return
		}
		c, ok := cfg.(*lbConfig)
		if !ok || c.failoverTimeout <= 0 || c.clusterIdleTimeout < 0 || (c.clusterIdleTimeout > 0 && !c.connectOnFirstRPC) {
			t.Fatalf("accepted %q as %#v", js, cfg)
		}
	})
}
