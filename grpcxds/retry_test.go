package grpcxds_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/testutils"
)

// waits records the backoffs a channel's retries wait, without waiting.
type waits struct {
	mu sync.Mutex
	ds []time.Duration
}

func (w *waits) record(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ds = append(w.ds, d)
	return nil
}

func (w *waits) take() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.ds
	w.ds = nil
	return out
}

// failFirst makes b fail its first n RPCs from now on with code, each with
// the given trailer, if any.
func failFirst(b *backend, n int64, code codes.Code, trailer metadata.MD) {
	var seen atomic.Int64
	h := func(ctx context.Context) error {
		if seen.Add(1) > n {
			return nil
		}
		if trailer != nil {
			grpc.SetTrailer(ctx, trailer)
		}
		return status.Error(code, "failing as told")
	}
	b.handler.Store(&h)
	b.rpcs.Store(0)
}

func retryPolicy(on string, retries uint32, base, max time.Duration) *routev3.RetryPolicy {
	rp := &routev3.RetryPolicy{RetryOn: on, NumRetries: wrapperspb.UInt32(retries)}
	if base > 0 {
		rp.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(base)}
		if max > 0 {
			rp.RetryBackOff.MaxInterval = durationpb.New(max)
		}
	}
	return rp
}

// withRetry returns r with a route-level retry policy.
func withRetry(r *routev3.Route, rp *routev3.RetryPolicy) *routev3.Route {
	r.GetRoute().RetryPolicy = rp
	return r
}

// Retries follow the route's retry_policy as gRPC applies it (gRFC A44):
// the codes named in retry_on, num_retries+1 attempts (uncapped, as
// grpc-go's xds resolver makes them),
// exponential backoff from base_interval up to max_interval with ±20%
// jitter, the server's pushback, nothing retried once the server answered
// with headers; a virtual host's policy where the route has none.
func TestRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := &waits{}
	grpcxds.SetRetryWait(e.builder, w.record)
	a := startBackend(t, "a")
	const base = time.Second
	rc := routes(withRetry(toCluster(prefix("/"), "A"), retryPolicy("unavailable,cancelled", 3, base, 3*base)))
	e.update(tree(rc, clusters("A"), eds("A", a)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })

	// Two failures, then success: three attempts, two backoffs.
	failFirst(a, 2, codes.Unavailable, nil)
	if _, err := call(e.ctx, conn); err != nil {
		t.Fatalf("RPC failing twice with 3 retries allowed: %v", err)
	}
	if n := a.rpcs.Load(); n != 3 {
		t.Errorf("server saw %d attempts, want 3", n)
	}
	ds := w.take()
	if len(ds) != 2 || ds[0] < 800*time.Millisecond || ds[0] > 1200*time.Millisecond || ds[1] < 1600*time.Millisecond || ds[1] > 2400*time.Millisecond {
		t.Errorf("backoffs %v; want 2, in [0.8s, 1.2s] then [1.6s, 2.4s]", ds)
	}

	// Always failing: num_retries 3 is 4 attempts, the 4th backoff capped
	// by max_interval.
	failFirst(a, 100, codes.Unavailable, nil)
	if _, err := call(e.ctx, conn); status.Code(err) != codes.Unavailable {
		t.Errorf("RPC always failing: %v; want UNAVAILABLE", err)
	}
	if n := a.rpcs.Load(); n != 4 {
		t.Errorf("server saw %d attempts, want 4", n)
	}
	if ds := w.take(); len(ds) != 3 || ds[2] < 2400*time.Millisecond || ds[2] > 3600*time.Millisecond {
		t.Errorf("backoffs %v; want 3, the third within 20%% of max_interval 3s", ds)
	}

	// A request larger than what gRPC keeps to replay (256 KiB) is not
	// retried.
	failFirst(a, 1, codes.Unavailable, nil)
	big := wrapperspb.String(strings.Repeat("x", 300<<10))
	if err := conn.Invoke(e.ctx, sayHello, big, new(wrapperspb.StringValue)); status.Code(err) != codes.Unavailable || a.rpcs.Load() != 1 {
		t.Errorf("300 KiB request failing once: %v after %d attempts; want UNAVAILABLE after 1", err, a.rpcs.Load())
	}
	w.take()

	// A code retry_on does not name is not retried.
	failFirst(a, 100, codes.Internal, nil)
	if _, err := call(e.ctx, conn); status.Code(err) != codes.Internal || a.rpcs.Load() != 1 {
		t.Errorf("RPC failing INTERNAL: %v after %d attempts; want INTERNAL after 1", err, a.rpcs.Load())
	}

	// The server's pushback sets the wait; a negative one stops retries.
	failFirst(a, 1, codes.Unavailable, metadata.Pairs("grpc-retry-pushback-ms", "7"))
	if _, err := call(e.ctx, conn); err != nil || a.rpcs.Load() != 2 {
		t.Errorf("RPC with pushback: %v after %d attempts; want success after 2", err, a.rpcs.Load())
	}
	if ds := w.take(); len(ds) != 1 || ds[0] != 7*time.Millisecond {
		t.Errorf("backoffs %v; want [7ms], the pushback", ds)
	}
	failFirst(a, 1, codes.Unavailable, metadata.Pairs("grpc-retry-pushback-ms", "-1"))
	if _, err := call(e.ctx, conn); status.Code(err) != codes.Unavailable || a.rpcs.Load() != 1 {
		t.Errorf("RPC with negative pushback: %v after %d attempts; want UNAVAILABLE after 1", err, a.rpcs.Load())
	}
	w.take()

	// A stream is retried while it has no answer, and what it sent is sent
	// again.
	failFirst(a, 2, codes.Unavailable, nil)
	if got, err := chat(e.ctx, conn, 3); err != nil || got != "a:3" || a.rpcs.Load() != 3 {
		t.Errorf("stream failing twice: %q, %v after %d attempts; want \"a:3\" after 3", got, err, a.rpcs.Load())
	}

	// A stream whose Header is read first: the failed attempt has no
	// header, and RecvMsg retries it.
	failFirst(a, 2, codes.Unavailable, nil)
	s, err := conn.NewStream(e.ctx, chatDesc, "/goxds.test.Greeter/Chat")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Header(); err != nil {
		t.Errorf("Header of a stream whose first attempt failed: %v; want none", err)
	}
	out := new(wrapperspb.StringValue)
	if err := s.RecvMsg(out); err != nil || out.GetValue() != "a:0" || a.rpcs.Load() != 3 {
		t.Errorf("RecvMsg after Header: %q, %v after %d attempts; want \"a:0\" after 3", out.GetValue(), err, a.rpcs.Load())
	}
	w.take()

	// num_retries 10 is 11 attempts; the virtual host's policy applies to
	// a route without one.
	rc = routes(toCluster(prefix("/"), "A"))
	rc.VirtualHosts[0].RetryPolicy = retryPolicy("unavailable", 10, 0, 0)
	e.update(tree(rc, clusters("A"), eds("A", a)))
	waitFor(t, e.ctx, func() bool { // until the new policy is in force
		failFirst(a, 100, codes.Unavailable, nil)
		_, err := call(e.ctx, conn)
		return status.Code(err) == codes.Unavailable && a.rpcs.Load() != 4
	})
	if n := a.rpcs.Load(); n != 11 {
		t.Errorf("virtual host policy, num_retries 10: %d attempts, want 11", n)
	}
	// The default backoff: base_interval 25ms, max_interval 250ms.
	ds = w.take()
	ds = ds[len(ds)-10:]
	for i, d := range ds {
		want := min(25*time.Millisecond<<i, 250*time.Millisecond)
		if d < want*8/10 || d > want*12/10 {
			t.Errorf("default backoff %d is %v; want within 20%% of %v", i+1, d, want)
		}
	}
}

// waitFor calls cond until it holds, and fails the test at ctx's deadline.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatal("condition never held")
		}
	}
}

var chatDesc = &grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}

// chat sends n messages on a Chat stream and returns the answer.
func chat(ctx context.Context, conn *grpc.ClientConn, n int) (string, error) {
	s, err := conn.NewStream(ctx, chatDesc, "/goxds.test.Greeter/Chat")
	if err != nil {
		return "", err
	}
	for range n {
		if err := s.SendMsg(wrapperspb.String("hi")); err != nil {
			return "", err
		}
	}
	if err := s.CloseSend(); err != nil {
		return "", err
	}
	out := new(wrapperspb.StringValue)
	if err := s.RecvMsg(out); err != nil {
		return "", err
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		return out.GetValue(), err
	}
	return out.GetValue(), nil
}

// maxStreamDuration sets a route's max_stream_duration.
func maxStreamDuration(r *routev3.Route, msd, headerMax time.Duration) *routev3.Route {
	m := &routev3.RouteAction_MaxStreamDuration{}
	if msd > 0 {
		m.MaxStreamDuration = durationpb.New(msd)
	}
	if headerMax > 0 {
		m.GrpcTimeoutHeaderMax = durationpb.New(headerMax)
	}
	r.GetRoute().MaxStreamDuration = m
	return r
}

// listenerWithMaxStreamDuration is the test listener with the connection
// manager's max_stream_duration set.
func listenerWithMaxStreamDuration(t *testing.T, routeName string, d time.Duration) *listenerv3.Listener {
	t.Helper()
	l := testutils.Listener(listener, routeName)
	hcm := new(hcmv3.HttpConnectionManager)
	if err := l.ApiListener.ApiListener.UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	hcm.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxStreamDuration: durationpb.New(d)}
	l.ApiListener.ApiListener = testutils.MarshalAny(hcm)
	return l
}

// Route timeouts bound RPCs as grpc-go bounds them (gRFC A31):
// grpc_timeout_header_max if set, else the route's max_stream_duration,
// else the connection manager's; the application's earlier deadline wins.
func TestRouteTimeouts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	block := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	for i, tc := range []struct {
		name  string
		route *routev3.Route
		hcm   time.Duration // the connection manager's
		want  time.Duration
	}{
		{"max_stream_duration", maxStreamDuration(toCluster(prefix("/"), "A"), 300*time.Millisecond, 0), 0, 300 * time.Millisecond},
		{"grpc_timeout_header_max wins", maxStreamDuration(toCluster(prefix("/"), "A"), time.Hour, 400*time.Millisecond), 0, 400 * time.Millisecond},
		{"connection manager's", toCluster(prefix("/"), "A"), 500 * time.Millisecond, 500 * time.Millisecond},
	} {
		// A backend, cluster and route configuration of its own per case:
		// the listener leads to the backend only through the case's route
		// configuration, so the first RPC the backend serves says the
		// case's listener and routes are in force.
		a := startBackend(t, tc.name)
		cluster := fmt.Sprint("A", i)
		tc.route.GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: cluster}
		rc := routes(tc.route)
		rc.Name = fmt.Sprint("route-", i)
		res := tree(rc, clusters(cluster), eds(cluster, a))
		if tc.hcm > 0 {
			res.Listeners = []*listenerv3.Listener{listenerWithMaxStreamDuration(t, rc.Name, tc.hcm)}
		}
		e.update(res)
		conn := e.dial()
		e.waitServed(conn, 1, func(name string) bool { return name == tc.name })
		a.handler.Store(&block)
		start := time.Now()
		_, err := call(e.ctx, conn)
		took := time.Since(start)
		// The bound is a lower one; the upper one allows for a loaded
		// machine but not for the 20s test deadline.
		if status.Code(err) != codes.DeadlineExceeded || took < tc.want || took > tc.want+5*time.Second {
			t.Errorf("%s: blocked RPC ended after %v with %v; want DEADLINE_EXCEEDED after %v", tc.name, took, err, tc.want)
		}
		// The application's earlier deadline wins.
		ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
		start = time.Now()
		_, err = call(ctx, conn)
		took = time.Since(start)
		cancel()
		if status.Code(err) != codes.DeadlineExceeded || took >= tc.want {
			t.Errorf("%s: with a 50ms deadline, RPC ended after %v with %v; want DEADLINE_EXCEEDED before %v", tc.name, took, err, tc.want)
		}
	}
}

// An RPC whose deadline comes during a retry's backoff ends with
// DEADLINE_EXCEEDED, unary or stream, as grpc-go's do.
func TestRetryBackoffPastDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A backoff longer than any deadline: it ends when the RPC does.
	grpcxds.SetRetryWait(e.builder, func(ctx context.Context, _ time.Duration) error { <-ctx.Done(); return ctx.Err() })
	a := startBackend(t, "a")
	e.update(tree(routes(withRetry(toCluster(prefix("/"), "A"), retryPolicy("unavailable", 3, time.Hour, 0))), clusters("A"), eds("A", a)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	failFirst(a, 100, codes.Unavailable, nil)
	for name, rpc := range map[string]func(context.Context) error{
		"unary":  func(ctx context.Context) error { _, err := call(ctx, conn); return err },
		"stream": func(ctx context.Context) error { _, err := chat(ctx, conn, 1); return err },
	} {
		ctx, cancel := context.WithTimeout(e.ctx, 200*time.Millisecond)
		err := rpc(ctx)
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%s RPC whose deadline passed in a backoff: %v; want DEADLINE_EXCEEDED", name, err)
		}
	}
}
