package parity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
)

// What one cluster that cannot be used does to the RPCs of the others,
// the question grpc-go's TestClientSideXDS_WithValidAndInvalidSecurityConfiguration
// asks. Route "/" goes to cluster A; RPCs with header x-c go to cluster C.
//
//   - C is rejected at decode time (a Cluster both NACK): A is served at
//     once by both, and C's RPCs fail with UNAVAILABLE. This is what makes
//     grpc-go pass that test: it NACKs a Cluster naming a certificate
//     provider instance its bootstrap lacks (gRFC A29), so it never waits
//     for that cluster's endpoints.
//   - C is accepted but the server never sends its endpoints: both hold
//     every RPC, A's too, until C's endpoints arrive (or C's
//     does-not-exist timer, 15 s, fires): gRFC A74 hands the balancer
//     only complete configurations. Once C's endpoints come, both serve A.
//
// So one accepted cluster whose endpoints are missing holds the others in
// grpc-go as in goxds; goxds on main timed out in grpc-go's test only
// because it accepted the Cluster grpc-go rejects.
func TestParityOneBadClusterAndTheOthers(t *testing.T) {
	a, c := startBackend(t, "a"), startBackend(t, "c")
	toC := toCluster("C")
	toC.Match.Headers = []*routev3.HeaderMatcher{{Name: "x-c", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}
	rc := vhost(toC, toCluster("A"))

	t.Run("rejected cluster", func(t *testing.T) {
		p := newPair(t)
		p.update(tree(rc, nil, []*clusterv3.Cluster{testutils.Cluster("A", ""), withTLSParams(t, testutils.Cluster("C", ""))}, eds("A", a)))
		for name, conn := range p.conns {
			if got, err := call(p.ctx, conn); err != nil || got != "a" {
				t.Errorf("%s: RPC to A = %q, %v; want it served by a", name, got, err)
			}
			cctx := metadata.AppendToOutgoingContext(p.ctx, "x-c", "1")
			if err := conn.Invoke(cctx, sayHello, wrapperspb.String("hi"), new(wrapperspb.StringValue)); status.Code(err) != codes.Unavailable {
				t.Errorf("%s: RPC to the rejected C = %v, want UNAVAILABLE", name, err)
			}
		}
	})

	t.Run("endpoints missing", func(t *testing.T) {
		p := newPair(t)
		p.update(tree(rc, nil, clusters("A", "C"), eds("A", a))) // none for C
		for name, conn := range p.conns {
			ctx, cancel := context.WithTimeout(p.ctx, 500*time.Millisecond)
			got, err := callWaiting(ctx, conn)
			cancel()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("%s: wait-for-ready RPC to A while C's endpoints are missing = %q, %v; want it held until its deadline", name, got, err)
			}
		}
		p.update(tree(rc, nil, clusters("A", "C"), eds("A", a), eds("C", c)))
		for name, conn := range p.conns {
			if got, err := callWaiting(p.ctx, conn); err != nil || got != "a" {
				t.Errorf("%s: RPC to A once C's endpoints came = %q, %v; want it served by a", name, got, err)
			}
		}
	})
}

// withTLSParams gives c an UpstreamTlsContext with tls_params, which
// grpc-go and goxds both reject.
func withTLSParams(t *testing.T, c *clusterv3.Cluster) *clusterv3.Cluster {
	t.Helper()
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: testutils.MarshalAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "roots"},
			}},
		}}),
	}}
	return c
}

// callWaiting is call with wait-for-ready.
func callWaiting(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, sayHello, wrapperspb.String("hi"), out, grpc.WaitForReady(true))
	return out.GetValue(), err
}
