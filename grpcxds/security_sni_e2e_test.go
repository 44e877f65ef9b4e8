package grpcxds_test

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/testutils"
)

// autoSANCluster is secureCluster with auto_sni_san_validation on, sni
// set to sni ("" for none) and no auto_host_sni.
func autoSANCluster(t *testing.T, name, sni string, sans ...*matcherv3.StringMatcher) *clusterv3.Cluster {
	t.Helper()
	c := secureCluster(t, name, "id", "roots", sans...)
	u := new(tlsv3.UpstreamTlsContext)
	if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(u); err != nil {
		t.Fatal(err)
	}
	u.Sni, u.AutoSniSanValidation = sni, true
	tc, err := anypb.New(u)
	if err != nil {
		t.Fatal(err)
	}
	c.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: tc}
	return c
}

// localhostEDS is eds with the endpoint's address the name "localhost",
// as grpc-go's end-to-end tests write it.
func localhostEDS(cluster string, b *backend) *endpointv3.ClusterLoadAssignment {
	return testutils.Endpoints(cluster, []testutils.EndpointSpec{{Host: "localhost", Port: b.port}})
}

// gRFC A101 ("Server SAN validation against SNI used"): with
// auto_sni_san_validation but no SNI sent (no sni, no auto_host_sni), the
// cluster's SAN matchers check the server certificate, as without the
// flag. Matchers that match let RPCs through; matchers that do not fail
// them with UNAVAILABLE, in grpc-go's words. The endpoint address
// "localhost" is no hostname (that comes from EDS's hostname field).
func TestClusterAutoSNISANValidationWithoutSNI(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.server = m.pki.Issue("wildcard", testutils.CertOptions{DNSNames: []string{"*.wild.goxds.test"}})
	e := newSecureEnv(t, m)
	a := startTLSBackend(t, "a", m, 0)
	b := startTLSBackend(t, "b", m, 0)
	toB := prefix("/")
	toB.Headers = []*routev3.HeaderMatcher{{Name: "x-b", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}
	e.update(tree(routes(toCluster(toB, "B"), toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{
			autoSANCluster(t, "A", "", exactSAN("*.wild.goxds.test")),
			autoSANCluster(t, "B", "", exactSAN("wrong.san.domain")),
		},
		localhostEDS("A", a.backend), localhostEDS("B", b.backend)))
	conn := e.dial(xdsCreds(t))
	e.waitServed(conn, 1, func(name string) bool { return name == "a" })
	if got, _ := a.sni.Load().(string); got != "" {
		t.Errorf("server a saw SNI %q, want none", got)
	}
	_, err := callWithHeader(e.ctx, conn, "x-b", "1")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "do not match any of the accepted SANs") {
		t.Errorf("RPC to B: %v, want UNAVAILABLE saying the SANs do not match any of the accepted SANs", err)
	}
}
