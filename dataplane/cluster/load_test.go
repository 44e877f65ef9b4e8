package cluster

import (
	"testing"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// TestLRSServerOf checks which management server lrs_server self names: a
// cluster's authority's first server for an xdstp:// name (the top-level
// one when the authority lists none), else the first top-level server.
func TestLRSServerOf(t *testing.T) {
	t.Parallel()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: "top:1",
		Authorities: map[string]testutils.BootstrapAuthority{
			"own":     {Servers: []testutils.BootstrapServer{{URI: "own:1"}, {URI: "own:2"}}},
			"borrows": {},
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ cluster, want string }{
		{"plain", "top:1"},
		{"xdstp://own/envoy.config.cluster.v3.Cluster/c", "own:1"},
		{"xdstp://borrows/envoy.config.cluster.v3.Cluster/c", "top:1"},
		{"xdstp://unknown/envoy.config.cluster.v3.Cluster/c", "top:1"},
	} {
		s, ok := lrsServerOf(cfg, tc.cluster)
		if !ok || s.ServerURI != tc.want {
			t.Errorf("lrsServerOf(%q) = %q, %v; want %q", tc.cluster, s.ServerURI, ok, tc.want)
		}
	}
}
