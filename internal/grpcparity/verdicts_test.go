package grpcparity

import (
	"context"
	"sync"
	"testing"
	"time"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds" // grpc-go's xDS resolver, the yardstick
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

const (
	listenerName = "lis"
	routeName    = "rc"
	// verdictTimeout bounds one case's exchange with grpc-go's client.
	verdictTimeout = 20 * time.Second
)

func toAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func filter(name string, cfg *anypb.Any, optional bool) *hcmv3.HttpFilter {
	f := &hcmv3.HttpFilter{Name: name, IsOptional: optional}
	if cfg != nil {
		f.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: cfg}
	}
	return f
}

func router() *hcmv3.HttpFilter { return filter("router", toAny(&routerv3.Router{}), false) }

var (
	unknown = &anypb.Any{TypeUrl: "type.googleapis.com/acme.Filter"}
	fault   = toAny(&faultv3.HTTPFault{MaxActiveFaults: wrapperspb.UInt32(1)})
)

// listener fetches route configuration rc with the filters given.
func listener(filters ...*hcmv3.HttpFilter) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
			RouteConfigName: routeName,
		}},
		HttpFilters: filters,
	}
	return &listenerv3.Listener{Name: listenerName, ApiListener: &listenerv3.ApiListener{ApiListener: toAny(hcm)}}
}

func route(prefix string, cs func(a *routev3.RouteAction)) *routev3.Route {
	a := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}
	if cs != nil {
		cs(a)
	}
	return &routev3.Route{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Route{Route: a},
	}
}

// routeConfig has one virtual host for every domain: the routes given,
// then a default route to cluster c.
func routeConfig(edit func(rc *routev3.RouteConfiguration), rs ...*routev3.Route) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{Name: routeName, VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"}, Routes: append(rs, route("/", nil)),
	}}}
	if edit != nil {
		edit(rc)
	}
	return rc
}

func clusterHeader(a *routev3.RouteAction) {
	a.ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
}

func plugin(name string) func(a *routev3.RouteAction) {
	return func(a *routev3.RouteAction) {
		a.ClusterSpecifier = &routev3.RouteAction_ClusterSpecifierPlugin{ClusterSpecifierPlugin: name}
	}
}

func plugins(ps ...*routev3.ClusterSpecifierPlugin) func(rc *routev3.RouteConfiguration) {
	return func(rc *routev3.RouteConfiguration) { rc.ClusterSpecifierPlugins = ps }
}

func csp(name string, optional bool) *routev3.ClusterSpecifierPlugin {
	return &routev3.ClusterSpecifierPlugin{
		Extension:  &corev3.TypedExtensionConfig{Name: name, TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/acme.Plugin"}},
		IsOptional: optional,
	}
}

func vhOverrides(m map[string]*anypb.Any) func(rc *routev3.RouteConfiguration) {
	return func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[0].TypedPerFilterConfig = m }
}

func filterConfig(cfg *anypb.Any, optional, disabled bool) *anypb.Any {
	return toAny(&routev3.FilterConfig{Config: cfg, IsOptional: optional, Disabled: disabled})
}

// TestListenerVerdicts: gRFC A39's rules on a listener's HTTP filters.
func TestListenerVerdicts(t *testing.T) {
	tests := []struct {
		name string
		lis  *listenerv3.Listener
	}{
		{"router only", listener(router())},
		{"fault and router", listener(filter("fault", fault, false), router())},
		{"unknown required filter", listener(filter("acme", unknown, false), router())},
		{"unknown optional filter", listener(filter("acme", unknown, true), router())},
		{"required filter without a config", listener(filter("acme", nil, false), router())},
		{"optional filter without a config", listener(filter("acme", nil, true), router())},
		{"required filter from ecds", listener(&hcmv3.HttpFilter{Name: "acme", ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{}}, router())},
		{"optional filter from ecds", listener(&hcmv3.HttpFilter{Name: "acme", IsOptional: true, ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{}}, router())},
		{"fault in a typed struct", listener(filter("fault", toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"}), false), router())},
		{"unknown optional in a typed struct", listener(filter("acme", toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/acme.X"}), true), router())},
		{"unknown required in a typed struct", listener(filter("acme", toAny(&udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/acme.X"}), false), router())},
		{"fault garbage", listener(filter("fault", &anypb.Any{TypeUrl: fault.GetTypeUrl(), Value: []byte{0xff}}, false), router())},
		{"router not last", listener(router(), filter("fault", fault, false))},
		{"no router", listener(filter("fault", fault, false))},
		{"no filters", listener()},
		{"only an optional unknown filter", listener(filter("acme", unknown, true))},
		{"duplicate names", listener(filter("x", fault, false), filter("x", fault, false), router())},
		{"disabled router", func() *listenerv3.Listener {
			r := router()
			r.Disabled = true
			return listener(r)
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := resources.ListenerType.DecodeTyped(nil, toAny(tt.lis))
			grpcNACK, _ := grpcGoVerdicts(t, tt.lis, nil)
			t.Logf("goxds %v; grpc-go %q", err, grpcNACK)
			compare(t, err, grpcNACK)
		})
	}
}

// TestRouteConfigVerdicts: gRFC A28's skipped routes and A39's overrides.
func TestRouteConfigVerdicts(t *testing.T) {
	tests := []struct {
		name string
		rc   *routev3.RouteConfiguration
		// differs explains a verdict that is knowingly not grpc-go's.
		differs string
	}{
		{name: "plain", rc: routeConfig(nil)},
		{name: "cluster_header route", rc: routeConfig(nil, route("/a/", clusterHeader))},
		{name: "inline plugin route", rc: routeConfig(nil, route("/a/", func(a *routev3.RouteAction) {
			a.ClusterSpecifier = &routev3.RouteAction_InlineClusterSpecifierPlugin{InlineClusterSpecifierPlugin: csp("p", false)}
		}))},
		{name: "route without a cluster specifier", rc: routeConfig(nil, route("/a/", func(a *routev3.RouteAction) { a.ClusterSpecifier = nil }))},
		{name: "optional unknown plugin", rc: routeConfig(plugins(csp("p", true)), route("/a/", plugin("p")))},
		{name: "required unknown plugin", rc: routeConfig(plugins(csp("p", false)), route("/a/", plugin("p")))},
		{name: "required unknown plugin no route uses", rc: routeConfig(plugins(csp("p", false)))},
		{name: "plugin not in the list", rc: routeConfig(plugins(csp("p", true)), route("/a/", plugin("q")))},
		{name: "skipped route with an unknown override", rc: func() *routev3.RouteConfiguration {
			r := route("/a/", clusterHeader)
			r.TypedPerFilterConfig = map[string]*anypb.Any{"acme": unknown}
			return routeConfig(nil, r)
		}()},
		{name: "fault override", rc: routeConfig(vhOverrides(map[string]*anypb.Any{"fault": fault}))},
		{name: "fault override in a FilterConfig", rc: routeConfig(vhOverrides(map[string]*anypb.Any{"fault": filterConfig(fault, false, false)}))},
		{name: "unknown override", rc: routeConfig(vhOverrides(map[string]*anypb.Any{"acme": unknown}))},
		{name: "unknown optional override", rc: routeConfig(vhOverrides(map[string]*anypb.Any{"acme": filterConfig(unknown, true, false)}))},
		{name: "unknown required override in a FilterConfig", rc: routeConfig(vhOverrides(map[string]*anypb.Any{"acme": filterConfig(unknown, false, false)}))},
		{name: "router override", rc: routeConfig(vhOverrides(map[string]*anypb.Any{"router": toAny(&routerv3.Router{})}))},
		{name: "unknown override on a route", rc: func() *routev3.RouteConfiguration {
			r := route("/a/", nil)
			r.TypedPerFilterConfig = map[string]*anypb.Any{"acme": unknown}
			return routeConfig(nil, r)
		}()},
		{name: "unknown override on a weighted cluster", rc: routeConfig(nil, route("/a/", func(a *routev3.RouteAction) {
			a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{{
				Name: "c", Weight: wrapperspb.UInt32(1), TypedPerFilterConfig: map[string]*anypb.Any{"acme": unknown},
			}}}}
		}))},
		{
			name: "weighted cluster entry by header",
			rc: routeConfig(nil, route("/a/", func(a *routev3.RouteAction) {
				a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
					{Name: "c", Weight: wrapperspb.UInt32(1)},
					{ClusterHeader: "x-cluster", Weight: wrapperspb.UInt32(1)},
				}}}
			})),
			differs: "grpc-go keeps the entry as a cluster with an empty name, which no Cluster resource can have; " +
				"goxds rejects the route configuration, as Envoy does, rather than send RPCs nowhere",
		},
		{
			name: "route to an empty cluster",
			rc: routeConfig(nil, route("/a/", func(a *routev3.RouteAction) {
				a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: ""}
			})),
			differs: emptyClusterDiffers,
		},
		{
			name: "route with a query parameter matcher and a bad regex",
			rc: func() *routev3.RouteConfiguration {
				r := route("/a/", nil)
				r.Match.QueryParameters = []*routev3.QueryParameterMatcher{{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
					StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}},
				}}}
				return routeConfig(nil, r)
			}(),
			differs: "grpc-go drops a route with query parameter matchers before it validates the rest; goxds keeps " +
				"it (it never matches a gRPC request) and so validates its matchers",
		},
		{
			name: "disabled override without a config",
			rc:   routeConfig(vhOverrides(map[string]*anypb.Any{"fault": filterConfig(nil, false, true)})),
			differs: "grpc-go reads FilterConfig.disabled only behind its ext_proc and ext_authz experiments, " +
				"and without them finds no filter type for the missing config; goxds reads disabled as Envoy does",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := resources.RouteConfigType.DecodeTyped(nil, toAny(tt.rc))
			ldsNACK, rdsNACK := grpcGoVerdicts(t, listener(router()), tt.rc)
			if ldsNACK != "" {
				t.Fatalf("grpc-go rejected the listener: %s", ldsNACK)
			}
			t.Logf("goxds %v; grpc-go %q", err, rdsNACK)
			if tt.differs != "" {
				if (err != nil) == (rdsNACK != "") {
					t.Errorf("known difference gone: goxds %v, grpc-go %q; drop the note: %s", err, rdsNACK, tt.differs)
				}
				return
			}
			compare(t, err, rdsNACK)
		})
	}
}

// emptyClusterDiffers is why goxds rejects a route to the cluster "",
// client and server side, where grpc-go v1.85 accepts it (its own test
// ServerSideXDS_RouteConfiguration serves one, on a route no RPC reaches):
// RouteAction.cluster has a min_len 1 rule in Envoy's route_components.proto
// (go-control-plane's Validate says so too), and gRPC C-core's route
// configuration parser fails such a route action with ".cluster: must be
// non-empty". No Cluster resource can have that name, so the route could
// only fail its RPCs; a NACK tells the control plane at once.
const emptyClusterDiffers = "grpc-go keeps a route to the cluster \"\", which no Cluster resource can have; " +
	"goxds NACKs it, as Envoy (min_len 1 on RouteAction.cluster) and C-core do"

// compare fails t unless goxds's decode error and grpc-go's NACK agree on
// whether the resource is valid.
func compare(t *testing.T, goxds error, grpcNACK string) {
	t.Helper()
	switch {
	case goxds != nil && grpcNACK == "":
		t.Errorf("goxds rejects, grpc-go accepts: %v", goxds)
	case goxds == nil && grpcNACK != "":
		t.Errorf("goxds accepts, grpc-go rejects: %s", grpcNACK)
	}
}

// grpcGoVerdicts serves lis, then rc if grpc-go accepts lis and rc is not
// nil, to grpc-go's xDS client through a channel to "xds:///lis", and
// returns the error_detail of its reply to each: "" for an ACK.
func grpcGoVerdicts(t *testing.T, lis *listenerv3.Listener, rc *routev3.RouteConfiguration) (ldsNACK, rdsNACK string) {
	t.Helper()
	ctx, s := grpcGoClient(t)
	ldsNACK = exchange(ctx, t, s, resources.ListenerTypeURL, listenerName, lis)
	if ldsNACK != "" || rc == nil {
		return ldsNACK, ""
	}
	return "", exchange(ctx, t, s, resources.RouteConfigTypeURL, rc.GetName(), rc)
}

// grpcGoClient starts a fake management server and a channel through
// grpc-go's xDS resolver to "xds:///"+listenerName, which asks for the
// listener at once; both end with the test, and so does the context,
// bounded by verdictTimeout, for the exchanges with it.
func grpcGoClient(t *testing.T) (context.Context, *testutils.FakeServer) {
	t.Helper()
	ctx, s, _ := grpcGoChannel(t)
	return ctx, s
}

// grpcGoChannel is grpcGoClient, and also returns the channel.
func grpcGoChannel(t *testing.T) (context.Context, *testutils.FakeServer, *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), verdictTimeout)
	t.Cleanup(cancel)
	s, err := testutils.StartFakeServer(testutils.FakeServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	b, err := xds.NewXDSResolverWithConfigForTesting(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: s.Address(), NodeID: "parity"}))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+listenerName, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.Connect()
	return ctx, s, conn
}

// grpcGoRoutesToCluster serves grpc-go's client a listener and a route
// configuration that route every RPC to the cluster "c" the caller serves
// next, and fails the test if either is rejected.
func grpcGoRoutesToCluster(ctx context.Context, t *testing.T, s *testutils.FakeServer) {
	t.Helper()
	if nack := exchange(ctx, t, s, resources.ListenerTypeURL, listenerName, listener(router())); nack != "" {
		t.Fatalf("grpc-go rejected the listener: %s", nack)
	}
	if nack := exchange(ctx, t, s, resources.RouteConfigTypeURL, routeName, routeConfig(nil)); nack != "" {
		t.Fatalf("grpc-go rejected the route configuration: %s", nack)
	}
}

// exchange waits for grpc-go to ask for name of typeURL, sends m, and
// returns the error_detail of grpc-go's reply. Requests of other types read
// meanwhile are kept for the exchanges that want them: grpc-go subscribes to
// a Listener's RouteConfiguration from the watcher's callback, which may
// send before the Listener's ACK goes out.
func exchange(ctx context.Context, t *testing.T, s *testutils.FakeServer, typeURL, name string, m proto.Message) string {
	t.Helper()
	next := func() *discoveryv3.DiscoveryRequest {
		if req := unstash(s, typeURL); req != nil {
			return req
		}
		for {
			req, err := s.NextRequest(ctx)
			if err != nil {
				t.Fatalf("waiting for grpc-go's %s request: %v", typeURL, err)
			}
			if req.GetTypeUrl() == typeURL {
				return req
			}
			keep(s, req)
		}
	}
	for req := next(); !contains(req.GetResourceNames(), name); req = next() {
	}
	const nonce = "n1"
	if err := s.Send(&discoveryv3.DiscoveryResponse{
		TypeUrl: typeURL, VersionInfo: "1", Nonce: nonce, Resources: []*anypb.Any{toAny(m)},
	}); err != nil {
		t.Fatal(err)
	}
	for {
		req := next()
		if req.GetResponseNonce() == nonce {
			return req.GetErrorDetail().GetMessage()
		}
	}
}

// stash holds, per fake server, the requests exchange read for a type it
// was not waiting for, in order.
var stash struct {
	sync.Mutex
	reqs map[*testutils.FakeServer][]*discoveryv3.DiscoveryRequest
}

func keep(s *testutils.FakeServer, req *discoveryv3.DiscoveryRequest) {
	stash.Lock()
	defer stash.Unlock()
	if stash.reqs == nil {
		stash.reqs = make(map[*testutils.FakeServer][]*discoveryv3.DiscoveryRequest)
	}
	stash.reqs[s] = append(stash.reqs[s], req)
}

// unstash takes the first kept request of typeURL, nil if none.
func unstash(s *testutils.FakeServer, typeURL string) *discoveryv3.DiscoveryRequest {
	stash.Lock()
	defer stash.Unlock()
	reqs := stash.reqs[s]
	for i, req := range reqs {
		if req.GetTypeUrl() == typeURL {
			stash.reqs[s] = append(reqs[:i:i], reqs[i+1:]...)
			if len(stash.reqs[s]) == 0 {
				delete(stash.reqs, s)
			}
			return req
		}
	}
	return nil
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}
