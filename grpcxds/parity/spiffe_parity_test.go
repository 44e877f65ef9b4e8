package parity_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// spiffeEnv is grpc-go v1.85's switch for gRFC A87: it reads
// spiffe_trust_bundle_map_file only with it set when it starts.
const spiffeEnv = "GRPC_EXPERIMENTAL_XDS_MTLS_SPIFFE"

// gRFC A87 on both clients: a cluster whose UpstreamTlsContext takes its
// roots from a file_watcher naming a SPIFFE trust bundle map (of trust
// domain a.goxds.test only; the provider's CA file, of another PKI, is
// ignored). A's server has a SPIFFE ID of a, issued by a: served. B's is
// of trust domain c, which the map lacks, and C's claims a but was issued
// by another CA: UNAVAILABLE on both. The comparison runs in a child
// process of this test binary started with grpc-go's switch on.
func TestParitySPIFFEBundleMap(t *testing.T) {
	if os.Getenv(spiffeEnv) != "true" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestParitySPIFFEBundleMap$", "-test.v")
		cmd.Env = append(os.Environ(), spiffeEnv+"=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with %s=true: %v\n%s", spiffeEnv, err, out)
		}
		t.Logf("with %s=true:\n%s", spiffeEnv, out)
		return
	}
	pkiA, pkiC, other := testutils.NewPKI(t), testutils.NewPKI(t), testutils.NewPKI(t)
	a, _ := startTLSBackend(t, "a", pkiA.Issue("a", testutils.CertOptions{DNSNames: []string{"localhost"}, URIs: []string{"spiffe://a.goxds.test/ns/x/sa/a"}}).TLS)
	b, _ := startTLSBackend(t, "b", pkiC.Issue("b", testutils.CertOptions{DNSNames: []string{"localhost"}, URIs: []string{"spiffe://c.goxds.test/ns/x/sa/b"}}).TLS)
	c, _ := startTLSBackend(t, "c", other.Issue("c", testutils.CertOptions{DNSNames: []string{"localhost"}, URIs: []string{"spiffe://a.goxds.test/ns/x/sa/c"}}).TLS)
	bundles, err := testutils.WriteSPIFFEBundleMap(t.TempDir(), "bundles.json", map[string]*testutils.PKI{"a.goxds.test": pkiA})
	if err != nil {
		t.Fatal(err)
	}

	p := newTLSPair(t, map[string]any{"spiffe_trust_bundle_map_file": bundles, "ca_certificate_file": other.CAFile})

	byHeader := func(h, cluster string) *routev3.Route {
		r := toCluster(cluster)
		r.Match.Headers = []*routev3.HeaderMatcher{{Name: h, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}
		return r
	}
	p.update(tree(vhost(byHeader("x-b", "B"), byHeader("x-c", "C"), toCluster("A")), nil,
		[]*clusterv3.Cluster{spiffeCluster("A"), spiffeCluster("B"), spiffeCluster("C")},
		localhostEDS("A", a), localhostEDS("B", b), localhostEDS("C", c)))

	for name, conn := range p.conns {
		if got, err := callWaiting(p.ctx, conn); err != nil || got != "a" {
			t.Errorf("%s: RPC to A = %q, %v; want it served by a", name, got, err)
		}
		for _, h := range []string{"x-b", "x-c"} {
			err := conn.Invoke(metadata.AppendToOutgoingContext(p.ctx, h, "1"), sayHello, wrapperspb.String("hi"), new(wrapperspb.StringValue))
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s: RPC with %s = %v, want UNAVAILABLE", name, h, err)
			} else {
				t.Logf("%s: RPC with %s: %v", name, h, err)
			}
		}
	}
}

// spiffeCluster is an EDS cluster with TLS whose roots are instance
// "roots", with no SAN matchers.
func spiffeCluster(name string) *clusterv3.Cluster {
	c := testutils.Cluster(name, "")
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: testutils.MarshalAny(&tlsv3.UpstreamTlsContext{
			CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
				ValidationContext: &tlsv3.CertificateValidationContext{
					CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
				}}},
		}),
	}}
	return c
}
