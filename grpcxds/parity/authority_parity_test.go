package parity_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// grpc-go v1.85 rewrites authorities (gRFC A81) only when this is "true"
// when it starts; goxds always does, from a trusted server.
const authorityRewriteEnv = "GRPC_EXPERIMENTAL_XDS_AUTHORITY_REWRITE"

// gRFC A81 on both: the same resources, served by a management server
// that the bootstraps mark trusted_xds_server or not, give each RPC the
// same :authority through goxds and through grpc-go's xds resolver, as
// the backend that serves it sees it. grpc-go reads its switch once, at
// init, so the comparison runs in a child process of this test binary
// started with the switch on.
func TestParityAuthorityRewrite(t *testing.T) {
	if os.Getenv(authorityRewriteEnv) != "true" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestParityAuthorityRewrite$", "-test.v")
		cmd.Env = append(os.Environ(), authorityRewriteEnv+"=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with %s=true: %v\n%s", authorityRewriteEnv, err, out)
		}
		t.Logf("with %s=true:\n%s", authorityRewriteEnv, out)
		return
	}
	t.Run("trusted", func(t *testing.T) { testParityAuthorityRewrite(t, true) })
	t.Run("untrusted", func(t *testing.T) { testParityAuthorityRewrite(t, false) })
	t.Run("TLS", testParityAuthorityRewriteTLS)
}

// Over TLS the rewritten authority must be one the server's certificate
// is valid for: the transport checks it (credentials.AuthorityValidator)
// before it sends the RPC, and fails it UNAVAILABLE otherwise. Both use
// their xDS credentials, which check it as TLS does.
func testParityAuthorityRewriteTLS(t *testing.T) {
	pki := testutils.NewPKI(t)
	a, _ := startTLSBackend(t, "a", pki.Issue("server", testutils.CertOptions{DNSNames: []string{"*.wild.goxds.test"}}).TLS)
	echoAuthority(a)
	p := newTLSPair(t, map[string]any{"ca_certificate_file": pki.CAFile}, bootstrap.FeatureTrustedXDSServer)

	tlsCluster := func(name string) *clusterv3.Cluster {
		c := testutils.Cluster(name, "")
		c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: testutils.MarshalAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
				}},
			}}),
		}}
		return c
	}
	p.update(tree(vhost(byTarget(rewritingRoute("U"), "bad"), rewritingRoute("T")), nil,
		[]*clusterv3.Cluster{tlsCluster("T"), tlsCluster("U")},
		hostnamesOf(eds("T", a), "a.wild.goxds.test"), hostnamesOf(eds("U", a), "x.other.test")))
	for name, conn := range p.conns {
		if got, err := authoritiesSeen(p.ctx, conn, "", 3); err != nil || !slices.Equal(got, []string{"a a.wild.goxds.test"}) {
			t.Errorf("%s: hostname the certificate is valid for: backends saw %q, %v; want it sent", name, got, err)
		}
	}
	var msgs []string
	for _, name := range []string{"goxds", "grpc-go"} {
		_, err := authoritiesSeen(p.ctx, p.conns[name], "bad", 1)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `failed to validate authority "x.other.test"`) {
			t.Errorf("%s: hostname the certificate is not valid for: %v; want UNAVAILABLE, failed to validate authority", name, err)
		}
		msgs = append(msgs, status.Convert(err).Message())
	}
	if msgs[0] != msgs[1] {
		t.Errorf("the failures differ: goxds %q, grpc-go %q", msgs[0], msgs[1])
	}
}

func testParityAuthorityRewrite(t *testing.T, trusted bool) {
	var features []string
	if trusted {
		features = []string{bootstrap.FeatureTrustedXDSServer}
	}
	p := newPairFeatures(t, features)
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	for _, be := range []*backend{a, b, c} {
		echoAuthority(be)
	}
	p.update(tree(vhost(
		byTarget(toCluster("A"), "plain"),
		byTarget(rewritingRoute("B"), "other"),
		byTarget(rewritingRoute("C"), "none"),
		byTarget(rewritingRoute("D"), "dns"),
		rewritingRoute("A"),
	), nil, []*clusterv3.Cluster{
		testutils.Cluster("A", ""), testutils.Cluster("B", ""), testutils.Cluster("C", ""),
		testutils.LogicalDNSCluster("D", "localhost", a.port),
	},
		hostnamesOf(testutils.Endpoints("A", []testutils.EndpointSpec{{Host: "127.0.0.1", Port: a.port}, {Host: "127.0.0.1", Port: b.port}}), "a.parity.test", "b.parity.test"),
		hostnamesOf(eds("B", a), "other.parity.test:8443"),
		eds("C", c)))
	// Round robin spreads RPCs over the endpoints that are ready, so the
	// comparison waits until each channel has both of cluster A's.
	for name, conn := range p.conns {
		awaitBackends(t, p.ctx, name, conn, "a", "b")
	}

	cases := []struct {
		name, target string
		opts         []grpc.CallOption
	}{
		{name: "rewriting route, endpoints of two hostnames"},
		{name: "the address of a under another hostname", target: "other"},
		{name: "route without auto_host_rewrite", target: "plain"},
		{name: "endpoint without hostname", target: "none"},
		{name: "LOGICAL_DNS", target: "dns"},
		{name: "grpc.CallAuthority", opts: []grpc.CallOption{grpc.CallAuthority("app.parity.test")}},
	}
	for _, tc := range cases {
		got := make(map[string][]string)
		for _, name := range []string{"goxds", "grpc-go"} {
			seen, err := authoritiesSeen(p.ctx, p.conns[name], tc.target, 10, tc.opts...)
			if err != nil {
				t.Fatalf("%s: %s: %v", tc.name, name, err)
			}
			got[name] = seen
		}
		if !slices.Equal(got["goxds"], got["grpc-go"]) {
			t.Errorf("%s: backends saw %q through goxds, %q through grpc-go", tc.name, got["goxds"], got["grpc-go"])
		} else {
			t.Logf("%s: both: %q", tc.name, got["goxds"])
		}
	}
	// What both did is what the gRFC says.
	want := map[bool][]string{true: {"a a.parity.test", "b b.parity.test"}, false: {"a greeter", "b greeter"}}[trusted]
	if got, err := authoritiesSeen(p.ctx, p.conns["goxds"], "", 10); err != nil || !slices.Equal(got, want) {
		t.Errorf("rewriting route: backends saw %q, %v; want %q", got, err, want)
	}
	dns := fmt.Sprintf("a localhost:%d", a.port)
	if !trusted {
		dns = "a greeter"
	}
	if got, err := authoritiesSeen(p.ctx, p.conns["goxds"], "dns", 3); err != nil || !slices.Equal(got, []string{dns}) {
		t.Errorf("LOGICAL_DNS: backends saw %q, %v; want %q", got, err, dns)
	}
}

// newPairFeatures is newPair with both bootstraps' server marked with
// features.
func newPairFeatures(t *testing.T, features []string) *pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	p := &pair{t: t, ctx: ctx, ms: ms, conns: make(map[string]*grpc.ClientConn)}
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "goxds", ServerFeatures: features}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, Logger: quietLogger, ClientOptions: client.Options{Logger: quietLogger}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p.dial("goxds", grpcxds.DefaultScheme, b.DialOptions()...)
	rb, err := xds.NewXDSResolverWithConfigForTesting(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(), NodeID: "grpc-go", ServerFeatures: append([]string{"xds_v3"}, features...),
	}))
	if err != nil {
		t.Fatal(err)
	}
	p.dial("grpc-go", "xds", grpc.WithResolvers(rb))
	return p
}

// echoAuthority makes b send the :authority of each RPC back in the
// x-authority trailer.
func echoAuthority(b *backend) {
	h := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		return grpc.SetTrailer(ctx, metadata.Pairs("x-authority", strings.Join(md.Get(":authority"), ",")))
	}
	b.handler.Store(&h)
}

// authoritiesSeen makes n RPCs with x-target target ("" for none) and
// returns what the backends saw, as "backend authority", sorted and
// without repeats.
func authoritiesSeen(ctx context.Context, conn *grpc.ClientConn, target string, n int, opts ...grpc.CallOption) ([]string, error) {
	if target != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-target", target)
	}
	var out []string
	for range n {
		var trailer metadata.MD
		reply := new(wrapperspb.StringValue)
		err := conn.Invoke(ctx, sayHello, wrapperspb.String("hi"), reply, append(opts, grpc.WaitForReady(true), grpc.Trailer(&trailer))...)
		if err != nil {
			return nil, err
		}
		seen := reply.GetValue() + " " + strings.Join(trailer.Get("x-authority"), ",")
		if !slices.Contains(out, seen) {
			out = append(out, seen)
		}
	}
	slices.Sort(out)
	return out, nil
}

// awaitBackends sends RPCs on conn's default route until each of the
// named backends has answered one, and fails the test if ctx ends first.
func awaitBackends(t *testing.T, ctx context.Context, name string, conn *grpc.ClientConn, backends ...string) {
	t.Helper()
	missing := slices.Clone(backends)
	for len(missing) > 0 {
		reply := new(wrapperspb.StringValue)
		if err := conn.Invoke(ctx, sayHello, wrapperspb.String("hi"), reply, grpc.WaitForReady(true)); err != nil {
			t.Fatalf("%s: waiting for backends %q to answer: %v", name, missing, err)
		}
		missing = slices.DeleteFunc(missing, func(b string) bool { return b == reply.GetValue() })
	}
}

// rewritingRoute is toCluster with auto_host_rewrite.
func rewritingRoute(cluster string) *routev3.Route {
	r := toCluster(cluster)
	r.GetRoute().HostRewriteSpecifier = &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(true)}
	return r
}

// byTarget makes r match only RPCs whose x-target header is target.
func byTarget(r *routev3.Route, target string) *routev3.Route {
	r.Match.Headers = []*routev3.HeaderMatcher{{Name: "x-target", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: target}}}
	return r
}

// hostnamesOf gives the endpoints of cla, in order, the hostnames.
func hostnamesOf(cla *endpointv3.ClusterLoadAssignment, hostnames ...string) *endpointv3.ClusterLoadAssignment {
	i := 0
	for _, loc := range cla.Endpoints {
		for _, ep := range loc.LbEndpoints {
			if i < len(hostnames) {
				ep.GetEndpoint().Hostname = hostnames[i]
			}
			i++
		}
	}
	return cla
}
