package grpcparity

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// The cost of one RPC through goxds's channel, through grpc-go's own xDS
// channel and through a plain grpc-go channel, side by side in one process
// against the same three backends on 127.0.0.1 (issue 24, "Cost per RPC").
// The route has a retry policy, a max_stream_duration and the fault filter
// (a header-controlled abort the RPCs never ask for): everything a route
// makes the xDS channels do on each RPC, with nothing that changes the
// outcome. The plain channel is round_robin over the same backends.
//
// CPU is the process's (getrusage: user+system), so it counts the backends'
// share too, the same for the three; ns/op is wall time. allocs and bytes
// are the process's as well (runtime.MemStats). The parent benchmark prints
// the three side by side, with their ratios to the plain channel.

const (
	perRPCMethod   = "/goxds.bench.Echo/Echo"
	perRPCListener = "bench"
	perRPCNode     = "bench-node"
)

// echoServer answers every RPC with its request.
type echoServer interface {
	Echo(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

type echo struct{}

func (echo) Echo(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return in, nil
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "goxds.bench.Echo",
	HandlerType: (*echoServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return srv.(echoServer).Echo(ctx, in)
		},
	}},
}

// startEchoBackends starts n echo servers on 127.0.0.1; the benchmark
// stops them.
func startEchoBackends(b *testing.B, n int) []uint32 {
	b.Helper()
	var ports []uint32
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := grpc.NewServer()
		srv.RegisterService(&echoDesc, echo{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.Serve(lis)
		}()
		b.Cleanup(func() {
			srv.Stop()
			wg.Wait()
		})
		ports = append(ports, uint32(lis.Addr().(*net.TCPAddr).Port))
	}
	return ports
}

// perRPCResources is the listener, route, cluster and endpoints both xDS
// channels get: one route to cluster "c" (round_robin over ports) with a
// retry policy and a max_stream_duration, and the fault filter before the
// router.
func perRPCResources(ports []uint32) testutils.Resources {
	rc := testutils.RouteConfig(routeName, "*", "c")
	action := rc.VirtualHosts[0].Routes[0].GetRoute()
	action.RetryPolicy = &routev3.RetryPolicy{RetryOn: "unavailable", NumRetries: wrapperspb.UInt32(2)}
	action.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(30 * time.Second)}
	l := testutils.Listener(perRPCListener, routeName)
	hcm := new(hcmv3.HttpConnectionManager)
	if err := l.ApiListener.ApiListener.UnmarshalTo(hcm); err != nil {
		panic(err)
	}
	neverFires := toAny(&faultv3.HTTPFault{Abort: &faultv3.FaultAbort{
		ErrorType:  &faultv3.FaultAbort_HeaderAbort_{HeaderAbort: &faultv3.FaultAbort_HeaderAbort{}},
		Percentage: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
	}})
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{filter("fault", neverFires, false)}, hcm.HttpFilters...)
	l.ApiListener.ApiListener = toAny(hcm)
	return testutils.Resources{
		Listeners: []*listenerv3.Listener{l},
		Routes:    []*routev3.RouteConfiguration{rc},
		Clusters:  []*clusterv3.Cluster{testutils.Cluster("c", "")},
		Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment("c", "127.0.0.1", ports...)},
	}
}

// perRPCResult is one channel's figures, per RPC.
type perRPCResult struct {
	wall, cpu     time.Duration
	allocs, bytes float64
}

// perRPCResults holds the last figures of each sub-benchmark, by name, for
// the parent's table.
var perRPCResults sync.Map

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runRPCs makes b.N unary RPCs on conn, conc at a time, and reports the
// process's CPU, allocations and bytes per RPC.
func runRPCs(b *testing.B, conn *grpc.ClientConn, conc int) {
	ctx := context.Background()
	call := func() error {
		out := new(wrapperspb.StringValue)
		return conn.Invoke(ctx, perRPCMethod, wrapperspb.String("hi"), out)
	}
	if err := call(); err != nil { // connected, and the configuration in force
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := call(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&after)
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	n := float64(b.N)
	r := perRPCResult{
		wall:   b.Elapsed() / time.Duration(b.N),
		cpu:    time.Duration(float64(cpu) / n),
		allocs: float64(after.Mallocs-before.Mallocs) / n,
		bytes:  float64(after.TotalAlloc-before.TotalAlloc) / n,
	}
	b.ReportMetric(float64(r.cpu.Nanoseconds()), "cpu-ns/op")
	b.ReportMetric(r.allocs, "proc-allocs/op")
	b.ReportMetric(r.bytes, "proc-B/op")
	perRPCResults.Store(b.Name(), r)
}

// BenchmarkPerRPCSideBySide: see the top of this file. The table is
// logged, which the test binary shows with -v; -count repeats the three
// interleaved, which a busy machine needs for steady CPU figures:
//
//	go test -run '^$' -bench PerRPCSideBySide -benchtime 20000x -count 6 -v ./internal/grpcparity
func BenchmarkPerRPCSideBySide(b *testing.B) {
	ports := startEchoBackends(b, 3)
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		Initial: map[string]testutils.Resources{perRPCNode: perRPCResources(ports)},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ms.Stop)
	bootJSON := testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: perRPCNode})
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())

	boot, err := bootstrap.Parse(bootJSON)
	if err != nil {
		b.Fatal(err)
	}
	builder, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: boot,
		// goxds-nointerceptors warns that it has none.
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	grpcGoXDS, err := xds.NewXDSResolverWithConfigForTesting(bootJSON)
	if err != nil {
		b.Fatal(err)
	}
	plainResolver := manual.NewBuilderWithScheme("plain")
	var addrs []resolver.Address
	for _, p := range ports {
		addrs = append(addrs, resolver.Address{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	plainResolver.InitialState(resolver.State{Addresses: addrs})

	channels := []struct {
		name string
		dial func() (*grpc.ClientConn, error)
	}{
		{"plain", func() (*grpc.ClientConn, error) {
			return grpc.NewClient("plain:///backends", creds, grpc.WithResolvers(plainResolver),
				grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
		}},
		{"goxds", func() (*grpc.ClientConn, error) {
			return grpcxds.NewClient("goxds:///"+perRPCListener, builder, creds)
		}},
		// goxds's channel without its interceptors: the resolver and
		// balancer alone, none of the per-RPC policy; the difference to
		// goxds is what the interceptors cost.
		{"goxds-nointerceptors", func() (*grpc.ClientConn, error) {
			return grpc.NewClient("goxds:///"+perRPCListener, creds, grpc.WithResolvers(builder))
		}},
		{"grpcgo-xds", func() (*grpc.ClientConn, error) {
			return grpc.NewClient("xds:///"+perRPCListener, creds, grpc.WithResolvers(grpcGoXDS))
		}},
	}
	var conns []*grpc.ClientConn
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for _, ch := range channels {
		conn, err := ch.dial()
		if err != nil {
			b.Fatalf("%s: %v", ch.name, err)
		}
		conns = append(conns, conn)
	}
	for _, conc := range []int{1, 32} {
		for i, ch := range channels {
			b.Run(fmt.Sprintf("c%d/%s", conc, ch.name), func(b *testing.B) { runRPCs(b, conns[i], conc) })
		}
	}
	var t strings.Builder
	fmt.Fprintf(&t, "\n%-26s %12s %12s %12s %10s %8s %8s %8s\n", "per RPC", "wall", "CPU", "allocs", "bytes", "CPU×", "allocs×", "bytes×")
	for _, conc := range []int{1, 32} {
		plain, ok := perRPCResults.Load(fmt.Sprintf("%s/c%d/plain", b.Name(), conc))
		if !ok {
			continue // filtered out by -bench
		}
		p := plain.(perRPCResult)
		for _, ch := range channels {
			v, ok := perRPCResults.Load(fmt.Sprintf("%s/c%d/%s", b.Name(), conc, ch.name))
			if !ok {
				continue
			}
			r := v.(perRPCResult)
			fmt.Fprintf(&t, "%-26s %12v %12v %12.1f %10.0f %8.2f %8.2f %8.2f\n", fmt.Sprintf("c%d %s", conc, ch.name),
				r.wall, r.cpu, r.allocs, r.bytes, float64(r.cpu)/float64(p.cpu), r.allocs/p.allocs, r.bytes/p.bytes)
		}
	}
	b.Log(t.String())
}
