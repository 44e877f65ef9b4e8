package grpcxds_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
		// gRPC's words, which tests and alerts written for grpc-go look for.
		want := `authority "no-such-authority" specified in dial target "goxds://no-such-authority/` + listener + `" is not found in the bootstrap file`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: RPC to an unknown authority: %v; want an error containing %q", name, err, want)
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

// withResolversWarning is the warning at the first RPC of a channel made
// with grpc.WithResolvers(b) alone.
const withResolversWarning = "an RPC came without the goxds interceptors: its channel was made with grpc.WithResolvers(b) and no b.DialOptions(); " +
	"route timeouts, retry policies and HTTP filters do not apply to it, and a waiting RPC may change cluster; " +
	"make the channel with grpcxds.NewClient(target, b), or b.DialOptions() in grpc.NewClient"

// registeredWarning is the warning at the first RPC of a channel made with
// grpc.NewClient alone, for a scheme grpcxds.Register registered.
func registeredWarning(scheme string) string {
	return `an RPC came without the goxds interceptors: its channel was made with grpc.NewClient from a target of scheme "` + scheme +
		`", which grpcxds.Register registered, and no b.DialOptions(); ` +
		"route timeouts, retry policies and HTTP filters do not apply to it, and a waiting RPC may change cluster; " +
		"make the channel with grpcxds.NewClient(target, b), or b.DialOptions() in grpc.NewClient"
}

// A channel made with grpc.WithResolvers(b) alone routes by the
// configuration, but none of the per-RPC parts apply: the log says so at
// its first RPC, naming what the user did and what to do instead.
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
	sink.want(e.ctx, t, slog.LevelWarn, withResolversWarning, map[string]string{"method": sayHello})
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
		logger, sink := newLogSink()
		b, err := grpcxds.Register(grpcxds.Options{Scheme: scheme, Bootstrap: cfg, Logger: logger, ClientOptions: client.Options{Logger: quietLogger}})
		if err != nil {
			t.Fatalf("Register(%q): %v", scheme, err)
		}
		defer b.Close()
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
		// The channel made without b.DialOptions() is told how it was made.
		sink.want(e.ctx, t, slog.LevelWarn, registeredWarning(scheme), map[string]string{"method": sayHello})
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

// NewClient refuses what would leave every RPC waiting for a configuration
// that never comes: a target of another scheme than the Builder's (the
// "xds:///name" of grpc-go's habit), one with no scheme, which gRPC gives
// to its dns resolver, and a nil Builder.
func TestNewClientRefusesForeignTargets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())
	for _, tc := range []struct {
		target string
		want   []string
	}{
		{"xds:///my-service", []string{`"xds:///my-service"`, `scheme "xds"`, `serves "goxds"`, "goxds:///listener-name", `Options.Scheme "xds"`}},
		{"my-service", []string{`"my-service"`, "no scheme", `serves "goxds"`, "goxds:///listener-name"}},
		{"dns:///my-service:443", []string{`scheme "dns"`, `serves "goxds"`}},
	} {
		conn, err := grpcxds.NewClient(tc.target, e.builder, creds)
		if err == nil {
			conn.Close()
			t.Errorf("NewClient(%q): no error; want one naming the scheme the Builder serves", tc.target)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("NewClient(%q): %v; want it to say %s", tc.target, err, w)
			}
		}
	}
	if conn, err := grpcxds.NewClient("goxds:///"+listener, nil, creds); err == nil || !strings.Contains(err.Error(), "nil Builder") {
		if err == nil {
			conn.Close()
		}
		t.Errorf("NewClient with a nil Builder: %v; want an error saying so", err)
	}
}

// A channel made with the goxds dial options but a target some other
// resolver serves (grpc.NewClient does not check, as NewClient does) never
// gets a configuration from the Builder: its RPCs fail at once saying why,
// rather than wait for their deadline, and the log says so.
func TestForeignTargetFailsAtOnce(t *testing.T) {
	t.Parallel()
	logger, sink := newLogSink()
	e := newEnvWith(t, grpcxds.Options{Logger: logger})
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	// Long enough that an RPC left waiting for a configuration fails on it
	// only after a loaded machine has run everything else; the RPCs must
	// fail without waiting for it.
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	for _, target := range []string{"my-service", "other:///" + listener} {
		conn, err := grpc.NewClient(target, append(e.builder.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wants := []string{fmt.Sprintf("target %q is resolved by gRPC's \"dns\" resolver", target), `serves targets of scheme "goxds"`}
		check := func(what string, err error) {
			t.Helper()
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("%s on a channel to %q: %v; want FAILED_PRECONDITION at once", what, target, err)
				return
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s on a channel to %q: %v; want it to say %s", what, target, err, w)
				}
			}
		}
		_, err = call(ctx, conn, grpc.WaitForReady(true))
		check("unary RPC", err)
		_, err = conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/goxds.test.Greeter/Chat", grpc.WaitForReady(true))
		check("stream", err)
	}
	if n := a.rpcs.Load(); n != 0 {
		t.Errorf("%d RPCs reached the backend; want none", n)
	}
	sink.want(e.ctx, t, slog.LevelWarn, "a channel with the goxds dial options is not resolved by the goxds Builder: its RPCs fail", nil)
}
