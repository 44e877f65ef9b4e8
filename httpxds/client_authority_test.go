package httpxds_test

import (
	"fmt"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/testutils"
)

// autoHost sets a route action's auto_host_rewrite.
func autoHost(a *routev3.RouteAction) {
	a.HostRewriteSpecifier = &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(true)}
}

// hostOf is the Host a backend's answer says it got.
func hostOf(body string) string {
	_, after, _ := strings.Cut(body, " host=")
	host, _, _ := strings.Cut(after, " ")
	return host
}

// auto_host_rewrite from a trusted server (gRFC A81's trust, as for gRPC)
// sends each request with the Host of the endpoint picked for it: the EDS
// endpoint's hostname, TLS or not; a LOGICAL_DNS cluster's DNS name,
// without the port, as Envoy swaps in "the hostname of the upstream host
// chosen by the cluster manager"
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#envoy-v3-api-field-config-route-v3-routeaction-auto-host-rewrite).
// The same address listed by another cluster under another hostname gets
// that one; a route without the flag keeps the request's Host.
func TestClientAutoHostRewrite(t *testing.T) {
	e := newCEnv(t, cenvOptions{edit: func(c *bootstrap.Config) {
		c.Servers[0].ServerFeatures = append(c.Servers[0].ServerFeatures, bootstrap.FeatureTrustedXDSServer)
	}})
	a, b, d := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "dns")
	res := world(routes("rc",
		toCluster(prefix("/plain/"), "A", nil),
		toCluster(prefix("/other/"), "B", autoHost),
		toCluster(prefix("/dns/"), "D", autoHost),
		toCluster(prefix("/"), "A", autoHost),
	), nil)
	res.Clusters = []*clusterv3.Cluster{testutils.Cluster("A", "A"), testutils.Cluster("B", "B"), testutils.LogicalDNSCluster("D", "localhost", d.port)}
	edsA := testutils.ClusterLoadAssignment("A", "127.0.0.1", a.port, b.port)
	edsB := testutils.ClusterLoadAssignment("B", "127.0.0.1", a.port)
	hostnames := func(cla *endpointv3.ClusterLoadAssignment, names ...string) *endpointv3.ClusterLoadAssignment {
		for i, ep := range cla.Endpoints[0].LbEndpoints {
			ep.GetEndpoint().Hostname = names[i]
		}
		return cla
	}
	res.Endpoints = []*endpointv3.ClusterLoadAssignment{hostnames(edsA, "a.goxds.test", "b.goxds.test"), hostnames(edsB, "other.goxds.test")}
	e.update(res)

	want := map[string]string{"a": "a.goxds.test", "b": "b.goxds.test"}
	served := map[string]int{}
	for i := range 20 {
		got := e.get(fmt.Sprintf("/x%d", i))
		name, _, _ := strings.Cut(got.body, " ")
		if got.status != 200 || hostOf(got.body) != want[name] {
			t.Fatalf("rewriting route: got %d %q; want backend a or b with its own hostname as Host", got.status, got.body)
		}
		served[name]++
		// a's address under B's hostname, between two requests of A.
		if got := e.get("/other/y"); hostOf(got.body) != "other.goxds.test" || !strings.HasPrefix(got.body, "a ") {
			t.Fatalf("cluster B: got %d %q; want backend a with Host other.goxds.test", got.status, got.body)
		}
	}
	if served["a"] == 0 || served["b"] == 0 {
		t.Errorf("rewriting route served %v; want both a and b", served)
	}
	if got := e.get("/plain/z"); hostOf(got.body) != svcHost {
		t.Errorf("route without auto_host_rewrite: got %q; want Host %s", got.body, svcHost)
	}
	if got := e.get("/dns/z"); got.status != 200 || hostOf(got.body) != "localhost" {
		t.Errorf("LOGICAL_DNS cluster: got %d %q; want Host localhost", got.status, got.body)
	}
}
