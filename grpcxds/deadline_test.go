package grpcxds_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// noDeadline is a context whose deadline gRPC does not see: it sends no
// grpc-timeout, so the server does not end the RPC at the deadline itself.
// Its cancellation is its parent's.
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// hideDeadline is a unary and a stream interceptor, run after goxds's,
// that hides the RPC's deadline from gRPC (noDeadline).
func hideDeadline() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(noDeadline{ctx}, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(noDeadline{ctx}, desc, cc, method, opts...)
		}),
	}
}

// A route's max_stream_duration ends the RPC at the client when nothing
// cancels the application's context (context.Background, or values only:
// then the RPC's selection carries the deadline, with a timer shared by
// the process's RPCs, rather than a context.WithTimeout of its own). The
// backend never learns the deadline here, so only the client can end the
// RPC: the backend sees its RPC cancelled, and the client gets
// DEADLINE_EXCEEDED, not before the deadline.
func TestRouteDeadlineEndsRPCAtClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	const msd = 300 * time.Millisecond
	e.update(tree(routes(withRetry(maxStreamDuration(toCluster(prefix("/"), "A"), msd, 0), retryPolicy("unavailable", 2, 0, 0))),
		clusters("A"), eds("A", a)))
	conn := e.dial(hideDeadline()...)
	e.waitServed(conn, 1, func(name string) bool { return name == "a" })
	type seen struct {
		deadline bool  // the backend's context had a deadline
		err      error // how the backend's context ended
	}
	seenc := make(chan seen, 1)
	block := func(ctx context.Context) error {
		_, ok := ctx.Deadline()
		<-ctx.Done()
		seenc <- seen{ok, ctx.Err()}
		return ctx.Err()
	}
	a.handler.Store(&block)
	for _, rpc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"unary", func(ctx context.Context) error { _, err := call(ctx, conn); return err }},
		{"stream", func(ctx context.Context) error { _, err := chat(ctx, conn, 1); return err }},
	} {
		ctx := context.WithoutCancel(e.ctx) // the test's values, never cancelled
		start := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- rpc.call(ctx) }()
		var err error
		select {
		case err = <-errc:
		case <-e.ctx.Done():
			t.Fatalf("%s RPC not ended by its route's max_stream_duration %v", rpc.name, msd)
		}
		if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || took < msd {
			t.Errorf("%s RPC ended after %v with %v; want DEADLINE_EXCEEDED after %v", rpc.name, took, err, msd)
		}
		select {
		case s := <-seenc:
			if s.deadline || s.err != context.Canceled {
				t.Errorf("%s RPC at the backend: deadline %v, ended with %v; want no deadline, cancelled by the client", rpc.name, s.deadline, s.err)
			}
		case <-e.ctx.Done():
			t.Fatalf("%s RPC never cancelled at the backend", rpc.name)
		}
	}
}
