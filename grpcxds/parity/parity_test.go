// Package parity_test holds the same xDS resources up to goxds and to
// grpc-go's own xds resolver, both linked into this test binary, and
// asserts the same RPC outcomes. It is a package of its own because
// importing google.golang.org/grpc/xds registers grpc-go's "xds" scheme
// and its balancers for the whole binary; grpcxds's own tests register
// "xds" for goxds.
package parity_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

const (
	testTimeout = 30 * time.Second
	listener    = "greeter"
	routeName   = "greeter-route"
	sayHello    = "/goxds.test.Greeter/SayHello"
)

var quietLogger = slog.New(slog.DiscardHandler)

// backend is a greeter server on 127.0.0.1 that answers with its name, or
// fails as its handler says.
type backend struct {
	name    string
	port    uint32
	rpcs    atomic.Int64
	handler atomic.Pointer[func(context.Context) error]
}

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
}

func (b *backend) SayHello(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	b.rpcs.Add(1)
	if h := b.handler.Load(); h != nil {
		if err := (*h)(ctx); err != nil {
			return nil, err
		}
	}
	return wrapperspb.String(b.name), nil
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, port: uint32(lis.Addr().(*net.TCPAddr).Port)}
	srv := grpc.NewServer()
	srv.RegisterService(&greeterDesc, b)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return b
}

// pair is one management server, and a channel to the listener through
// each resolver, each with a node of its own.
type pair struct {
	t     *testing.T
	ctx   context.Context
	ms    *testutils.ManagementServer
	conns map[string]*grpc.ClientConn // "goxds", "grpc-go"
}

func newPair(t *testing.T) *pair {
	t.Helper()
	return newPairWith(t, testutils.ManagementServerOptions{})
}

// newPairWith is newPair with a management server started with msOpts.
func newPairWith(t *testing.T, msOpts testutils.ManagementServerOptions) *pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ms, err := testutils.StartManagementServer(msOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	p := &pair{t: t, ctx: ctx, ms: ms, conns: make(map[string]*grpc.ClientConn)}

	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "goxds"}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: cfg, Logger: quietLogger, ClientOptions: client.Options{Logger: quietLogger}})
	if err != nil {
		t.Fatal(err)
	}
	p.dial("goxds", grpcxds.DefaultScheme, b.DialOptions()...)

	rb, err := xds.NewXDSResolverWithConfigForTesting(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(), NodeID: "grpc-go", ServerFeatures: []string{"xds_v3"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	p.dial("grpc-go", "xds", grpc.WithResolvers(rb))
	return p
}

func (p *pair) dial(name, scheme string, opts ...grpc.DialOption) {
	p.t.Helper()
	conn, err := grpc.NewClient(scheme+":///"+listener, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { conn.Close() })
	p.conns[name] = conn
}

// update serves res to both nodes.
func (p *pair) update(res testutils.Resources) {
	p.t.Helper()
	for _, node := range []string{"goxds", "grpc-go"} {
		if err := p.ms.Update(p.ctx, node, res); err != nil {
			p.t.Fatal(err)
		}
	}
}

func call(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, sayHello, wrapperspb.String("hi"), out)
	return out.GetValue(), err
}

// waitServedBy makes RPCs on conn until one is served by backend name.
func (p *pair) waitServedBy(conn *grpc.ClientConn, name string) {
	p.t.Helper()
	for {
		got, err := call(p.ctx, conn)
		if err == nil && got == name {
			return
		}
		if p.ctx.Err() != nil {
			p.t.Fatalf("never served by %s: last %q, %v", name, got, err)
		}
	}
}

func tree(rc *routev3.RouteConfiguration, l *listenerv3.Listener, cls []*clusterv3.Cluster, eps ...*endpointv3.ClusterLoadAssignment) testutils.Resources {
	if l == nil {
		l = testutils.Listener(listener, routeName)
	}
	return testutils.Resources{Listeners: []*listenerv3.Listener{l}, Routes: []*routev3.RouteConfiguration{rc}, Clusters: cls, Endpoints: eps}
}

func vhost(rs ...*routev3.Route) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: routeName, VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: rs}}}
}

func toCluster(cluster string) *routev3.Route {
	return &routev3.Route{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
	}
}

func eds(cluster string, b *backend) *endpointv3.ClusterLoadAssignment {
	return testutils.Endpoints(cluster, []testutils.EndpointSpec{{Host: "127.0.0.1", Port: b.port}})
}

func clusters(names ...string) []*clusterv3.Cluster {
	var out []*clusterv3.Cluster
	for _, n := range names {
		out = append(out, testutils.Cluster(n, ""))
	}
	return out
}

// withFault is the test listener with a fault filter before its router.
func withFault(t *testing.T, f *faultv3.HTTPFault) *listenerv3.Listener {
	t.Helper()
	l := testutils.Listener(listener, routeName)
	hcm := new(hcmv3.HttpConnectionManager)
	if err := l.ApiListener.ApiListener.UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: testutils.MarshalAny(f)}}}, hcm.HttpFilters...)
	l.ApiListener.ApiListener = testutils.MarshalAny(hcm)
	return l
}

// outcome is what one resolver's channel did with one case.
type outcome struct {
	code     codes.Code
	attempts int64 // seen at the server
	share    float64
}

// The same Listener, RouteConfiguration and Clusters give the same RPC
// outcomes through goxds and through grpc-go's own xds resolver: the
// status of a fault abort, the attempts a retry policy makes seen at the
// server, the deadline of a max_stream_duration, a weighted split within
// 5%, and the route gRPC skips.
func TestParityWithGRPCGo(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	for i, tc := range []struct {
		name string
		// fault is the code of a case whose fault filter aborts every RPC.
		fault codes.Code
		// setup returns the resources for backend ready, which serves
		// them, and a second backend; run makes the case's RPCs on conn.
		setup func(ready, other *backend) testutils.Resources
		run   func(conn *grpc.ClientConn, ready, other *backend) outcome
	}{{
		name: "retries: UNAVAILABLE twice, num_retries 3",
		setup: func(ready, _ *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(3)}
			return tree(vhost(r), nil, clusters("A"), eds("A", ready))
		},
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			return failing(p.ctx, conn, ready, 2, codes.Unavailable)
		},
	}, {
		name: "retries: always UNAVAILABLE, num_retries 10 on the virtual host",
		setup: func(ready, _ *backend) testutils.Resources {
			rc := vhost(toCluster("A"))
			rc.VirtualHosts[0].RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(10)}
			return tree(rc, nil, clusters("A"), eds("A", ready))
		},
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			return failing(p.ctx, conn, ready, 100, codes.Unavailable)
		},
	}, {
		name: "retries: INTERNAL not in retry_on",
		setup: func(ready, _ *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable,cancelled", NumRetries: wrapperspb.UInt32(3)}
			return tree(vhost(r), nil, clusters("A"), eds("A", ready))
		},
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			return failing(p.ctx, conn, ready, 100, codes.Internal)
		},
	}, {
		name: "max_stream_duration 300ms on a server that blocks",
		setup: func(ready, _ *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(300 * time.Millisecond)}
			return tree(vhost(r), nil, clusters("A"), eds("A", ready))
		},
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			block := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
			ready.handler.Store(&block)
			defer ready.handler.Store(nil)
			start := time.Now()
			_, err := call(p.ctx, conn)
			if took := time.Since(start); took < 300*time.Millisecond || took > 10*time.Second {
				t.Errorf("RPC ended after %v; want about 300ms", took)
			}
			return outcome{code: status.Code(err)}
		},
	}, {
		// gRPC does not use route.timeout: the application's deadline ends
		// the RPC.
		name: "route timeout 100ms, application deadline 1s",
		setup: func(ready, _ *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().Timeout = durationpb.New(100 * time.Millisecond)
			return tree(vhost(r), nil, clusters("A"), eds("A", ready))
		},
		run: func(conn *grpc.ClientConn, ready, _ *backend) outcome {
			block := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
			ready.handler.Store(&block)
			defer ready.handler.Store(nil)
			ctx, cancel := context.WithTimeout(p.ctx, time.Second)
			defer cancel()
			start := time.Now()
			_, err := call(ctx, conn)
			if took := time.Since(start); took < time.Second {
				t.Errorf("RPC ended after %v; want the application's 1s", took)
			}
			return outcome{code: status.Code(err)}
		},
	}, {
		name: "weighted 80/20",
		setup: func(ready, other *backend) testutils.Resources {
			r := toCluster("A")
			r.GetRoute().ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
				Clusters: []*routev3.WeightedCluster_ClusterWeight{
					{Name: "A", Weight: wrapperspb.UInt32(80)}, {Name: "B", Weight: wrapperspb.UInt32(20)},
				},
			}}
			return tree(vhost(r), nil, clusters("A", "B"), eds("A", ready), eds("B", other))
		},
		run: func(conn *grpc.ClientConn, ready, other *backend) outcome {
			p.waitServedBy(conn, other.name)
			ready.rpcs.Store(0)
			other.rpcs.Store(0)
			const n = 1000
			for range n {
				if _, err := call(p.ctx, conn); err != nil {
					return outcome{code: status.Code(err)}
				}
			}
			return outcome{share: float64(ready.rpcs.Load()) / n}
		},
	}, {
		name: "a cluster_header route is skipped",
		setup: func(ready, other *backend) testutils.Resources {
			skipped := toCluster("B")
			skipped.GetRoute().ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
			return tree(vhost(skipped, toCluster("A")), nil, clusters("A", "B"), eds("A", ready), eds("B", other))
		},
	}, {
		name:  "fault abort 100% ABORTED",
		fault: codes.Aborted,
		setup: func(ready, _ *backend) testutils.Resources {
			return tree(vhost(toCluster("A")), withFault(t, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
				ErrorType:  &faultv3.FaultAbort_GrpcStatus{GrpcStatus: uint32(codes.Aborted)},
				Percentage: &typev3.FractionalPercent{Numerator: 100},
			}}), clusters("A"), eds("A", ready))
		},
	}, {
		name:  "fault abort with status OK",
		fault: codes.Unknown, // a unary RPC sees io.EOF
		setup: func(ready, _ *backend) testutils.Resources {
			return tree(vhost(toCluster("A")), withFault(t, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
				ErrorType:  &faultv3.FaultAbort_GrpcStatus{GrpcStatus: uint32(codes.OK)},
				Percentage: &typev3.FractionalPercent{Numerator: 100},
			}}), clusters("A"), eds("A", ready))
		},
	}, {
		name:  "fault abort HTTP 429",
		fault: codes.Unavailable,
		setup: func(ready, _ *backend) testutils.Resources {
			return tree(vhost(toCluster("A")), withFault(t, &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
				ErrorType:  &faultv3.FaultAbort_HttpStatus{HttpStatus: 429},
				Percentage: &typev3.FractionalPercent{Numerator: 100},
			}}), clusters("A"), eds("A", ready))
		},
	}} {
		// A backend per case and resolver: the first RPC it serves says the
		// case's configuration is in force on that channel.
		got := make(map[string]outcome)
		for _, name := range []string{"goxds", "grpc-go"} {
			conn := p.conns[name]
			ready, other := startBackend(t, fmt.Sprintf("%s-%d", name, i)), startBackend(t, fmt.Sprintf("%s-%d-other", name, i))
			p.update(tc.setup(ready, other))
			p.waitConfig(conn, ready, tc.fault)
			run := tc.run
			if run == nil {
				run = func(conn *grpc.ClientConn, ready, _ *backend) outcome {
					ready.rpcs.Store(0)
					_, err := call(p.ctx, conn)
					return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
				}
			}
			got[name] = run(conn, ready, other)
		}
		g, w := got["goxds"], got["grpc-go"]
		t.Logf("%s: goxds %+v, grpc-go %+v", tc.name, g, w)
		if g.code != w.code || g.attempts != w.attempts || g.share < w.share-0.05 || g.share > w.share+0.05 {
			t.Errorf("%s: goxds %+v, grpc-go %+v; want the same outcome (split within 5%%)", tc.name, g, w)
		}
	}
}

// waitConfig waits until conn's channel has the configuration that names
// backend ready: an RPC reaches it, or for a case whose fault filter
// aborts every RPC, one fails with that code from the filter (the fault
// cases come last, each with a code of its own).
func (p *pair) waitConfig(conn *grpc.ClientConn, ready *backend, fault codes.Code) {
	p.t.Helper()
	for p.ctx.Err() == nil {
		name, err := call(p.ctx, conn)
		if fault == codes.OK && err == nil && name == ready.name {
			return
		}
		if fault != codes.OK && status.Code(err) == fault && (fault == codes.Unknown || strings.Contains(strings.ToLower(err.Error()), "fault")) {
			return
		}
	}
	p.t.Fatalf("configuration for %s never in force", ready.name)
}

// failing makes ready fail its next n RPCs with code, makes one RPC, and
// reports its status and the attempts ready saw.
func failing(ctx context.Context, conn *grpc.ClientConn, ready *backend, n int64, code codes.Code) outcome {
	var seen atomic.Int64
	h := func(context.Context) error {
		if seen.Add(1) > n {
			return nil
		}
		return status.Error(code, "failing as told")
	}
	ready.handler.Store(&h)
	defer ready.handler.Store(nil)
	ready.rpcs.Store(0)
	_, err := call(ctx, conn)
	return outcome{code: status.Code(err), attempts: ready.rpcs.Load()}
}

// An RPC to a listener that does not exist fails with UNAVAILABLE through
// both, once the does-not-exist timer (15s in both) has fired, and both
// errors name the node ID.
func TestParityMissingListener(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	p.update(testutils.Resources{})
	errs := make(map[string]chan error)
	for name, conn := range p.conns {
		ch := make(chan error, 1)
		errs[name] = ch
		go func() {
			_, err := call(p.ctx, conn)
			ch <- err
		}()
	}
	for name, ch := range errs {
		if err := <-ch; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: RPC to a missing listener: %v; want UNAVAILABLE naming node ID %q", name, err, name)
		}
	}
}

// With grpc-go's resolver linked in, the scheme "xds" is its: Register
// refuses it, and says why.
func TestRegisterXDSTaken(t *testing.T) {
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = grpcxds.Register(grpcxds.Options{Scheme: "xds", Bootstrap: cfg})
	if err == nil || !strings.Contains(err.Error(), "grpc-go's own xDS resolver") {
		t.Errorf("Register(xds) with grpc-go's resolver linked: %v; want an error saying the scheme is taken", err)
	}
}
