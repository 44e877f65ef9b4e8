package grpcxds_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/grpcxds"
)

// retryRecorder is a grpcxds.RetryMetrics that keeps what it hears.
type retryRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *retryRecorder) CallRetried(target, method string, retries int, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%s %s retries=%d delay=%v", target, method, retries, delay))
}

func (r *retryRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// gRFC A96: a call the route's retry policy retried is reported once, at
// its end, with its retries (attempts less one) and the time it waited
// between attempts, labelled with the channel's target and the method; a
// call with no retry is not reported; streams too.
func TestRetryMetrics(t *testing.T) {
	t.Parallel()
	rec := &retryRecorder{}
	e := newEnvWith(t, grpcxds.Options{RetryMetrics: rec})
	w := &waits{}
	grpcxds.SetRetryWait(e.builder, w.record)
	a := startBackend(t, "a")
	rc := routes(withRetry(toCluster(prefix("/"), "A"), retryPolicy("unavailable", 3, time.Second, 3*time.Second)))
	e.update(tree(rc, clusters("A"), eds("A", a)))
	conn := e.dial()
	e.waitServed(conn, 1, func(string) bool { return true })
	rec.take()
	w.take()
	target := conn.CanonicalTarget()
	sum := func(ds []time.Duration) (s time.Duration) {
		for _, d := range ds {
			s += d
		}
		return s
	}

	// Fails twice, then succeeds: 2 retries.
	failFirst(a, 2, codes.Unavailable, nil)
	if _, err := call(e.ctx, conn); err != nil {
		t.Fatal(err)
	}
	ds := w.take()
	want := fmt.Sprintf("%s goxds.test.Greeter/SayHello retries=2 delay=%v", target, sum(ds))
	if got := rec.take(); len(ds) != 2 || len(got) != 1 || got[0] != want {
		t.Errorf("RPC retried twice (backoffs %v) reported %q, want [%q]", ds, got, want)
	}

	// No retry: nothing reported.
	if _, err := call(e.ctx, conn); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("RPC not retried reported %q, want nothing", got)
	}

	// Always failing: 4 attempts, 3 retries, reported with the failure.
	failFirst(a, 100, codes.Unavailable, nil)
	if _, err := call(e.ctx, conn); status.Code(err) != codes.Unavailable {
		t.Fatalf("RPC always failing: %v", err)
	}
	ds = w.take()
	want = fmt.Sprintf("%s goxds.test.Greeter/SayHello retries=3 delay=%v", target, sum(ds))
	if got := rec.take(); len(ds) != 3 || len(got) != 1 || got[0] != want {
		t.Errorf("RPC failing 4 times (backoffs %v) reported %q, want [%q]", ds, got, want)
	}

	// A stream failing once, then answering: 1 retry, reported once
	// however often RecvMsg is called after.
	failFirst(a, 1, codes.Unavailable, nil)
	if got, err := chat(e.ctx, conn, 2); err != nil || got != "a:2" {
		t.Fatalf("stream: %q, %v", got, err)
	}
	ds = w.take()
	want = fmt.Sprintf("%s goxds.test.Greeter/Chat retries=1 delay=%v", target, sum(ds))
	if got := rec.take(); len(ds) != 1 || len(got) != 1 || got[0] != want {
		t.Errorf("stream retried once (backoffs %v) reported %q, want [%q]", ds, got, want)
	}
}
