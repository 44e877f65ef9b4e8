package grpcxds_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// gRFC A105 end to end: a backend whose gRPC server allows one stream per
// connection (MAX_CONCURRENT_STREAMS 1), behind a cluster whose per-host
// circuit breaker allows each endpoint some connections.

// streamsBackend is a backend serving with grpc.MaxConcurrentStreams(mcs):
// it counts the connections it accepted and those that closed, and holds
// each RPC until the test releases it.
type streamsBackend struct {
	*backend
	closed  atomic.Int64 // connections closed (by either side)
	arrived chan struct{}
	release chan struct{}
	// gone is told of each RPC that ended with its context (its connection
	// lost, its caller gone) rather than by a release: a test that closes
	// a connection waits for it before releasing the others, lest the
	// handler of the lost RPC, not yet told, take their release.
	gone    chan struct{}
	running atomic.Int64
	most    atomic.Int64 // RPCs running at once, at most
	// hold, when set, is a listener's Accept waiting on it: a connection
	// attempt that does not complete until the test says so.
	hold atomic.Pointer[chan struct{}]
	// holding is told of each connection held.
	holding chan struct{}
	// refuse, when set, has the listener close each connection as it
	// accepts it (a failed connection attempt), and tell refused.
	refuse  atomic.Bool
	refused chan struct{}
	// open are the server side of the connections accepted.
	mu   sync.Mutex
	open []*closeCounting
}

func startStreamsBackend(t testing.TB, name string, mcs uint32, opts ...grpc.ServerOption) *streamsBackend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sb := &streamsBackend{backend: &backend{name: name, addr: lis.Addr().String(), port: uint32(lis.Addr().(*net.TCPAddr).Port)},
		arrived: make(chan struct{}, 16), release: make(chan struct{}, 16), gone: make(chan struct{}, 16), holding: make(chan struct{}, 16),
		refused: make(chan struct{}, 64)}
	h := func(ctx context.Context) error {
		n := sb.running.Add(1)
		defer sb.running.Add(-1)
		for m := sb.most.Load(); n > m && !sb.most.CompareAndSwap(m, n); m = sb.most.Load() {
		}
		sb.arrived <- struct{}{}
		select {
		case <-sb.release:
			return nil
		case <-ctx.Done():
			select {
			case sb.gone <- struct{}{}:
			default: // no test waits for so many
			}
			return ctx.Err()
		}
	}
	sb.handler.Store(&h)
	srv := grpc.NewServer(append(opts, grpc.MaxConcurrentStreams(mcs))...)
	srv.RegisterService(&greeterDesc, sb.backend)
	sb.srv = srv
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		_ = srv.Serve(&streamsListener{Listener: lis, b: sb})
	}()
	t.Cleanup(sb.stop)
	return sb
}

// streamsListener counts a streamsBackend's connections.
type streamsListener struct {
	net.Listener
	b *streamsBackend
}

func (l *streamsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	for err == nil && l.b.refuse.Load() {
		c.Close()
		select {
		case l.b.refused <- struct{}{}:
		default:
		}
		c, err = l.Listener.Accept()
	}
	if err != nil {
		return nil, err
	}
	if h := l.b.hold.Load(); h != nil {
		l.b.holding <- struct{}{}
		<-*h
	}
	l.b.conns.Add(1)
	sc := &closeCounting{Conn: c, n: &l.b.closed}
	l.b.mu.Lock()
	l.b.open = append(l.b.open, sc)
	l.b.mu.Unlock()
	return sc, nil
}

// closeCounting counts its first Close.
type closeCounting struct {
	net.Conn
	n    *atomic.Int64
	once sync.Once
}

func (c *closeCounting) Close() error {
	c.once.Do(func() { c.n.Add(1) })
	return c.Conn.Close()
}

// perHostCluster is the EDS cluster name with per-host max_connections n
// (0: no per-host thresholds).
func perHostCluster(name string, n uint32, set bool) *clusterv3.Cluster {
	c := testutils.Cluster(name, "")
	if set {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{PerHostThresholds: []*clusterv3.CircuitBreakers_Thresholds{
			{Priority: corev3.RoutingPriority_DEFAULT, MaxConnections: wrapperspb.UInt32(n)},
		}}
	}
	return c
}

// startRPCs starts n RPCs on conn; their errors come on the channel.
func startRPCs(ctx context.Context, conn *grpc.ClientConn, n int) <-chan error {
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := call(ctx, conn, grpc.WaitForReady(true))
			errs <- err
		}()
	}
	return errs
}

// waitGone waits for the handler of an RPC whose connection the test
// closed to see it end.
func (sb *streamsBackend) waitGone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-sb.gone:
	case <-ctx.Done():
		t.Fatalf("%s: the backend did not see its RPC end: %v", what, ctx.Err())
	}
}

// waitArrived waits for n RPCs to reach the backend.
func (sb *streamsBackend) waitArrived(t *testing.T, ctx context.Context, n int, what string) {
	t.Helper()
	for i := range n {
		select {
		case <-sb.arrived:
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d RPCs reached the backend (%d connections): %v", what, i, n, sb.conns.Load(), ctx.Err())
		}
	}
}

// finish releases n RPCs and waits for their outcomes.
func finish(t *testing.T, ctx context.Context, sb *streamsBackend, errs <-chan error, n int) {
	t.Helper()
	for range n {
		sb.release <- struct{}{}
	}
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("RPC: %v", err)
			}
		case <-ctx.Done():
			t.Fatalf("RPCs did not end: %v", ctx.Err())
		}
	}
}

// With max_connections 3, three RPCs against a server that allows one
// stream per connection run at once over three connections; unset, the
// endpoint keeps one connection and they run one at a time.
func TestConnectionScaling(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	t.Run("max_connections 3", func(t *testing.T) {
		sb := startStreamsBackend(t, "b", 1)
		open := newOpenConns()
		e := newEnvWith(t, grpcxds.Options{SubchannelMetrics: open})
		e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 3, true)}, eds("c", sb.backend)))
		errs := startRPCs(e.ctx, e.dial(), 3)
		// Each handler holds its RPC until all three have arrived.
		sb.waitArrived(t, e.ctx, 3, "max_connections 3")
		finish(t, e.ctx, sb, errs, 3)
		if n, most := sb.conns.Load(), sb.most.Load(); n != 3 || most != 3 {
			t.Errorf("%d connections, %d RPCs at once; want 3, 3", n, most)
		}
		// gRFC A105: the extra connections count in A94's open_connections.
		open.wait(t, e.ctx, 3)
	})
	t.Run("unset", func(t *testing.T) {
		sb := startStreamsBackend(t, "b", 1)
		e := newEnv(t)
		e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 0, false)}, eds("c", sb.backend)))
		errs := startRPCs(e.ctx, e.dial(), 3)
		for i := range 3 {
			sb.waitArrived(t, e.ctx, 1, "unset")
			if n := sb.conns.Load(); n != 1 {
				t.Fatalf("RPC %d arrived with %d connections open, want 1", i, n)
			}
			sb.release <- struct{}{}
		}
		for range 3 {
			if err := <-errs; err != nil {
				t.Errorf("RPC: %v", err)
			}
		}
		if n, most := sb.conns.Load(), sb.most.Load(); n != 1 || most != 1 {
			t.Errorf("%d connections, %d RPCs at once; want 1, 1", n, most)
		}
	})
}

// Options.MaxConnectionsPerEndpoint caps the cluster's setting: with a cap
// of 2 and max_connections 3, the third RPC waits for a stream of the two
// connections (in gRPC's transport, on the one with the most streams to
// spare, the oldest of equals: scale.go).
func TestConnectionScalingCappedByChannel(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	sb := startStreamsBackend(t, "b", 1)
	e := newEnvWith(t, grpcxds.Options{MaxConnectionsPerEndpoint: 2})
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 3, true)}, eds("c", sb.backend)))
	errs := startRPCs(e.ctx, e.dial(), 3)
	sb.waitArrived(t, e.ctx, 2, "two connections")
	sb.release <- struct{}{}
	sb.release <- struct{}{}
	sb.waitArrived(t, e.ctx, 1, "the third RPC, once the streams are free")
	finish(t, e.ctx, sb, errs, 1)
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("RPC: %v", err)
		}
	}
	if n, most := sb.conns.Load(), sb.most.Load(); n != 2 || most != 2 {
		t.Errorf("%d connections, %d RPCs at once; want 2, 2 (the channel's cap)", n, most)
	}
}

// max_connections 0 NACKs the Cluster, naming the field; so does nothing
// without the environment variable, which leaves the field unread.
func TestConnectionScalingZeroNACKed(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	b := startBackend(t, "b")
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 0, true)}, eds("c", b)))
	_, err := call(e.ctx, e.dial())
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "circuit_breakers.per_host_thresholds[0].max_connections: must be at least 1, got 0") {
		t.Fatalf("RPC: %v, want UNAVAILABLE naming per_host_thresholds[0].max_connections", err)
	}
}

// Lowering the setting closes no connection: the three made stay, and
// carry RPCs.
func TestConnectionScalingLoweredClosesNothing(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	sb := startStreamsBackend(t, "b", 1)
	other := startBackend(t, "other")
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 3, true)}, eds("c", sb.backend)))
	conn := e.dial()
	errs := startRPCs(e.ctx, conn, 3)
	sb.waitArrived(t, e.ctx, 3, "max_connections 3")
	finish(t, e.ctx, sb, errs, 3)

	// max_connections 1, and the cluster's endpoints from another
	// assignment that adds a backend: once it serves, the new Cluster is
	// in force (one resource, applied whole).
	lowered := perHostCluster("c", 1, true)
	lowered.GetEdsClusterConfig().ServiceName = "c2"
	sb.handler.Store(nil)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{lowered}, eds("c2", sb.backend, other)))
	e.waitServed(conn, 1, func(name string) bool { return name == "other" })
	if n, closed := sb.conns.Load(), sb.closed.Load(); n != 3 || closed != 0 {
		t.Errorf("after lowering max_connections to 1: %d connections made, %d closed; want 3, none closed", n, closed)
	}
}

// An RPC queued for a connection being made, when the endpoint's only open
// connection is lost, is not failed with it: it waits for the endpoint
// and runs once a connection is made (the gRFC fails such RPCs
// UNAVAILABLE for a transparent retry, which picks again; here they are
// picked again at once).
func TestConnectionScalingLostWithRPCsQueued(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	sb := startStreamsBackend(t, "b", 1)
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 2, true)}, eds("c", sb.backend)))
	conn := e.dial()
	first := startRPCs(e.ctx, conn, 1)
	sb.waitArrived(t, e.ctx, 1, "the first RPC")
	// The second RPC's connection is accepted by the kernel, but the
	// server does not answer it until hold is closed.
	hold := make(chan struct{})
	sb.hold.Store(&hold)
	second := startRPCs(e.ctx, conn, 1)
	select {
	case <-sb.holding: // the second RPC is queued for this connection
	case <-e.ctx.Done():
		t.Fatal("no second connection was attempted")
	}
	sb.mu.Lock()
	lost := sb.open[0]
	sb.mu.Unlock()
	lost.Close()
	select {
	case err := <-first:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("RPC on the lost connection: %v, want UNAVAILABLE", err)
		}
	case <-e.ctx.Done():
		t.Fatal("the RPC on the lost connection did not end")
	}
	sb.waitGone(t, e.ctx, "the RPC on the lost connection")
	sb.hold.Store(nil)
	close(hold)
	sb.waitArrived(t, e.ctx, 1, "the queued RPC, once a connection is made")
	finish(t, e.ctx, sb, second, 1)
}

// Over TLS run by xdscreds (a cluster with an UpstreamTlsContext), the
// limit is read after the handshake, and the endpoint scales as in
// plaintext; no connection is plaintext.
func TestConnectionScalingTLS(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	m := newMesh(t)
	e := newSecureEnv(t, m)
	cfg := &tls.Config{Certificates: []tls.Certificate{m.server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: m.pki.Roots, MinVersion: tls.VersionTLS12}
	sb := startStreamsBackend(t, "b", 1, grpc.Creds(credentials.NewTLS(cfg)))
	c := secureCluster(t, "c", "id", "roots", exactSAN(serverSPIFFE))
	c.CircuitBreakers = perHostCluster("c", 3, true).CircuitBreakers
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{c}, eds("c", sb.backend)))
	errs := startRPCs(e.ctx, e.dial(xdsCreds(t)), 3)
	sb.waitArrived(t, e.ctx, 3, "max_connections 3 over TLS")
	finish(t, e.ctx, sb, errs, 3)
	if n, most := sb.conns.Load(), sb.most.Load(); n != 3 || most != 3 {
		t.Errorf("%d connections, %d RPCs at once; want 3, 3", n, most)
	}
}

// Under TLS credentials goxds does not run, the limit cannot be read: the
// endpoint keeps one connection, and the log says why, once.
func TestConnectionScalingUnreadableLimit(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	m := newMesh(t)
	logger, sink := newLogSink()
	e := newSecureEnvLogging(t, m, logger)
	cfg := &tls.Config{Certificates: []tls.Certificate{m.server.TLS}, MinVersion: tls.VersionTLS12}
	sb := startStreamsBackend(t, "b", 1, grpc.Creds(credentials.NewTLS(cfg)))
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 3, true)}, eds("c", sb.backend)))
	creds := credentials.NewTLS(&tls.Config{RootCAs: m.pki.Roots, ServerName: serverDNS, MinVersion: tls.VersionTLS12})
	errs := startRPCs(e.ctx, e.dial(grpc.WithTransportCredentials(creds)), 2)
	sb.waitArrived(t, e.ctx, 1, "the first RPC")
	sink.want(e.ctx, t, slog.LevelWarn, "connection scaling (gRFC A105) is configured but an endpoint keeps one connection: the server's MAX_CONCURRENT_STREAMS cannot be read off its connection: the channel's transport credentials are neither insecure nor xdscreds' (whose TLS goxds runs)", nil)
	sb.release <- struct{}{}
	sb.waitArrived(t, e.ctx, 1, "the second RPC, once the stream is free")
	finish(t, e.ctx, sb, errs, 1)
	<-errs
	if n := sb.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// BenchmarkScaledQueueing measures where an RPC waits when every stream of
// a scaled endpoint is taken and no connection can be added (scale.go):
// 64 callers on a server of MAX_CONCURRENT_STREAMS 2, max_connections 2,
// so 4 RPCs run at a time. "transport": in grpc-go's transport, on the
// connection with the most streams to spare (goxds's choice); "picker": in
// the picker's queue, released by each RPC that ends (the gRFC's queue,
// as an LB policy can make it). queued-picks/op counts the picks queued
// for want of a stream.
func BenchmarkScaledQueueing(b *testing.B) {
	b.Setenv(resources.EnvConnectionScaling, "true")
	sb := startStreamsBackend(b, "b", 2)
	sb.handler.Store(nil)
	e := newEnvWith(b, grpcxds.Options{Logger: quietLogger})
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 2, true)}, eds("c", sb.backend)))
	for _, mode := range []string{"transport", "picker"} {
		b.Run(mode, func(b *testing.B) {
			grpcxds.SetQueueAtLimit(mode == "picker")
			defer grpcxds.SetQueueAtLimit(false)
			conn := e.dial()
			if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
				b.Fatal(err)
			}
			before := grpcxds.QueuedPicks()
			b.ReportAllocs()
			b.SetParallelism(32) // 64 callers on 2 CPUs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := call(e.ctx, conn, grpc.WaitForReady(true)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(grpcxds.QueuedPicks()-before)/float64(b.N), "queued-picks/op")
			conn.Close()
		})
	}
}

// openConns is a SubchannelMetrics that keeps grpc.subchannel.open_connections.
type openConns struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed and replaced at each change
}

func newOpenConns() *openConns { return &openConns{changed: make(chan struct{})} }

func (*openConns) ConnectionAttemptSucceeded(string, string, string) {}
func (*openConns) ConnectionAttemptFailed(string, string, string)    {}
func (*openConns) Disconnection(string, string, string, string)      {}
func (o *openConns) OpenConnections(_, _, _ string, delta int) {
	o.mu.Lock()
	o.n += delta
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
}

// wait waits for n open connections.
func (o *openConns) wait(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for {
		o.mu.Lock()
		got, changed := o.n, o.changed
		o.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("open_connections %d, want %d", got, n)
		}
	}
}

// An RPC queued while a connection is being made takes a stream of an open
// connection as soon as one frees up: it does not wait for the new one.
func TestConnectionScalingQueuedTakesFreedStream(t *testing.T) {
	t.Setenv(resources.EnvConnectionScaling, "true")
	sb := startStreamsBackend(t, "b", 1)
	e := newEnv(t)
	e.update(tree(routes(toCluster(prefix("/"), "c")), []*clusterv3.Cluster{perHostCluster("c", 2, true)}, eds("c", sb.backend)))
	// The held attempt must not time out during the test: its failure
	// would release the queued RPC too.
	conn := e.dial(grpc.WithConnectParams(grpc.ConnectParams{Backoff: fastBackoff, MinConnectTimeout: testTimeout}))
	first := startRPCs(e.ctx, conn, 1)
	sb.waitArrived(t, e.ctx, 1, "the first RPC")
	hold := make(chan struct{})
	sb.hold.Store(&hold)
	defer close(hold)
	second := startRPCs(e.ctx, conn, 1)
	select {
	case <-sb.holding: // the second RPC is queued for this connection
	case <-e.ctx.Done():
		t.Fatal("no second connection was attempted")
	}
	finish(t, e.ctx, sb, first, 1)
	sb.waitArrived(t, e.ctx, 1, "the queued RPC, on the stream the first freed")
	finish(t, e.ctx, sb, second, 1)
	if n := sb.conns.Load(); n != 1 {
		t.Errorf("%d connections served, want 1 (the second is held)", n)
	}
}
