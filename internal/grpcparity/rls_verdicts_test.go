package grpcparity

import (
	"testing"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// A valid route lookup config, and parts of invalid ones.
const (
	rlsKeyBuilders = `"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x-k"]}]}]`
	rlsGood        = `{` + rlsKeyBuilders + `, "lookupService": "127.0.0.1:1", "defaultTarget": "c", "cacheSizeBytes": "1000"}`
)

// rlsPlugin is a RouteLookupClusterSpecifier plugin with the route lookup
// config rlc (JSON).
func rlsPlugin(t *testing.T, name, rlc string, optional bool) *routev3.ClusterSpecifierPlugin {
	t.Helper()
	cfg, err := testutils.RouteLookupClusterSpecifier(rlc)
	if err != nil {
		t.Fatal(err)
	}
	return &routev3.ClusterSpecifierPlugin{
		Extension:  &corev3.TypedExtensionConfig{Name: name, TypedConfig: cfg},
		IsOptional: optional,
	}
}

// TestRLSPluginVerdicts: the RLS cluster specifier plugin (gRFC A28 and
// gRPC's RLS design): grpc-go supports it, so a plugin of that type is
// validated, optional or not, and its route configuration accepted or
// rejected by the RLS policy's config parser.
func TestRLSPluginVerdicts(t *testing.T) {
	typedStruct := func() *routev3.ClusterSpecifierPlugin {
		return &routev3.ClusterSpecifierPlugin{Extension: &corev3.TypedExtensionConfig{
			Name: "rls", TypedConfig: toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"}),
		}}
	}
	tests := []struct {
		name string
		rc   *routev3.RouteConfiguration
	}{
		{name: "required RLS plugin", rc: routeConfig(plugins(rlsPlugin(t, "rls", rlsGood, false)), route("/a/", plugin("rls")))},
		{name: "optional RLS plugin", rc: routeConfig(plugins(rlsPlugin(t, "rls", rlsGood, true)), route("/a/", plugin("rls")))},
		{name: "RLS plugin no route uses", rc: routeConfig(plugins(rlsPlugin(t, "rls", rlsGood, false)))},
		{name: "RLS plugin without a default target", rc: routeConfig(plugins(rlsPlugin(t, "rls", `{`+rlsKeyBuilders+`, "lookupService": "127.0.0.1:1", "cacheSizeBytes": "1000"}`, false)), route("/a/", plugin("rls")))},
		{name: "optional RLS plugin without a lookup service", rc: routeConfig(plugins(rlsPlugin(t, "rls", `{`+rlsKeyBuilders+`}`, true)), route("/a/", plugin("rls")))},
		{name: "RLS plugin without key builders", rc: routeConfig(plugins(rlsPlugin(t, "rls", `{"lookupService": "127.0.0.1:1"}`, false)), route("/a/", plugin("rls")))},
		{name: "unused RLS plugin with an empty config", rc: routeConfig(plugins(rlsPlugin(t, "rls", `{}`, true)))},
		{name: "RLS plugin with a lookup service of an unknown scheme", rc: routeConfig(plugins(rlsPlugin(t, "rls", `{`+rlsKeyBuilders+`, "lookupService": "acme:///x"}`, false)), route("/a/", plugin("rls")))},
		{name: "RLS plugin with a required_match header", rc: routeConfig(plugins(rlsPlugin(t, "rls",
			`{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x-k"], "requiredMatch": true}]}], "lookupService": "127.0.0.1:1"}`, false)), route("/a/", plugin("rls")))},
		{name: "RLS plugin with a key used twice", rc: routeConfig(plugins(rlsPlugin(t, "rls",
			`{"grpcKeybuilders": [{"names": [{"service": "s"}], "headers": [{"key": "k", "names": ["x-k"]}, {"key": "k", "names": ["x-j"]}]}], "lookupService": "127.0.0.1:1"}`, false)), route("/a/", plugin("rls")))},
		{name: "RLS plugin with a stale age over the max age", rc: routeConfig(plugins(rlsPlugin(t, "rls",
			`{`+rlsKeyBuilders+`, "lookupService": "127.0.0.1:1", "maxAge": "10s", "staleAge": "20s", "cacheSizeBytes": "1000"}`, false)), route("/a/", plugin("rls")))},
		{name: "RLS plugin with a negative cache size", rc: routeConfig(plugins(rlsPlugin(t, "rls",
			`{`+rlsKeyBuilders+`, "lookupService": "127.0.0.1:1", "cacheSizeBytes": "-1"}`, false)), route("/a/", plugin("rls")))},
		{name: "RLS config bytes that do not parse", rc: routeConfig(plugins(&routev3.ClusterSpecifierPlugin{Extension: &corev3.TypedExtensionConfig{
			Name: "rls", TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier", Value: []byte{0xff}},
		}}), route("/a/", plugin("rls")))},
		{name: "RLS plugin in a TypedStruct", rc: routeConfig(plugins(typedStruct()), route("/a/", plugin("rls")))},
		{name: "RLS plugin of another URL prefix", rc: routeConfig(plugins(func() *routev3.ClusterSpecifierPlugin {
			p := rlsPlugin(t, "rls", rlsGood, false)
			p.Extension.TypedConfig.TypeUrl = "example.com/grpc.lookup.v1.RouteLookupClusterSpecifier"
			return p
		}()), route("/a/", plugin("rls")))},
	}
	// The registry of a client grpcxds's Builder makes: importing grpcxds
	// registers nothing.
	reg := resources.DefaultRegistry().Clone()
	if err := grpcxds.RegisterRLS(reg); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := resources.RouteConfigType.DecodeTyped(&resources.DecodeContext{Registry: reg}, toAny(tt.rc))
			ldsNACK, rdsNACK := grpcGoVerdicts(t, listener(router()), tt.rc)
			if ldsNACK != "" {
				t.Fatalf("grpc-go rejected the listener: %s", ldsNACK)
			}
			t.Logf("goxds %v; grpc-go %q", err, rdsNACK)
			compare(t, err, rdsNACK)
		})
	}
}
