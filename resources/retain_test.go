package resources

import (
	"fmt"
	"runtime"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// retainedPerValue decodes n resources made by mk, keeps the values, and
// returns the heap they hold, per value: what a client caching them pays.
// The Anys are dropped before measuring, as the transport drops a response
// once it is decoded.
func retainedPerValue[T Resource](t *testing.T, typ *Type[T], n int, mk func(i int) proto.Message) uint64 {
	t.Helper()
	anys := make([]*anypb.Any, n)
	for i := range anys {
		anys[i] = toAny(mk(i))
	}
	keep := make([]T, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, a := range anys {
		_, v, err := typ.DecodeTyped(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		keep[i] = v
	}
	anys = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	runtime.KeepAlive(anys)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return (after.HeapAlloc - before.HeapAlloc) / uint64(n)
}

// A decoded Cluster or ClusterLoadAssignment keeps the bytes it came from,
// not the decoded message: at 10,000 clusters the messages were a third of
// the client's heap (docs/PERFORMANCE.md). The bounds sit between what a
// value holds with its bytes and what it held with the message (measured:
// Endpoints of 3 endpoints 1,855 B with the message, 311 B with the bytes;
// an EDS Cluster 875 B with, 119 B with the bytes).
func TestDecodedValuesDoNotKeepTheMessage(t *testing.T) {
	const n = 2000
	eps := retainedPerValue(t, EndpointsType, n, func(i int) proto.Message {
		return cla(fmt.Sprintf("cluster-%06d", i), locality("r", 0, 1,
			lbEndpoint("127.0.0.1", uint32(10000+i)), lbEndpoint("127.0.0.1", uint32(20000+i)), lbEndpoint("127.0.0.1", uint32(30000+i))))
	})
	cls := retainedPerValue(t, ClusterType, n, func(i int) proto.Message {
		return edsCluster(fmt.Sprintf("cluster-%06d", i), "")
	})
	t.Logf("retained per value: Endpoints %d B, Cluster %d B", eps, cls)
	if eps > endpointsRetainBound {
		t.Errorf("a decoded ClusterLoadAssignment of 3 endpoints holds %d B, want ≤ %d B", eps, endpointsRetainBound)
	}
	if cls > clusterRetainBound {
		t.Errorf("a decoded EDS Cluster holds %d B, want ≤ %d B", cls, clusterRetainBound)
	}
}

const (
	endpointsRetainBound = 1000
	clusterRetainBound   = 500
)

// A decoded RouteConfiguration keeps its bytes too, and its virtual hosts
// and routes keep sub-slices of them, not the decoded messages: a client
// routing to 10,000 clusters holds one route configuration of 10,000
// routes, whose messages were 9 MB of a 49 MB heap (docs/PERFORMANCE.md).
// The bound sits between the two (measured, per route of a prefix and a
// cluster: 568 B with the messages, 258 B with the bytes).
func TestDecodedRouteConfigDoesNotKeepTheMessage(t *testing.T) {
	const n = 5000
	perRoute := retainedPerValue(t, RouteConfigType, 4, func(i int) proto.Message {
		routes := make([]*routev3.Route, n)
		for r := range routes {
			routes[r] = prefixRoute(fmt.Sprintf("/svc-%d/", r), fmt.Sprintf("cluster-%06d", r))
		}
		return routeConfig(fmt.Sprintf("rc-%d", i), vhost("vh", []string{"*"}, routes...))
	}) / n
	t.Logf("retained per route: %d B", perRoute)
	if perRoute > routeRetainBound {
		t.Errorf("a decoded route of a prefix and a cluster holds %d B, want ≤ %d B", perRoute, routeRetainBound)
	}
}

const routeRetainBound = 600

// Raw gives back the message received, unmarshalled anew on each call, so
// a caller that modifies it changes nothing shared.
func TestRawIsTheMessageReceivedAndTheCallersOwn(t *testing.T) {
	inC := edsCluster("c", "svc")
	_, c, err := decodeMsg(ClusterType, inC)
	if err != nil {
		t.Fatal(err)
	}
	inE := cla("svc", locality("r", 0, 1, lbEndpoint("10.0.0.1", 80)))
	_, e, err := decodeMsg(EndpointsType, inE)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(c.Raw(), inC) || !proto.Equal(c.Proto(), inC) {
		t.Errorf("Cluster.Raw() = %v, want %v", c.Raw(), inC)
	}
	if !proto.Equal(e.Raw(), inE) || !proto.Equal(e.Proto(), inE) {
		t.Errorf("Endpoints.Raw() = %v, want %v", e.Raw(), inE)
	}
	c.Raw().Name = "changed"
	e.Raw().ClusterName = "changed"
	if c.Raw().GetName() != "c" || e.Raw().GetClusterName() != "svc" {
		t.Error("a change to what Raw returned reached the shared value")
	}
	var nilC *Cluster
	var zeroE Endpoints
	if nilC.Raw() != nil || zeroE.Raw() != nil {
		t.Error("Raw of a value not made by the decoder is not nil")
	}
}

// A route configuration's Raw, and those of its virtual hosts and routes,
// are the messages received, each the caller's own copy, whatever other
// fields share the bytes: here an unknown field of virtual_hosts' number
// but another wire type, which proto.Unmarshal keeps as unknown, sits
// before the virtual hosts and must not shift them.
func TestRouteConfigRawIsTheMessageReceived(t *testing.T) {
	in := routeConfig("rc",
		vhost("a", []string{"a.com"}, prefixRoute("/a/", "ca"), prefixRoute("/b/", "cb")),
		vhost("b", []string{"*"}, prefixRoute("", "c1")),
	)
	// virtual_hosts' number (2) with a varint, an unknown field.
	body := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 7)
	body = append(body, mustMarshal(t, in)...)
	_, rc, err := RouteConfigType.DecodeTyped(nil, &anypb.Any{TypeUrl: RouteConfigTypeURL, Value: body})
	if err != nil {
		t.Fatal(err)
	}
	want := new(routev3.RouteConfiguration)
	if err := proto.Unmarshal(body, want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(rc.Raw(), want) || !proto.Equal(rc.Proto(), want) {
		t.Errorf("RouteConfig.Raw() = %v, want %v", rc.Raw(), want)
	}
	for i, vh := range rc.VirtualHosts {
		if !proto.Equal(vh.Raw(), in.VirtualHosts[i]) {
			t.Errorf("VirtualHosts[%d].Raw() = %v, want %v", i, vh.Raw(), in.VirtualHosts[i])
		}
		for j, r := range vh.Routes {
			if !proto.Equal(r.Raw(), in.VirtualHosts[i].Routes[j]) {
				t.Errorf("VirtualHosts[%d].Routes[%d].Raw() = %v, want %v", i, j, r.Raw(), in.VirtualHosts[i].Routes[j])
			}
		}
	}
	rc.Raw().Name = "changed"
	rc.VirtualHosts[0].Raw().Name = "changed"
	rc.VirtualHosts[0].Routes[0].Raw().Name = "changed"
	if rc.Raw().GetName() != "rc" || rc.VirtualHosts[0].Raw().GetName() != "a" || rc.VirtualHosts[0].Routes[0].Raw().GetName() != "" {
		t.Error("a change to what Raw returned reached the shared value")
	}
	var nilRC *RouteConfig
	var zeroVH VirtualHost
	var zeroR Route
	if nilRC.Raw() != nil || zeroVH.Raw() != nil || zeroR.Raw() != nil {
		t.Error("Raw of a value not made by the decoder is not nil")
	}
}

// A route configuration inlined in a Listener, and a VHDS virtual host,
// give back their messages too.
func TestInlineAndVHDSRawAreTheMessagesReceived(t *testing.T) {
	inline := simpleRouteConfig("inline", "c1")
	h := rdsHCM("")
	h.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: inline}
	_, l, err := decodeMsg(ListenerType, listenerWith("lis", h))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.InlineRouteConfig.Raw(); !proto.Equal(got, inline) {
		t.Errorf("inline RouteConfig.Raw() = %v, want %v", got, inline)
	}
	if got := l.InlineRouteConfig.VirtualHosts[0].Routes[0].Raw(); !proto.Equal(got, inline.VirtualHosts[0].Routes[0]) {
		t.Errorf("inline route's Raw() = %v, want %v", got, inline.VirtualHosts[0].Routes[0])
	}
	vh := vhost("rc/api.example.com", []string{"api.example.com"}, prefixRoute("/", "c"))
	_, v, err := decodeMsg(VirtualHostType, vh)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(v.Raw(), vh) || !proto.Equal(v.Proto(), vh) || !proto.Equal(v.VirtualHost.Routes[0].Raw(), vh.Routes[0]) {
		t.Errorf("VirtualHostResource.Raw() = %v, want %v", v.Raw(), vh)
	}
}

// RegexPattern gives back the path regex as configured, for messages
// that name the route (grpcxds says which route an RPC failed on).
func TestRouteRegexPattern(t *testing.T) {
	r := prefixRoute("", "c")
	r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher("/pkg.S/(Get|List)[A-Z].*")}
	_, rc, err := decodeMsg(RouteConfigType, routeConfig("rc", vhost("vh", []string{"*"}, r, prefixRoute("/p/", "c"))))
	if err != nil {
		t.Fatal(err)
	}
	routes := rc.VirtualHosts[0].Routes
	if got := routes[0].RegexPattern(); got != "/pkg.S/(Get|List)[A-Z].*" {
		t.Errorf("RegexPattern() = %q, want the pattern as configured", got)
	}
	if got := routes[1].RegexPattern(); got != "" {
		t.Errorf("RegexPattern() of a prefix route = %q, want \"\"", got)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
