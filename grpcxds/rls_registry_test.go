package grpcxds_test

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

const rlsTypeURL = "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"

// newSharedClientEnv is newEnvServer with a client the test makes itself
// from reg (nil: the default registry), given to the Builder as
// Options.Client; the route configurations it NACKs go to the returned
// channel.
func newSharedClientEnv(t *testing.T, reg *resources.Registry) (*env, <-chan string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	nacks := make(chan string, 10)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		OnStreamRequest: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			if req.GetErrorDetail() != nil && req.GetTypeUrl() == resources.RouteConfigTypeURL {
				select {
				case nacks <- req.GetErrorDetail().GetMessage():
				default:
				}
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{
		Logger:           quietLogger,
		WatchExpiry:      2 * time.Second,
		Registry:         reg,
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{fastConnect}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b, err := grpcxds.NewBuilder(grpcxds.Options{Client: c, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close) // after the channels', before the server stops
	return &env{t: t, ctx: ctx, ms: ms, builder: b}, nacks
}

// Importing grpcxds (this test binary does) changes nothing for a client
// made without its help: the default registry has no RLS plugin, so such a
// client skips a route by an optional RLS plugin and NACKs a route
// configuration with a required one, as it does any plugin it does not
// know.
func TestRLSNotInAClientMadeWithoutGrpcxds(t *testing.T) {
	t.Parallel()
	if _, ok := resources.DefaultRegistry().LookupClusterSpecifier(rlsTypeURL); ok {
		t.Errorf("the default registry has the RLS plugin: importing grpcxds changed it")
	}
	e, nacks := newSharedClientEnv(t, nil)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	rls := startRLS(t)

	optional := rlsRoutes(t, rlsConfig(rls.Address(), ""), true)
	optional.VirtualHosts[0].Routes = append(optional.VirtualHosts[0].Routes, toCluster(prefix("/"), "B"))
	e.update(tree(optional, clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial()
	// Through RLS, key a would go to A; the plugin's route skipped, the
	// next one sends it to B.
	if got, err := callWithHeader(e.ctx, conn, "x-k", "a"); err != nil || got != "b" {
		t.Fatalf("RPC with x-k a: served by %q, err %v; want b (the route by the optional RLS plugin skipped)", got, err)
	}
	if n := len(rls.Requests()); n != 0 {
		t.Errorf("%d lookups; want none", n)
	}

	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), ""), false), clusters("A", "B"), eds("A", a), eds("B", b)))
	select {
	case msg := <-nacks:
		if !strings.Contains(msg, `plugin "rls" has unsupported type grpc.lookup.v1.RouteLookupClusterSpecifier and is not optional`) {
			t.Errorf("NACK %q; want it to name the unsupported plugin and its type", msg)
		}
	case <-e.ctx.Done():
		t.Fatal("a route configuration with a required RLS plugin was not NACKed")
	}
	if got, err := callWithHeader(e.ctx, conn, "x-k", "a"); err != nil || got != "b" {
		t.Errorf("RPC with x-k a after the NACK: served by %q, err %v; want b, the configuration in force", got, err)
	}
}

// A client the program makes routes by RLS once RegisterRLS has added the
// plugin to its registry; RegisterRLS refuses a nil registry and a second
// registration.
func TestRLSRegisterRLSForASharedClient(t *testing.T) {
	t.Parallel()
	reg := resources.DefaultRegistry().Clone()
	if err := grpcxds.RegisterRLS(reg); err != nil {
		t.Fatal(err)
	}
	if err := grpcxds.RegisterRLS(reg); err == nil || !strings.Contains(err.Error(), rlsTypeURL) {
		t.Errorf("RegisterRLS twice: %v; want an error naming the type URL", err)
	}
	if err := grpcxds.RegisterRLS(nil); err == nil {
		t.Error("RegisterRLS(nil) succeeded")
	}
	e, _ := newSharedClientEnv(t, reg)
	a, b := startBackend(t, "a"), startBackend(t, "b")
	rls := startRLS(t)
	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), ""), false), clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial()
	for _, key := range []string{"a", "b", "a"} {
		if got, err := callWithHeader(e.ctx, conn, "x-k", key); err != nil || got != key {
			t.Fatalf("RPC with x-k %q: served by %q, err %v; want %q", key, got, err, key)
		}
	}
}

// A Builder that makes its client routes by RLS also when the caller
// names a registry of their own, and leaves that registry without the
// plugin: the Builder adds it to its client's copy.
func TestRLSBuilderLeavesTheCallersRegistry(t *testing.T) {
	t.Parallel()
	reg := resources.DefaultRegistry().Clone()
	e := newEnvServer(t, grpcxds.Options{}, testutils.ManagementServerOptions{})
	// newEnvServer's Builder has no registry of the caller's; make one
	// that does, on the same server.
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: e.ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, Logger: quietLogger, ClientOptions: client.Options{
		Logger:           quietLogger,
		Registry:         reg,
		TransportOptions: transport.Options{Backoff: fastBackoff, DialOptions: []grpc.DialOption{fastConnect}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	e.builder = b
	a, bk := startBackend(t, "a"), startBackend(t, "b")
	rls := startRLS(t)
	e.update(tree(rlsRoutes(t, rlsConfig(rls.Address(), ""), false), clusters("A", "B"), eds("A", a), eds("B", bk)))
	conn := e.dial()
	for _, key := range []string{"a", "b"} {
		if got, err := callWithHeader(e.ctx, conn, "x-k", key); err != nil || got != key {
			t.Fatalf("RPC with x-k %q: served by %q, err %v; want %q", key, got, err, key)
		}
	}
	if _, ok := reg.LookupClusterSpecifier(rlsTypeURL); ok {
		t.Error("the caller's registry has the RLS plugin after NewBuilder")
	}
}
