package parity_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
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
	srv     *grpc.Server // a test may stop it early; its cleanup stops it again
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
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler:       func(srv any, stream grpc.ServerStream) error { return srv.(*backend).chat(stream) },
	}},
}

// chat counts the messages the client sends and answers with the count.
func (b *backend) chat(stream grpc.ServerStream) error {
	b.rpcs.Add(1)
	if h := b.handler.Load(); h != nil {
		if err := (*h)(stream.Context()); err != nil {
			return err
		}
	}
	n := 0
	for stream.RecvMsg(new(wrapperspb.StringValue)) == nil {
		n++
	}
	return stream.SendMsg(wrapperspb.String(fmt.Sprint(n)))
}

// chat sends n messages on a Chat stream and returns the answer.
func chat(ctx context.Context, conn *grpc.ClientConn, n int) (string, error) {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/goxds.test.Greeter/Chat")
	if err != nil {
		return "", err
	}
	for range n {
		if err := s.SendMsg(wrapperspb.String("hi")); err != nil {
			break // RecvMsg says why
		}
	}
	if err := s.CloseSend(); err != nil {
		return "", err
	}
	out := new(wrapperspb.StringValue)
	err = s.RecvMsg(out)
	return out.GetValue(), err
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
	srv := grpc.NewServer()
	b := &backend{name: name, port: uint32(lis.Addr().(*net.TCPAddr).Port), srv: srv}
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
	return newPairOpts(t, msOpts, grpcxds.Options{})
}

// newPairOpts is newPairWith with goxds's Builder given opts (its
// Bootstrap and loggers set here) and grpc-go's channel given grpcGo.
func newPairOpts(t *testing.T, msOpts testutils.ManagementServerOptions, opts grpcxds.Options, grpcGo ...grpc.DialOption) *pair {
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
	opts.Bootstrap, opts.Logger, opts.ClientOptions.Logger = cfg, quietLogger, quietLogger
	b, err := grpcxds.NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p.dial("goxds", grpcxds.DefaultScheme, b.DialOptions()...)

	rb, err := xds.NewXDSResolverWithConfigForTesting(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(), NodeID: "grpc-go", ServerFeatures: []string{"xds_v3"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	p.dial("grpc-go", "xds", append(grpcGo, grpc.WithResolvers(rb))...)
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

// isolate gives the clusters and the route configuration of res names of
// their own, ending in suffix, so that a backend serving an RPC says that
// the whole tree of res is in force: its listener (which names the route
// configuration), routes, clusters and endpoints, not a mix with the
// resources of the previous case.
func isolate(t *testing.T, res testutils.Resources, suffix string) testutils.Resources {
	t.Helper()
	for _, c := range res.Clusters {
		c.Name += suffix
	}
	for _, e := range res.Endpoints {
		e.ClusterName += suffix
	}
	for _, rc := range res.Routes {
		rc.Name += suffix
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				a := r.GetRoute()
				if c := a.GetCluster(); c != "" {
					a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: c + suffix}
				}
				for _, wc := range a.GetWeightedClusters().GetClusters() {
					wc.Name += suffix
				}
			}
		}
	}
	for _, l := range res.Listeners {
		hcm := new(hcmv3.HttpConnectionManager)
		if err := l.ApiListener.ApiListener.UnmarshalTo(hcm); err != nil {
			t.Fatal(err)
		}
		hcm.GetRds().RouteConfigName += suffix
		l.ApiListener.ApiListener = testutils.MarshalAny(hcm)
	}
	return res
}
