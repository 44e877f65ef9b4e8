package grpcxds_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// The tests run real gRPC servers on 127.0.0.1 behind go-control-plane's
// management server, and channels through the goxds resolver. They wait on
// RPC outcomes with deadlines and never sleep.

const (
	// testTimeout bounds each test's waits. It is a bound on a hang, not
	// on speed: the counting tests send 2,000–3,000 RPCs under it, which
	// with -race on a machine loaded 30 deep on 2 cores took past 20 s.
	testTimeout = 60 * time.Second
	nodeID      = "node-1"
	listener    = "greeter"
	sayHello    = "/goxds.test.Greeter/SayHello"
)

// greeter is the test service: SayHello answers with the backend's name.
// It is defined by hand, with wrapperspb messages, so no code generation
// is needed.
type greeter interface {
	SayHello(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

var greeterDesc = grpc.ServiceDesc{
	ServiceName: "goxds.test.Greeter",
	HandlerType: (*greeter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "SayHello",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return srv.(greeter).SayHello(ctx, in)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler:       func(srv any, stream grpc.ServerStream) error { return srv.(*backend).chat(stream) },
	}},
}

// chat is a bidi streaming method: it counts the messages the client
// sends, and when the client is done answers with the backend's name and
// the count.
func (b *backend) chat(stream grpc.ServerStream) error {
	b.rpcs.Add(1)
	if h := b.handler.Load(); h != nil {
		if err := (*h)(stream.Context()); err != nil {
			return err
		}
	}
	n := 0
	for {
		if err := stream.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			break
		}
		n++
	}
	return stream.SendMsg(wrapperspb.String(fmt.Sprintf("%s:%d", b.name, n)))
}

// backend is a greeter server on a free port of 127.0.0.1.
type backend struct {
	name  string
	addr  string
	port  uint32
	conns atomic.Int64 // connections accepted, over restarts
	rpcs  atomic.Int64
	// fail makes every RPC fail with INTERNAL.
	fail atomic.Bool
	// handler, if set, runs first in every SayHello: an error fails the
	// RPC with it.
	handler atomic.Pointer[func(context.Context) error]

	mu  sync.Mutex
	srv *grpc.Server
	wg  sync.WaitGroup
}

func (b *backend) SayHello(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	b.rpcs.Add(1)
	if b.fail.Load() {
		return nil, status.Errorf(codes.Internal, "backend %s fails on purpose", b.name)
	}
	if h := b.handler.Load(); h != nil {
		if err := (*h)(ctx); err != nil {
			return nil, err
		}
	}
	return wrapperspb.String(b.name), nil
}

// startBackend starts a backend; the test stops it.
func startBackend(t testing.TB, name string) *backend {
	t.Helper()
	b := &backend{name: name}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	b.port = uint32(lis.Addr().(*net.TCPAddr).Port)
	b.serve(lis)
	t.Cleanup(b.stop)
	return b
}

func (b *backend) serve(lis net.Listener) {
	srv := grpc.NewServer()
	srv.RegisterService(&greeterDesc, b)
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = srv.Serve(countingListener{lis, &b.conns})
	}()
}

// stop closes the server and its connections at once.
func (b *backend) stop() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	b.wg.Wait()
}

// restart serves again on the same address.
func (b *backend) restart(t *testing.T) {
	t.Helper()
	lis, err := net.Listen("tcp", b.addr)
	if err != nil {
		t.Fatalf("restarting %s on %s: %v", b.name, b.addr, err)
	}
	b.serve(lis)
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// fastBackoff keeps reconnections quick, to the management server and to
// the backends.
var fastBackoff = backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}

var fastConnect = grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: time.Second})

// env is a management server, a Builder whose client talks to it, and the
// resources the server serves.
type env struct {
	t       testing.TB
	ctx     context.Context
	ms      *testutils.ManagementServer
	builder *grpcxds.Builder
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, grpcxds.Options{})
}

// newEnvWith is newEnv with a Builder made from opts, whose Bootstrap and
// ClientOptions it fills in.
func newEnvWith(t testing.TB, opts grpcxds.Options) *env {
	t.Helper()
	return newEnvWithFeatures(t, opts)
}

// newEnvWithFeatures is newEnvWith with the server's server_features in the
// bootstrap: bootstrap.FeatureFailOnDataErrors for a server whose deletions
// drop what the client holds (gRFC A88; without it a deleted Listener or
// Cluster stays in force).
func newEnvWithFeatures(t testing.TB, opts grpcxds.Options, features ...string) *env {
	t.Helper()
	return newEnvServer(t, opts, testutils.ManagementServerOptions{}, features...)
}

// newEnvServer is newEnvWithFeatures with a management server started with
// msOpts.
func newEnvServer(t testing.TB, opts grpcxds.Options, msOpts testutils.ManagementServerOptions, features ...string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(msOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: nodeID, ServerFeatures: features}))
	if err != nil {
		t.Fatal(err)
	}
	opts.Bootstrap = cfg
	opts.ClientOptions = client.Options{
		Logger:      quietLogger,
		WatchExpiry: 2 * time.Second,
		TransportOptions: transport.Options{
			Backoff:     fastBackoff,
			DialOptions: []grpc.DialOption{fastConnect},
		},
	}
	b, err := grpcxds.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close) // after the channels', before the server stops
	return &env{t: t, ctx: ctx, ms: ms, builder: b}
}

func (e *env) update(res testutils.Resources) {
	e.t.Helper()
	if err := e.ms.Update(e.ctx, nodeID, res); err != nil {
		e.t.Fatal(err)
	}
}

// dial returns a channel to the listener through the goxds resolver and
// interceptors.
func (e *env) dial(opts ...grpc.DialOption) *grpc.ClientConn {
	e.t.Helper()
	opts = append(append(e.builder.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()), fastConnect), opts...)
	conn, err := grpc.NewClient("goxds:///"+listener, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() }) // before the server stops: cleanups run last first
	return conn
}

// call makes one RPC and returns the name of the backend that served it.
func call(ctx context.Context, conn *grpc.ClientConn, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, sayHello, wrapperspb.String("hi"), out, opts...)
	return out.GetValue(), err
}

// callWithHeader is call with one outgoing metadata pair.
func callWithHeader(ctx context.Context, conn *grpc.ClientConn, key, value string) (string, error) {
	return call(metadata.AppendToOutgoingContext(ctx, key, value), conn)
}

// waitServed makes RPCs until n in a row succeed and satisfy ok, and fails
// the test at the deadline. It is how a test waits for a configuration to
// take effect.
func (e *env) waitServed(conn *grpc.ClientConn, n int, ok func(backend string) bool) {
	e.t.Helper()
	inARow := 0
	var last string
	var lastErr error
	for inARow < n {
		if e.ctx.Err() != nil {
			e.t.Fatalf("no %d RPCs in a row as wanted: last served by %q, error %v", n, last, lastErr)
		}
		last, lastErr = call(e.ctx, conn, grpc.WaitForReady(true))
		if lastErr == nil && ok(last) {
			inARow++
		} else {
			inARow = 0
		}
	}
}

// waitFailing makes RPCs until one fails, and returns its error.
func (e *env) waitFailing(conn *grpc.ClientConn) error {
	e.t.Helper()
	for e.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(e.ctx, time.Second)
		_, err := call(ctx, conn)
		cancel()
		if err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return err
		}
	}
	e.t.Fatal("RPCs did not start failing")
	return nil
}

// count makes n RPCs and counts them by backend; any error fails the test.
func count(t *testing.T, ctx context.Context, conn *grpc.ClientConn, n int, opts ...grpc.CallOption) map[string]int {
	t.Helper()
	got := make(map[string]int)
	for range n {
		name, err := call(ctx, conn, opts...)
		if err != nil {
			t.Fatalf("RPC failed: %v", err)
		}
		got[name]++
	}
	return got
}

// load runs RPCs on workers goroutines until stop is called, which
// returns how many ran and the errors met.
func load(ctx context.Context, conn *grpc.ClientConn, workers int) (stop func() (int64, []error)) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		n    atomic.Int64
		mu   sync.Mutex
		errs []error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, err := call(ctx, conn)
				switch {
				case err == nil:
					n.Add(1)
				case ctx.Err() == nil:
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	return func() (int64, []error) {
		cancel()
		wg.Wait()
		return n.Load(), errs
	}
}

// Resource builders for the trees of the tests.

func tree(rc *routev3.RouteConfiguration, clusters []*clusterv3.Cluster, eps ...*endpointv3.ClusterLoadAssignment) testutils.Resources {
	return testutils.Resources{
		Listeners: []*listenerv3.Listener{testutils.Listener(listener, rc.GetName())},
		Routes:    []*routev3.RouteConfiguration{rc},
		Clusters:  clusters,
		Endpoints: eps,
	}
}

// routes builds the route configuration "greeter-route" with one virtual
// host for every domain.
func routes(rs ...*routev3.Route) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name:         "greeter-route",
		VirtualHosts: []*routev3.VirtualHost{{Name: "greeter", Domains: []string{"*"}, Routes: rs}},
	}
}

func prefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func toCluster(match *routev3.RouteMatch, cluster string) *routev3.Route {
	return &routev3.Route{Match: match, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
	}}}
}

func weighted(match *routev3.RouteMatch, clusters ...testutils.ClusterWeight) *routev3.Route {
	wc := &routev3.WeightedCluster{}
	for _, c := range clusters {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: c.Name, Weight: wrapperspb.UInt32(c.Weight)})
	}
	return &routev3.Route{Match: match, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc},
	}}}
}

// eds builds an EDS cluster's ClusterLoadAssignment: one endpoint per
// backend, in one locality of priority 0.
func eds(cluster string, bs ...*backend) *endpointv3.ClusterLoadAssignment {
	var specs []testutils.EndpointSpec
	for _, b := range bs {
		specs = append(specs, testutils.EndpointSpec{Host: "127.0.0.1", Port: b.port})
	}
	return testutils.Endpoints(cluster, specs)
}

func clusters(names ...string) []*clusterv3.Cluster {
	var out []*clusterv3.Cluster
	for _, n := range names {
		out = append(out, testutils.Cluster(n, ""))
	}
	return out
}

// forConnectModes runs test as a subtest with a channel that connects
// every cluster at once, as gRPC does, and with one that connects each on
// its first RPC.
func forConnectModes(t *testing.T, test func(t *testing.T, opts grpcxds.Options)) {
	for _, mode := range []struct {
		name string
		opts grpcxds.Options
	}{{"eager", grpcxds.Options{}}, {"first-rpc", grpcxds.Options{ConnectOnFirstRPC: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			test(t, mode.opts)
		})
	}
}
