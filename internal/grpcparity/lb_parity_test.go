package grpcparity

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// The load balancing parity tests give goxds's channel and grpc-go's own
// xds:/// channel (its pick_first and weighted_round_robin balancers) the
// same resources and backends, and compare what each does: which backends
// they connect to, in which order, and where the RPCs go.

const lbParityTimeout = time.Minute

// lbChannels are the two channels under test, by name.
var lbChannels = []string{"goxds", "grpc-go"}

// lbChannel starts a management server serving a listener that routes
// every RPC to cluster "c" (with policy) over the endpoints at ports, in
// that order, and returns channel kind's ClientConn to it; all end with
// the test.
func lbChannel(t *testing.T, kind string, policy proto.Message, ports []uint32) *grpc.ClientConn {
	t.Helper()
	cluster := testutils.Cluster("c", "")
	cluster.LoadBalancingPolicy = lbPolicies(policy)
	res := testutils.Resources{
		Listeners: []*listenerv3.Listener{testutils.Listener(listenerName, routeName)},
		Routes:    []*routev3.RouteConfiguration{testutils.RouteConfig(routeName, "*", "c")},
		Clusters:  []*clusterv3.Cluster{cluster},
		Endpoints: []*endpointv3.ClusterLoadAssignment{testutils.ClusterLoadAssignment("c", "127.0.0.1", ports...)},
	}
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{Initial: map[string]testutils.Resources{"parity": res}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Stop)
	bootJSON := testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: ms.Address(), NodeID: "parity"})
	var target string
	var opts []grpc.DialOption
	switch kind {
	case "goxds":
		boot, err := bootstrap.Parse(bootJSON)
		if err != nil {
			t.Fatal(err)
		}
		b, err := grpcxds.NewBuilder(grpcxds.Options{Bootstrap: boot})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		target, opts = "goxds:///"+listenerName, b.DialOptions()
	default:
		r, err := xds.NewXDSResolverWithConfigForTesting(bootJSON)
		if err != nil {
			t.Fatal(err)
		}
		target, opts = "xds:///"+listenerName, []grpc.DialOption{grpc.WithResolvers(r)}
	}
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// echoVia makes one wait-for-ready echo RPC on conn and returns the port
// of the backend that served it.
func echoVia(ctx context.Context, conn *grpc.ClientConn) (uint32, error) {
	var p peer.Peer
	if err := conn.Invoke(ctx, perRPCMethod, wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.WaitForReady(true), grpc.Peer(&p)); err != nil {
		return 0, err
	}
	return uint32(p.Addr.(*net.TCPAddr).Port), nil
}

// acceptLog records, in order, the backends that accepted a connection.
type acceptLog struct {
	mu    sync.Mutex
	names []string
}

func (l *acceptLog) add(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, name)
}

// order returns the backends in the order of their first connection.
func (l *acceptLog) order() []string { return l.orderSince(0) }

// orderSince returns the backends in the order of their first connection
// from the n-th connection logged on.
func (l *acceptLog) orderSince(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, name := range l.names[n:] {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// len is how many connections were logged.
func (l *acceptLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names)
}

// loggingListener logs each connection it accepts under name.
type loggingListener struct {
	net.Listener
	name string
	log  *acceptLog
}

func (l loggingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.log.add(l.name)
	}
	return c, err
}

// startLBBackend starts a backend of kind on 127.0.0.1, logging its
// connections under name, and returns its port; it stops with the test,
// or earlier for an "echo" backend passed to stopLBBackend.
// "echo" serves the echo service; "reset" closes each connection at once
// (a backend that refuses); "silent" holds each connection without a word
// (one whose handshake never ends).
func startLBBackend(t *testing.T, kind, name string, log *acceptLog, opts ...grpc.ServerOption) uint32 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := loggingListener{lis, name, log}
	var wg sync.WaitGroup
	switch kind {
	case "echo":
		srv := grpc.NewServer(opts...)
		srv.RegisterService(&echoDesc, echo{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.Serve(ll)
		}()
		stop := sync.OnceFunc(func() {
			srv.Stop()
			wg.Wait()
		})
		lbBackendStops.Store(uint32(lis.Addr().(*net.TCPAddr).Port), stop)
		t.Cleanup(stop)
	default:
		var mu sync.Mutex
		var held []net.Conn
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ll.Accept()
				if err != nil {
					return
				}
				if kind == "reset" {
					c.Close()
					continue
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			lis.Close()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				c.Close()
			}
		})
	}
	return uint32(lis.Addr().(*net.TCPAddr).Port)
}

// lbBackendStops are the stops of the echo backends startLBBackend
// started, by port.
var lbBackendStops sync.Map

// stopLBBackend stops the echo backend at port: its connections are
// closed, and new ones refused.
func stopLBBackend(port uint32) {
	if stop, ok := lbBackendStops.LoadAndDelete(port); ok {
		stop.(func())()
	}
}

// pick_first over endpoints whose first fails at once (its connections
// are closed), or never finishes its handshake: goxds and grpc-go each
// try the first, then the second (at once, or after the 250 ms Happy
// Eyeballs turn), which serves; neither connects to a third (gRFC A62:
// one at a time, in order). Then the chosen backend lost (pickFirstLoss).
func TestPickFirstParity(t *testing.T) {
	for _, first := range []string{"reset", "silent"} {
		t.Run("first "+first, func(t *testing.T) {
			t.Parallel()
			got := make(map[string]string)
			for _, ch := range lbChannels {
				log := new(acceptLog)
				ports := []uint32{startLBBackend(t, first, "b0", log), startLBBackend(t, "echo", "b1", log)}
				if first == "reset" {
					// A third backend, which neither connects: b1 is
					// tried at once on b0's failure, and its handshake
					// ends well within its 250 ms turn.
					ports = append(ports, startLBBackend(t, "echo", "b2", log))
				}
				conn := lbChannel(t, ch, pickFirstPolicy, ports)
				ctx, cancel := context.WithTimeout(context.Background(), lbParityTimeout)
				defer cancel()
				port, err := echoVia(ctx, conn)
				if err != nil {
					t.Fatalf("%s: %v", ch, err)
				}
				served := fmt.Sprintf("b%d", slices.Index(ports, port))
				got[ch] = fmt.Sprintf("connected %s, served by %s", strings.Join(log.order(), ", "), served)
				conn.Close()
			}
			t.Logf("goxds: %s; grpc-go: %s", got["goxds"], got["grpc-go"])
			if want := "connected b0, b1, served by b1"; got["grpc-go"] != want {
				t.Errorf("grpc-go: %s; the test expects %s", got["grpc-go"], want)
			}
			if got["goxds"] != got["grpc-go"] {
				t.Errorf("goxds: %s; grpc-go: %s", got["goxds"], got["grpc-go"])
			}
		})
	}
	t.Run("chosen lost, then an RPC", func(t *testing.T) { pickFirstLoss(t, false) })
	t.Run("chosen lost, then Connect", func(t *testing.T) { pickFirstLoss(t, true) })
}

// pickFirstLoss is TestPickFirstParity's case of pick_first losing the
// backend it chose (gRFC A62): over b0, whose
// connections are closed at once, b1 and b2, both channels connect b0
// then b1, which serves; b1 stops. Then each channel goes from READY to
// IDLE and connects nothing (grpc-go's pick_first goes IDLE; goxds's
// cluster is idle), until an RPC: that RPC waits while a new pass starts
// from the first backend, b0 (refused at once), then b1 (gone), then b2,
// which serves it. With byConnect, ClientConn.Connect starts that pass
// instead (grpc-go's balancers' ExitIdle), and the channel is READY
// before the RPC.
func pickFirstLoss(t *testing.T, byConnect bool) {
	t.Parallel()
	got := make(map[string]string)
	for _, ch := range lbChannels {
		func() {
			log := new(acceptLog)
			ports := []uint32{startLBBackend(t, "reset", "b0", log), startLBBackend(t, "echo", "b1", log), startLBBackend(t, "echo", "b2", log)}
			conn := lbChannel(t, ch, pickFirstPolicy, ports)
			ctx, cancel := context.WithTimeout(context.Background(), lbParityTimeout)
			defer cancel()
			served := func() string {
				t.Helper()
				port, err := echoVia(ctx, conn)
				if err != nil {
					t.Fatalf("%s: %v", ch, err)
				}
				return fmt.Sprintf("b%d", slices.Index(ports, port))
			}
			by := served()
			first := fmt.Sprintf("connected %s, served by %s", strings.Join(log.order(), ", "), by)
			// grpc-go publishes a picker before the state: the RPC may
			// be served before the channel says READY.
			waitState(ctx, t, ch, conn, connectivity.Ready, "after an RPC served")
			stopLBBackend(ports[1])
			if !conn.WaitForStateChange(ctx, connectivity.Ready) {
				t.Fatalf("%s: still READY at the deadline after b1 stopped", ch)
			}
			after := conn.GetState()
			n := log.len()
			// Nothing is connected without an RPC: a connection started
			// would take the channel out of IDLE within this window.
			// (A check of an absence: it cannot fail on a slow machine,
			// only miss a late connection.)
			wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			changed := after == connectivity.Idle && conn.WaitForStateChange(wctx, connectivity.Idle)
			wcancel()
			idleFor := "stayed IDLE"
			if changed || after != connectivity.Idle {
				idleFor = "went " + conn.GetState().String()
			}
			if log.len() != n {
				idleFor += " and connected " + strings.Join(log.orderSince(n), ", ")
			}
			wake := "an RPC"
			if byConnect {
				wake = "Connect"
				conn.Connect()
				waitState(ctx, t, ch, conn, connectivity.Ready, "after Connect")
			}
			again := served()
			got[ch] = fmt.Sprintf("%s; b1 stopped: READY -> %v, %s; %s: connected %s, served by %s",
				first, after, idleFor, wake, strings.Join(log.orderSince(n), ", "), again)
			conn.Close()
		}()
	}
	t.Logf("goxds: %s\ngrpc-go: %s", got["goxds"], got["grpc-go"])
	wake := map[bool]string{false: "an RPC", true: "Connect"}[byConnect]
	if want := "connected b0, b1, served by b1; b1 stopped: READY -> IDLE, stayed IDLE; " + wake + ": connected b0, b2, served by b2"; got["grpc-go"] != want {
		t.Errorf("grpc-go: %s; the test expects %s", got["grpc-go"], want)
	}
	if got["goxds"] != got["grpc-go"] {
		t.Errorf("goxds: %s\ngrpc-go: %s", got["goxds"], got["grpc-go"])
	}
}

// waitState waits until channel ch's conn is in state want, and fails
// the test if it is not at ctx's deadline (when names the moment).
func waitState(ctx context.Context, t *testing.T, ch string, conn *grpc.ClientConn, want connectivity.State, when string) {
	t.Helper()
	for s := conn.GetState(); s != want; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("%s: %v at the deadline %s, want %v", ch, s, when, want)
		}
	}
}

var pickFirstPolicy = &pickfirstv3.PickFirst{}

// wrrPolicy is client_side_weighted_round_robin with reports per RPC or
// out of band, weights in use at once (a blackout of 1 ms: grpc-go reads
// an explicit 0 as unset, its 10 s default) and updated every 100 ms.
func wrrPolicy(oob bool) proto.Message {
	return &cswrrv3.ClientSideWeightedRoundRobin{
		EnableOobLoadReport: wrapperspb.Bool(oob),
		OobReportingPeriod:  durationpb.New(time.Second),
		BlackoutPeriod:      durationpb.New(time.Millisecond),
		WeightUpdatePeriod:  durationpb.New(100 * time.Millisecond),
	}
}

// wrrUtilizations are the backends' application utilizations, at the same
// QPS: weights 1/u, 4:2:1, shares 4/7, 2/7 and 1/7.
var wrrUtilizations = []float64{0.2, 0.4, 0.8}

// shares sends n RPCs on conn, eight at a time, and returns each
// backend's share, by the index of its port in ports.
func shares(ctx context.Context, conn *grpc.ClientConn, ports []uint32, n int) ([]float64, error) {
	const workers = 8
	counts := make([][]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		counts[w] = make([]int, len(ports))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				port, err := echoVia(ctx, conn)
				if err != nil {
					errs[w] = err
					return
				}
				counts[w][slices.Index(ports, port)]++
			}
		}()
	}
	wg.Wait()
	out := make([]float64, len(ports))
	for _, c := range counts {
		for i, k := range c {
			out[i] += float64(k) / float64(n)
		}
	}
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// near reports whether every share of got is within tol of want's.
func near(got, want []float64, tol float64) bool {
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol {
			return false
		}
	}
	return true
}

// weighted_round_robin over three backends reporting ORCA loads (the
// same QPS, application utilizations 0.2, 0.4 and 0.8), per RPC and out
// of band: goxds's channel sends each backend the share grpc-go's does,
// 4:2:1 by the weights QPS/utilization (gRFC A58). Each channel's share
// is measured once its weights are in use: once a batch of RPCs comes
// within 5% of those shares, or the test fails at its deadline.
func TestWeightedRoundRobinParity(t *testing.T) {
	want := []float64{4.0 / 7, 2.0 / 7, 1.0 / 7}
	for _, oob := range []bool{false, true} {
		t.Run(map[bool]string{false: "per RPC", true: "out of band"}[oob], func(t *testing.T) {
			t.Parallel()
			var ports []uint32
			log := new(acceptLog)
			for i, u := range wrrUtilizations {
				smr := orca.NewServerMetricsRecorder()
				smr.SetApplicationUtilization(u)
				smr.SetQPS(100)
				opts := []grpc.ServerOption{orca.CallMetricsServerOption(smr)}
				if oob {
					opts = nil
				}
				ports = append(ports, startORCABackend(t, fmt.Sprintf("b%d", i), log, smr, oob, opts...))
			}
			got := make(map[string][]float64)
			for _, ch := range lbChannels {
				conn := lbChannel(t, ch, wrrPolicy(oob), ports)
				ctx, cancel := context.WithTimeout(context.Background(), lbParityTimeout)
				defer cancel()
				// Once the weights are in use (a batch near the shares
				// they give), a measure with a deadline of its own.
				var last []float64
				for {
					s, err := shares(ctx, conn, ports, 140)
					if err != nil {
						t.Fatalf("%s: the shares never came near %.3f: last %.3f (%v)", ch, want, last, err)
					}
					if near(s, want, 0.05) {
						break
					}
					last = s
				}
				ctx, cancel = context.WithTimeout(context.Background(), lbParityTimeout)
				defer cancel()
				s, err := shares(ctx, conn, ports, 1400)
				if err != nil {
					t.Fatalf("%s: %v", ch, err)
				}
				got[ch] = s
				conn.Close()
			}
			t.Logf("shares of 1400 RPCs: goxds %.3f, grpc-go %.3f; by the weights %.3f", got["goxds"], got["grpc-go"], want)
			if !near(got["goxds"], got["grpc-go"], 0.02) {
				t.Errorf("goxds's shares %.3f, grpc-go's %.3f: more than 2%% apart", got["goxds"], got["grpc-go"])
			}
		})
	}
}

// startORCABackend is an echo backend that reports the loads of smr: per
// RPC through the server options given, or out of band (oob) through
// grpc-go's ORCA service.
func startORCABackend(t *testing.T, name string, log *acceptLog, smr orca.ServerMetricsRecorder, oob bool, opts ...grpc.ServerOption) uint32 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&orcaEchoDesc, orcaEcho{})
	if oob {
		if err := orca.Register(srv, orca.ServiceOptions{ServerMetricsProvider: smr}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(loggingListener{lis, name, log})
	}()
	t.Cleanup(func() {
		srv.Stop()
		wg.Wait()
	})
	return uint32(lis.Addr().(*net.TCPAddr).Port)
}

// orcaEcho is echo, reporting per RPC the server's loads: grpc-go's ORCA
// interceptor sends them only for an RPC whose handler asked for its
// recorder.
type orcaEcho struct{}

func (orcaEcho) Echo(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	orca.CallMetricsRecorderFromContext(ctx)
	return in, nil
}

// orcaEchoDesc is echoDesc through the server's interceptors (the ORCA
// one), which echoDesc, for the benchmark, skips.
var orcaEchoDesc = grpc.ServiceDesc{
	ServiceName: echoDesc.ServiceName,
	HandlerType: echoDesc.HandlerType,
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			call := func(ctx context.Context, req any) (any, error) {
				return srv.(echoServer).Echo(ctx, req.(*wrapperspb.StringValue))
			}
			if intercept == nil {
				return call(ctx, in)
			}
			return intercept(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: perRPCMethod}, call)
		},
	}},
}
