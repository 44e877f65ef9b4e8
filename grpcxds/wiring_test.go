package grpcxds_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// sharedClientBuilder returns a Builder on a client the test made from a
// bootstrap with the given listener name template, as a program that
// shares its goxds client with its channels does.
func sharedClientBuilder(t *testing.T, e *env, template string) *grpcxds.Builder {
	t.Helper()
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: e.ms.Address(), NodeID: nodeID, ClientDefaultListenerResourceNameTemplate: template,
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b, err := grpcxds.NewBuilder(grpcxds.Options{Client: c, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Builder given a client names listeners with that client's bootstrap:
// "goxds:///greeter" is the Listener "mesh/greeter" when the template is
// "mesh/%s".
func TestSharedClientListenerTemplate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	res := tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a))
	res.Listeners = []*listenerv3.Listener{testutils.Listener("mesh/"+listener, "greeter-route")}
	e.update(res)
	b := sharedClientBuilder(t, e, "mesh/%s")
	conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(b), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || got != "a" {
		t.Errorf("RPC to goxds:///%s with template mesh/%%s: served by %q, %v; want a", listener, got, err)
	}
}

// An RPC failing because its listener does not exist names the listener
// and the node ID, as grpc-go's do, so that users can grep for either.
func TestMissingListenerErrorNamesNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := call(e.ctx, e.dial(), grpc.WaitForReady(true))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `"`+listener+`"`) || !strings.Contains(err.Error(), nodeID) {
		t.Errorf("RPC failed with %v; want UNAVAILABLE naming listener %q and node ID %q", err, listener, nodeID)
	}
}

// A target whose authority is not in the bootstrap fails its RPCs with an
// error that names the authority, with a shared client too, and at once
// with the interceptors (wait-for-ready or not).
func TestUnknownAuthorityNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	shared := sharedClientBuilder(t, e, "")
	for name, opts := range map[string][]grpc.DialOption{
		"own client":                 {grpc.WithResolvers(e.builder)},
		"shared client":              {grpc.WithResolvers(shared)},
		"shared client, DialOptions": shared.DialOptions(),
	} {
		conn, err := grpc.NewClient("goxds://no-such-authority/"+listener, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		callOpts := []grpc.CallOption{}
		if strings.Contains(name, "DialOptions") {
			callOpts = append(callOpts, grpc.WaitForReady(true))
		}
		_, err = call(e.ctx, conn, callOpts...)
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), `"no-such-authority"`) || !strings.Contains(err.Error(), "not in the bootstrap") {
			t.Errorf("%s: RPC to an unknown authority: %v; want an error naming the authority", name, err)
		}
	}
}

// A channel that ignores the resolver's service config
// (grpc.WithDisableServiceConfig) runs gRPC's default policy instead of the
// goxds balancer, which would send RPCs wherever it likes: its RPCs fail
// with an error saying so, and the log says so too.
func TestDisabledServiceConfigFails(t *testing.T) {
	t.Parallel()
	logger, sink := newLogSink()
	e := newEnvWith(t, grpcxds.Options{Logger: logger})
	a, b := startBackend(t, "a"), startBackend(t, "b")
	e.update(tree(routes(toCluster(prefix("/"), "B")), clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial(grpc.WithDisableServiceConfig())
	_, err := call(e.ctx, conn, grpc.WaitForReady(true))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "WithDisableServiceConfig") {
		t.Errorf("RPC on a channel made with WithDisableServiceConfig: %v; want UNAVAILABLE naming the option", err)
	}
	if n := a.rpcs.Load() + b.rpcs.Load(); n != 0 {
		t.Errorf("%d RPCs reached a backend; want none", n)
	}
	sink.want(e.ctx, t, slog.LevelWarn, "the channel ignores the xDS configuration", map[string]string{"listener": listener})
}

// A channel made with grpc.WithResolvers(b) alone routes by the
// configuration, but none of the per-RPC parts apply: the log says so at
// its first RPC.
func TestNoInterceptorsWarned(t *testing.T) {
	t.Parallel()
	logger, sink := newLogSink()
	e := newEnvWith(t, grpcxds.Options{Logger: logger})
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	conn, err := grpc.NewClient("goxds:///"+listener, grpc.WithResolvers(e.builder), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || got != "a" {
		t.Fatalf("RPC: %q, %v; want served by a", got, err)
	}
	sink.want(e.ctx, t, slog.LevelWarn, grpcxds.NoInterceptorsWarning, map[string]string{"method": sayHello})
}

// The dial options of one DialOptions call serve one channel.
func TestDialOptionsOncePerChannel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	opts := append(e.builder.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	var errs []error
	for range 2 {
		conn, err := grpc.NewClient("goxds:///"+listener, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = call(e.ctx, conn, grpc.WaitForReady(true))
		errs = append(errs, err)
	}
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "DialOptions once per channel") {
		t.Errorf("two channels of one DialOptions: RPC errors %v; want the first to succeed and the second to say why it cannot", errs)
	}
}

// Register serves a scheme of the user's choosing, "xds" included when
// grpc-go's own resolver is not linked in, and refuses a scheme taken. Not
// parallel: gRPC's resolver registry is for init time, unguarded.
func TestRegister(t *testing.T) {
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: e.ms.Address(), NodeID: nodeID}))
	if err != nil {
		t.Fatal(err)
	}
	// With -count, the test runs again in the same process, whose
	// registry keeps what the last run registered.
	schemes := []string{fmt.Sprintf("goxds-register-test-%d", registerRuns.Add(1))}
	if resolver.Get("xds") == nil {
		schemes = append(schemes, "xds")
	}
	for _, scheme := range schemes {
		b, err := grpcxds.Register(grpcxds.Options{Scheme: scheme, Bootstrap: cfg, Logger: quietLogger, ClientOptions: client.Options{Logger: quietLogger}})
		if err != nil {
			t.Fatalf("Register(%q): %v", scheme, err)
		}
		for _, opts := range [][]grpc.DialOption{nil, b.DialOptions()} {
			conn, err := grpc.NewClient(scheme+":///"+listener, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil || got != "a" {
				t.Errorf("RPC to %s:///%s: %q, %v; want served by a", scheme, listener, got, err)
			}
			conn.Close()
		}
	}
	if _, err := grpcxds.Register(grpcxds.Options{Scheme: "dns", Bootstrap: cfg}); err == nil || !strings.Contains(err.Error(), `"dns"`) {
		t.Errorf("Register(dns): %v; want an error: gRPC's dns resolver has the scheme", err)
	}
	// "xds" is now a goxds Builder's, or grpc-go's own resolver's when
	// google.golang.org/grpc/xds is linked into this test binary (the LB
	// parity tests link it).
	want := "another goxds Builder"
	if !strings.Contains(fmt.Sprintf("%T", resolver.Get("xds")), "grpcxds.") {
		want = "grpc-go's own xDS resolver"
	}
	if _, err := grpcxds.Register(grpcxds.Options{Scheme: "xds", Bootstrap: cfg}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Register(xds) again: %v; want an error saying %q has the scheme", err, want)
	}
}

// registerRuns counts TestRegister's runs, for schemes of their own.
var registerRuns atomic.Int64
