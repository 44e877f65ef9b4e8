package parity_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcxdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/grpcxds/xdscreds"
	"github.com/goxds/xds/testutils"
)

// gRFC A101 with no SNI sent: grpc-go's TestClientSideXDS_FallbackSANMatchers
// on both. Clusters with auto_sni_san_validation, no sni and no
// auto_host_sni, endpoints at "localhost": the SAN matchers decide. A's
// matcher is the server's wildcard DNS SAN: served. B's matches nothing:
// UNAVAILABLE, in grpc-go's words on both ("do not match any of the
// accepted SANs"). Both send no SNI. (grpc-go reads SNI settings only
// with GRPC_EXPERIMENTAL_XDS_SNI; without it, it too checks the matchers,
// so the case holds either way.)
func TestParityAutoSNISANValidationWithoutSNI(t *testing.T) {
	pki := testutils.NewPKI(t)
	cert := pki.Issue("server", testutils.CertOptions{DNSNames: []string{"*.wild.goxds.test"}})
	a, sniA := startTLSBackend(t, "a", cert.TLS)
	b, _ := startTLSBackend(t, "b", cert.TLS)

	p := newTLSPair(t, map[string]any{"ca_certificate_file": pki.CAFile})

	toB := toCluster("B")
	toB.Match.Headers = []*routev3.HeaderMatcher{{Name: "x-b", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}
	p.update(tree(vhost(toB, toCluster("A")), nil,
		[]*clusterv3.Cluster{autoSANCluster("A", "*.wild.goxds.test"), autoSANCluster("B", "wrong.san.domain")},
		localhostEDS("A", a), localhostEDS("B", b)))

	for name, conn := range p.conns {
		if got, err := callWaiting(p.ctx, conn); err != nil || got != "a" {
			t.Errorf("%s: RPC to A = %q, %v; want it served by a", name, got, err)
		}
		if got := sniA.Load(); got != nil && got.(string) != "" {
			t.Errorf("%s: server a saw SNI %q, want none", name, got)
		}
		bctx := metadata.AppendToOutgoingContext(p.ctx, "x-b", "1")
		err := conn.Invoke(bctx, sayHello, wrapperspb.String("hi"), new(wrapperspb.StringValue))
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "do not match any of the accepted SANs") {
			t.Errorf("%s: RPC to B = %v, want UNAVAILABLE: the SANs do not match any of the accepted SANs", name, err)
		}
	}
}

// dialCreds is dial with transport credentials creds.
func (p *pair) dialCreds(name, scheme string, creds credentials.TransportCredentials, opts ...grpc.DialOption) {
	p.t.Helper()
	conn, err := grpc.NewClient(scheme+":///"+listener, append(opts, grpc.WithTransportCredentials(creds))...)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { conn.Close() })
	p.conns[name] = conn
}

// autoSANCluster is an EDS cluster with TLS, roots from instance "roots",
// auto_sni_san_validation, no sni, and one exact SAN matcher.
func autoSANCluster(name, san string) *clusterv3.Cluster {
	c := testutils.Cluster(name, "")
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: testutils.MarshalAny(&tlsv3.UpstreamTlsContext{
			AutoSniSanValidation: true,
			CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
				ValidationContext: &tlsv3.CertificateValidationContext{
					CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
					MatchSubjectAltNames:          []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: san}}},
				}}},
		}),
	}}
	return c
}

// localhostEDS is eds with the endpoint at "localhost", as grpc-go's
// tests write it.
func localhostEDS(cluster string, b *backend) *endpointv3.ClusterLoadAssignment {
	return testutils.Endpoints(cluster, []testutils.EndpointSpec{{Host: "localhost", Port: b.port}})
}

// startTLSBackend is startBackend serving TLS with cert; the returned value
// holds the SNI of the last handshake.
func startTLSBackend(t *testing.T, name string, cert tls.Certificate) (*backend, *atomic.Value) {
	t.Helper()
	sni := new(atomic.Value)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, port: uint32(lis.Addr().(*net.TCPAddr).Port)}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			sni.Store(hello.ServerName)
			return nil, nil
		},
	})))
	srv.RegisterService(&greeterDesc, b)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return b, sni
}

// newTLSPair is a pair of channels, goxds's and grpc-go's, each with its
// xDS credentials (plaintext fallback), served by one management server
// of their own; their bootstraps' certificate provider instance "roots"
// is a file_watcher of config roots; both bootstraps name the server
// features (grpc-go's also xds_v3).
func newTLSPair(t *testing.T, roots map[string]any, features ...string) *pair {
	t.Helper()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	p := &pair{t: t, ms: ms, conns: make(map[string]*grpc.ClientConn)}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	p.ctx = ctx
	withProviders := func(node string, features []string) []byte {
		var m map[string]any
		if err := json.Unmarshal(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: node, ServerFeatures: features}), &m); err != nil {
			t.Fatal(err)
		}
		m["certificate_providers"] = map[string]any{"roots": map[string]any{"plugin_name": "file_watcher", "config": roots}}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	cfg, err := bootstrap.Parse(withProviders("goxds", features))
	if err != nil {
		t.Fatal(err)
	}
	bld, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, Logger: quietLogger, ClientOptions: client.Options{Logger: quietLogger}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bld.Close)
	goxdsCreds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	p.dialCreds("goxds", grpcxds.DefaultScheme, goxdsCreds, bld.DialOptions()...)

	rb, err := xds.NewXDSResolverWithConfigForTesting(withProviders("grpc-go", append([]string{"xds_v3"}, features...)))
	if err != nil {
		t.Fatal(err)
	}
	grpcCreds, err := grpcxdscreds.NewClientCredentials(grpcxdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	p.dialCreds("grpc-go", "xds", grpcCreds, grpc.WithResolvers(rb))
	return p
}
