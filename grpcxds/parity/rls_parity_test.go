package parity_test

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc/metadata"

	"github.com/goxds/xds/testutils"
)

// A route by the RLS cluster specifier plugin sends an RPC to the backend
// of the cluster the lookup service names for its keys, through goxds as
// through grpc-go's own xds resolver; to the default target when the
// lookup fails.
func TestParityRLS(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	a, b, d := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "d")
	rls, err := testutils.StartRLSServer(testutils.RLSTargetsByKey("k", map[string]string{"a": "A", "b": "B"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rls.Stop)
	cfg, err := testutils.RouteLookupClusterSpecifier(fmt.Sprintf(`{
		"grpcKeybuilders": [{"names": [{"service": "goxds.test.Greeter"}], "headers": [{"key": "k", "names": ["x-k"]}]}],
		"lookupService": %q, "lookupServiceTimeout": "10s", "cacheSizeBytes": "1000000", "defaultTarget": "D"}`, rls.Address()))
	if err != nil {
		t.Fatal(err)
	}
	rc := vhost(&routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_ClusterSpecifierPlugin{ClusterSpecifierPlugin: "rls"},
		}},
	})
	rc.ClusterSpecifierPlugins = []*routev3.ClusterSpecifierPlugin{{Extension: &corev3.TypedExtensionConfig{Name: "rls", TypedConfig: cfg}}}
	p.update(tree(rc, nil, clusters("A", "B", "D"), eds("A", a), eds("B", b), eds("D", d)))

	for name, conn := range p.conns {
		for _, key := range []string{"a", "b", "other", "a"} {
			want := key
			if key == "other" {
				want = "d"
			}
			got, err := call(metadata.AppendToOutgoingContext(p.ctx, "x-k", key), conn)
			if err != nil || got != want {
				t.Errorf("%s: RPC with x-k %q served by %q, err %v; want %q", name, key, got, err, want)
			}
		}
	}
}
