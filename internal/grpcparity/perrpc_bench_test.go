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
// are the process's as well (runtime.MemStats). BenchmarkPerRPCTable prints
// them side by side, with their ratios to the plain channel.

const (
	// perRPCDeadline is the route's max_stream_duration.
	perRPCDeadline = 30 * time.Second
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
	action.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(perRPCDeadline)}
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

// add adds the totals of r to those of t.
func (t *perRPCResult) add(r perRPCResult) {
	t.wall += r.wall
	t.cpu += r.cpu
	t.allocs += r.allocs
	t.bytes += r.bytes
}

// per divides totals over n RPCs.
func (t perRPCResult) per(n int) perRPCResult {
	return perRPCResult{wall: t.wall / time.Duration(n), cpu: t.cpu / time.Duration(n), allocs: t.allocs / float64(n), bytes: t.bytes / float64(n)}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perRPCChannel is one row of the table: a channel, and the deadline the
// application gives its RPCs (0: none).
type perRPCChannel struct {
	name     string
	conn     *grpc.ClientConn
	deadline time.Duration
}

// call makes one RPC on ch.
func (ch perRPCChannel) call() error {
	ctx := context.Background()
	out := new(wrapperspb.StringValue)
	if ch.deadline > 0 {
		ctx, cancel := context.WithTimeout(ctx, ch.deadline)
		defer cancel()
		return ch.conn.Invoke(ctx, perRPCMethod, wrapperspb.String("hi"), out)
	}
	return ch.conn.Invoke(ctx, perRPCMethod, wrapperspb.String("hi"), out)
}

// run makes n RPCs on ch, conc at a time, and returns the process's wall
// time, CPU, allocations and bytes over them (totals).
func (ch perRPCChannel) run(n, conc int) (perRPCResult, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, wall0 := cpuTime(), time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := ch.call(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	if err := failed.Load(); err != nil {
		return perRPCResult{}, fmt.Errorf("%s: %v", ch.name, *err)
	}
	return perRPCResult{wall: wall, cpu: cpu, allocs: float64(after.Mallocs - before.Mallocs), bytes: float64(after.TotalAlloc - before.TotalAlloc)}, nil
}

// perRPCChannels starts the backends and the management server and makes
// the channels of the table, each having made one RPC (connected, its
// configuration in force). The benchmark closes them all.
func perRPCChannels(b *testing.B) []perRPCChannel {
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
	b.Cleanup(builder.Close) // its client would linger past the benchmark
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
	dial := func(target string, opts ...grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient(target, append(opts, creds)...)
		if err != nil {
			b.Fatalf("%s: %v", target, err)
		}
		b.Cleanup(func() { conn.Close() })
		return conn
	}
	plain := dial("plain:///backends", grpc.WithResolvers(plainResolver),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	goxds := dial("goxds:///"+perRPCListener, builder.DialOptions()...)
	chans := []perRPCChannel{
		{name: "plain", conn: plain},
		{name: "goxds", conn: goxds},
		// goxds's channel without its interceptors: the resolver and
		// balancer alone, none of the per-RPC policy; the difference to
		// goxds is what the interceptors cost.
		{name: "goxds-nointerceptors", conn: dial("goxds:///"+perRPCListener, grpc.WithResolvers(builder))},
		{name: "grpcgo-xds", conn: dial("xds:///"+perRPCListener, grpc.WithResolvers(grpcGoXDS))},
		// The route's max_stream_duration gives each RPC of the xDS
		// channels a deadline, which costs allocations and timers at the
		// client and at the server whoever sets it: the plain channel with
		// the same deadline set by the application is the baseline of
		// what the xDS channels add beside it.
		{name: "plain+deadline", conn: plain, deadline: perRPCDeadline},
		// An application deadline earlier than the route's: the one the
		// RPC has.
		{name: "goxds+appdeadline", conn: goxds, deadline: perRPCDeadline / 3},
	}
	for _, ch := range chans {
		if err := ch.call(); err != nil {
			b.Fatalf("%s: %v", ch.name, err)
		}
	}
	return chans
}

// BenchmarkPerRPCSideBySide measures each channel of the table on its own,
// one sub-benchmark each, for benchstat (cpu-ns/op, proc-allocs/op,
// proc-B/op are the process's; ns/op is wall):
//
//	go test -run '^$' -bench PerRPCSideBySide -benchtime 20000x -count 6 ./internal/grpcparity
func BenchmarkPerRPCSideBySide(b *testing.B) {
	chans := perRPCChannels(b)
	for _, conc := range []int{1, 32} {
		for _, ch := range chans {
			b.Run(fmt.Sprintf("c%d/%s", conc, ch.name), func(b *testing.B) {
				runtime.GC()
				b.ResetTimer()
				r, err := ch.run(b.N, conc)
				if err != nil {
					b.Fatal(err)
				}
				r = r.per(b.N)
				b.ReportMetric(float64(r.cpu.Nanoseconds()), "cpu-ns/op")
				b.ReportMetric(r.allocs, "proc-allocs/op")
				b.ReportMetric(r.bytes, "proc-B/op")
			})
		}
	}
}

// perRPCChunk is how many RPCs BenchmarkPerRPCTable makes on one channel
// before it moves on to the next.
const perRPCChunk = 500

// BenchmarkPerRPCTable makes b.N RPCs on each channel of the table, one at
// a time and 32 at a time, in turns of perRPCChunk RPCs per channel, so
// that a machine's changing load falls on every channel alike, and logs
// the table with the ratios to the plain channel (-v shows it):
//
//	go test -run '^$' -bench PerRPCTable -benchtime 20000x -v ./internal/grpcparity
func BenchmarkPerRPCTable(b *testing.B) {
	if b.N < perRPCChunk {
		return // the probe run of -benchtime Nx: no table to show
	}
	chans := perRPCChannels(b)
	var t strings.Builder
	fmt.Fprintf(&t, "\n%d RPCs per row, in turns of %d\n%-26s %12s %12s %10s %10s %8s %8s %8s\n", b.N, perRPCChunk,
		"per RPC", "wall", "CPU", "allocs", "bytes", "CPU×", "allocs×", "bytes×")
	for _, conc := range []int{1, 32} {
		totals := make([]perRPCResult, len(chans))
		runtime.GC()
		for done := 0; done < b.N; done += perRPCChunk {
			n := min(perRPCChunk, b.N-done)
			for i, ch := range chans {
				r, err := ch.run(n, conc)
				if err != nil {
					b.Fatal(err)
				}
				totals[i].add(r)
			}
		}
		p := totals[0].per(b.N)
		for i, ch := range chans {
			r := totals[i].per(b.N)
			fmt.Fprintf(&t, "%-26s %12v %12v %10.1f %10.0f %8.2f %8.2f %8.2f\n", fmt.Sprintf("c%d %s", conc, ch.name),
				r.wall, r.cpu, r.allocs, r.bytes, float64(r.cpu)/float64(p.cpu), r.allocs/p.allocs, r.bytes/p.bytes)
		}
	}
	b.Log(t.String())
}
