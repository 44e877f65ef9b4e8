package grpcxds_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// newSecureEnvExpiry is newSecureEnv with the client's does-not-exist
// timer set to expiry.
func newSecureEnvExpiry(t *testing.T, m *mesh, expiry time.Duration) *env {
	t.Helper()
	return newSecureEnvProviders(t, m, expiry, nil)
}

// newSecureEnvProviders is newSecureEnvExpiry with the certificate provider
// instances of extra beside the mesh's.
func newSecureEnvProviders(t *testing.T, m *mesh, expiry time.Duration, extra map[string]bootstrap.CertificateProvider) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.CertificateProviders = m.providers(t)
	maps.Copy(cfg.CertificateProviders, extra)
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, ClientOptions: client.Options{
		Logger:           quietLogger,
		WatchExpiry:      expiry,
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{fastConnect}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &env{t: t, ctx: ctx, ms: ms, builder: b}
}

// grpc-go's TestClientSideXDS_WithValidAndInvalidSecurityConfiguration, in
// goxds: three clusters, A with mTLS, P without TLS, C whose TLS names a
// certificate provider instance the bootstrap does not define and whose
// endpoints the server never sends. RPCs to A and P are served without
// waiting for C's endpoints (the does-not-exist timer is an hour here);
// RPCs to C fail with UNAVAILABLE naming the instance.
func TestClusterTLSUndefinedInstanceRejectedLeavesOthers(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnvExpiry(t, m, time.Hour)
	a := startTLSBackend(t, "a", m, 0)
	plain := startBackend(t, "plain")
	header := func(name string) *routev3.RouteMatch {
		r := prefix("/")
		r.Headers = []*routev3.HeaderMatcher{{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}
		return r
	}
	e.update(tree(routes(toCluster(header("x-plain"), "P"), toCluster(header("x-bad"), "C"), toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{
			secureCluster(t, "A", "id", "roots", exactSAN(serverSPIFFE)),
			testutils.Cluster("P", ""),
			secureCluster(t, "C", "undefined-id", "undefined-roots"),
		},
		eds("A", a.backend), eds("P", plain))) // no endpoints for C
	conn := e.dial(xdsCreds(t))
	if got, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || got != "a" {
		t.Fatalf("wait-for-ready RPC to A = %q, %v; want it served by a", got, err)
	}
	if got, err := callWithHeader(e.ctx, conn, "x-plain", "1"); err != nil || got != "plain" {
		t.Fatalf("RPC to P = %q, %v; want it served by plain", got, err)
	}
	_, err := callWithHeader(e.ctx, conn, "x-bad", "1")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `"undefined-`) {
		t.Errorf("RPC to C: %v, want UNAVAILABLE naming the undefined instance", err)
	}
}

// nackedCluster is a cluster goxds rejects at decode time today (its TLS
// asks for tls_params), for TestClusterNACKedDoesNotStallOthers.
func nackedCluster(t *testing.T, name string) *clusterv3.Cluster {
	t.Helper()
	c := secureCluster(t, name, "id", "roots")
	u := new(tlsv3.UpstreamTlsContext)
	if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(u); err != nil {
		t.Fatal(err)
	}
	u.CommonTlsContext.TlsParams = &tlsv3.TlsParameters{}
	tc, err := anypb.New(u)
	if err != nil {
		t.Fatal(err)
	}
	c.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: tc}
	return c
}

// One cluster rejected at decode time, whose endpoints the server never
// sends, does not hold the others: the channel is served by A at once
// (the does-not-exist timer is an hour here), and RPCs to C fail with
// UNAVAILABLE naming the rejection. grpc-go's
// TestClientSideXDS_WithValidAndInvalidSecurityConfiguration relies on
// this, its third cluster naming a certificate provider instance the
// bootstrap does not define: rejected at decode time too (gRFC A29),
// that cluster must leave the two good ones alone. Had the cluster been accepted, the
// channel would wait for its endpoints, as gRFC A74 and grpc-go do
// (grpcxds/parity: TestParityOneBadClusterAndTheOthers).
func TestClusterNACKedDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	e := newSecureEnvExpiry(t, m, time.Hour)
	a := startTLSBackend(t, "a", m, 0)
	header := func(name string) *routev3.RouteMatch {
		r := prefix("/")
		r.Headers = []*routev3.HeaderMatcher{{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}
		return r
	}
	e.update(tree(routes(toCluster(header("x-bad"), "C"), toCluster(prefix("/"), "A")),
		[]*clusterv3.Cluster{secureCluster(t, "A", "id", "roots", exactSAN(serverSPIFFE)), nackedCluster(t, "C")},
		eds("A", a.backend)))
	conn := e.dial(xdsCreds(t))
	if got, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || got != "a" {
		t.Fatalf("wait-for-ready RPC to A = %q, %v; want it served by a", got, err)
	}
	_, err := callWithHeader(e.ctx, conn, "x-bad", "1")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `Cluster "C": resource rejected`) {
		t.Errorf("RPC to C: %v, want UNAVAILABLE saying C was rejected", err)
	}
}
