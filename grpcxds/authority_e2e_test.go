package grpcxds_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// Authority rewriting (gRFC A81): the backends assert the :authority of
// every RPC they serve. The client says, in x-want-<backend> headers, what
// each backend must see; a backend that sees anything else fails the RPC
// with a status naming what it got.

// channelAuthority is the authority of the test channels (goxds:///greeter).
const channelAuthority = listener

// assertAuthority makes b fail every RPC whose :authority is not the one
// the RPC's x-want-<b.name> header names.
func assertAuthority(b *backend) {
	h := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		want, got := md.Get("x-want-"+b.name), md.Get(":authority")
		if len(want) != 1 || len(got) != 1 || want[0] != got[0] {
			return status.Errorf(codes.FailedPrecondition, "backend %s got :authority %q, want %q", b.name, got, want)
		}
		return nil
	}
	b.handler.Store(&h)
}

// callWanting makes one RPC that waits for ready, routed by x-target
// (byHeader; "" sends none), telling each backend the authority it must
// see: wants holds backend names and authorities, in pairs.
func callWanting(ctx context.Context, conn *grpc.ClientConn, target string, wants []string, opts ...grpc.CallOption) (string, error) {
	var kv []string
	if target != "" {
		kv = append(kv, "x-target", target)
	}
	for i := 0; i+1 < len(wants); i += 2 {
		kv = append(kv, "x-want-"+wants[i], wants[i+1])
	}
	return call(metadata.AppendToOutgoingContext(ctx, kv...), conn, append(opts, grpc.WaitForReady(true))...)
}

// servedAll makes n RPCs as callWanting does: every one must succeed, and
// the backends that served them are counted.
func servedAll(t *testing.T, ctx context.Context, conn *grpc.ClientConn, n int, target string, wants []string, opts ...grpc.CallOption) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		name, err := callWanting(ctx, conn, target, wants, opts...)
		if err != nil {
			t.Fatalf("RPC (x-target %q): %v", target, err)
		}
		got[name]++
	}
	return got
}

// servedEach makes RPCs as callWanting does, every one of which must
// succeed, until each backend of names has served one: round robin sends
// to an endpoint only once it is connected, which a loaded machine may
// delay past any fixed number of RPCs. ctx bounds the wait.
func servedEach(t *testing.T, ctx context.Context, conn *grpc.ClientConn, target string, wants []string, names ...string) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for slices.ContainsFunc(names, func(n string) bool { return got[n] == 0 }) {
		name, err := callWanting(ctx, conn, target, wants)
		if err != nil {
			t.Fatalf("RPC (x-target %q): %v; served so far %v, want each of %q", target, err, got, names)
		}
		got[name]++
	}
	return got
}

// rewriting sets r's auto_host_rewrite.
func rewriting(r *routev3.Route) *routev3.Route {
	r.GetRoute().HostRewriteSpecifier = &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapperspb.Bool(true)}
	return r
}

// withHostnames gives the endpoints of cla, in order, the hostnames.
func withHostnames(cla *endpointv3.ClusterLoadAssignment, hostnames ...string) *endpointv3.ClusterLoadAssignment {
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

// authorityTree routes RPCs with x-target "plain" to cluster A without
// rewriting, "other" to cluster B, which lists backend a under another
// hostname, and the rest to A, rewriting. A's endpoints a and b have
// hostnames of their own; c (in cluster C, x-target "none") has none.
func authorityTree(a, b, c *backend) testutils.Resources {
	return tree(routes(
		toCluster(byHeader("plain"), "A"),
		rewriting(toCluster(byHeader("other"), "B")),
		rewriting(toCluster(byHeader("none"), "C")),
		rewriting(toCluster(prefix("/"), "A")),
	), clusters("A", "B", "C"),
		withHostnames(eds("A", a, b), "a.goxds.test", "b.goxds.test"),
		withHostnames(eds("B", a), "other.goxds.test:8443"),
		eds("C", c))
}

// From a server marked trusted_xds_server, a route with auto_host_rewrite
// sends each RPC with the hostname of the endpoint picked for it: with
// round robin over endpoints of different hostnames, each sees its own.
// The same address listed by another cluster under another hostname gets
// that one (its own connection): never the hostname of the other listing.
// A route without the flag, and an endpoint without a hostname, keep the
// channel's authority; and an authority the application sets with
// grpc.CallAuthority wins over the rewrite, as the gRFC says.
func TestAuthorityRewrite(t *testing.T) {
	t.Parallel()
	e := newEnvWithFeatures(t, grpcxds.Options{}, bootstrap.FeatureTrustedXDSServer)
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	for _, be := range []*backend{a, b, c} {
		assertAuthority(be)
	}
	e.update(authorityTree(a, b, c))
	conn := e.dial()

	own := []string{"a", "a.goxds.test", "b", "b.goxds.test"}
	servedEach(t, e.ctx, conn, "", own, "a", "b") // round robin, each with its own hostname
	// Alternating between the two listings of a's address: each RPC gets
	// the hostname of the listing its route chose.
	for range 5 {
		servedAll(t, e.ctx, conn, 1, "other", []string{"a", "other.goxds.test:8443"})
		servedAll(t, e.ctx, conn, 2, "", own)
	}
	servedAll(t, e.ctx, conn, 4, "plain", []string{"a", channelAuthority, "b", channelAuthority})
	servedAll(t, e.ctx, conn, 2, "none", []string{"c", channelAuthority})
	servedAll(t, e.ctx, conn, 4, "", []string{"a", "app.goxds.test", "b", "app.goxds.test"}, grpc.CallAuthority("app.goxds.test"))
}

// From a server not marked trusted_xds_server, auto_host_rewrite is
// ignored: every RPC keeps the channel's authority.
func TestAuthorityRewriteIgnoredFromAnUntrustedServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	for _, be := range []*backend{a, b, c} {
		assertAuthority(be)
	}
	e.update(authorityTree(a, b, c))
	conn := e.dial()
	unchanged := []string{"a", channelAuthority, "b", channelAuthority}
	servedEach(t, e.ctx, conn, "", unchanged, "a", "b") // round robin, each with the channel's authority
	servedAll(t, e.ctx, conn, 2, "other", unchanged)
}

// A LOGICAL_DNS cluster's endpoint has for its authority the name the
// cluster resolves, with its port (gRFC A81), whatever address it
// resolved to.
func TestAuthorityRewriteLogicalDNS(t *testing.T) {
	t.Parallel()
	e := newEnvWithFeatures(t, grpcxds.Options{}, bootstrap.FeatureTrustedXDSServer)
	a := startBackend(t, "a")
	assertAuthority(a)
	e.update(tree(routes(rewriting(toCluster(prefix("/"), "dns"))),
		[]*clusterv3.Cluster{testutils.LogicalDNSCluster("dns", "localhost", a.port)}))
	conn := e.dial()
	servedAll(t, e.ctx, conn, 3, "", []string{"a", fmt.Sprintf("localhost:%d", a.port)})
}

// A retry is picked anew, and carries the hostname of the endpoint it is
// sent to: a's first attempt fails UNAVAILABLE, the retry goes to b with
// b's hostname.
func TestAuthorityRewritePerAttempt(t *testing.T) {
	t.Parallel()
	e := newEnvWithFeatures(t, grpcxds.Options{}, bootstrap.FeatureTrustedXDSServer)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	assertAuthority(a)
	assertAuthority(b)
	failA := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get(":authority"); len(got) != 1 || got[0] != "a.goxds.test" {
			return status.Errorf(codes.FailedPrecondition, "backend a got :authority %q, want a.goxds.test", got)
		}
		return status.Error(codes.Unavailable, "a fails every attempt")
	}
	r := rewriting(toCluster(prefix("/"), "A"))
	r.GetRoute().RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(1)}
	e.update(tree(routes(r), clusters("A"), withHostnames(eds("A", a, b), "a.goxds.test", "b.goxds.test")))
	conn := e.dial()
	// Both endpoints ready first, so that round robin alternates.
	servedEach(t, e.ctx, conn, "", []string{"a", "a.goxds.test", "b", "b.goxds.test"}, "a", "b")
	a.handler.Store(&failA)
	start := a.rpcs.Load()
	for range 6 {
		// Round robin sends every RPC's attempts to a and b in turn: an
		// RPC that starts on a is retried on b, one that starts on b is
		// served there.
		name, err := callWanting(e.ctx, conn, "", []string{"b", "b.goxds.test"})
		if err != nil || name != "b" {
			t.Fatalf("RPC: served by %q, %v; want b", name, err)
		}
	}
	if a.rpcs.Load() == start {
		t.Error("no attempt reached a: the retry was not tested")
	}
}

// A channel without the goxds interceptors (the resolver alone) routes
// each RPC in the picker, and rewrites the authority all the same.
func TestAuthorityRewriteWithoutInterceptors(t *testing.T) {
	t.Parallel()
	e := newEnvWithFeatures(t, grpcxds.Options{Logger: quietLogger}, bootstrap.FeatureTrustedXDSServer)
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	for _, be := range []*backend{a, b, c} {
		assertAuthority(be)
	}
	e.update(authorityTree(a, b, c))
	conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	servedAll(t, e.ctx, conn, 4, "", []string{"a", "a.goxds.test", "b", "b.goxds.test"})
	servedAll(t, e.ctx, conn, 2, "other", []string{"a", "other.goxds.test:8443"})
	servedAll(t, e.ctx, conn, 2, "plain", []string{"a", channelAuthority, "b", channelAuthority})
}

// A route whose cluster the RLS plugin names rewrites the authority too:
// each RPC gets the hostname of the endpoint picked in the cluster the
// lookup service named.
func TestAuthorityRewriteThroughRLS(t *testing.T) {
	t.Parallel()
	e := newEnvWithFeatures(t, grpcxds.Options{}, bootstrap.FeatureTrustedXDSServer)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	assertAuthority(a)
	assertAuthority(b)
	rls := startRLS(t)
	rc := rlsRoutes(t, rlsConfig(rls.Address(), ""), false)
	rewriting(rc.VirtualHosts[0].Routes[0])
	e.update(tree(rc, clusters("A", "B"), withHostnames(eds("A", a), "a.goxds.test"), withHostnames(eds("B", b), "b.goxds.test")))
	conn := e.dial()
	wants := []string{"a", "a.goxds.test", "b", "b.goxds.test"}
	for key, want := range map[string]string{"a": "a", "b": "b"} {
		ctx := metadata.AppendToOutgoingContext(e.ctx, "x-k", key)
		for range 3 {
			if got, err := callWanting(ctx, conn, "", wants); err != nil || got != want {
				t.Fatalf("RPC with x-k %q: served by %q, %v; want %q", key, got, err, want)
			}
		}
	}
}
