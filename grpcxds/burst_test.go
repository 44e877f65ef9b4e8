package grpcxds

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// reportAll hands every SubConn of listeners the state s, one listener
// call after the other on the caller's goroutine, as gRPC's serializer
// calls them.
func reportAll(listeners []func(balancer.SubConnState), s balancer.SubConnState) {
	for _, l := range listeners {
		l(s)
	}
}

var errDeadline = errors.New("connect deadline exceeded")

// burstBalancer is a balancer of n clusters of one endpoint each, every
// SubConn connecting: the moment before gRPC's connect deadline makes them
// all fail together.
func burstBalancer(tb testing.TB, n int) (*xdsBalancer, *stuckCC, []func(balancer.SubConnState)) {
	cc := &stuckCC{}
	var listeners []func(balancer.SubConnState)
	b := newStuckBalancer(cc, realClock{}, time.Minute)
	b.cc = &listenerCC{stuckCC: cc, listeners: &listeners}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersState(n)}); err != nil {
		tb.Fatal(err)
	}
	reportAll(listeners, balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	return b, cc, listeners
}

// BenchmarkStateBurst measures what the balancer does in a burst of
// SubConn state changes: n SubConns, each the only endpoint of its
// cluster, go from CONNECTING to TRANSIENT_FAILURE one after the other
// (gRPC's connect deadline expiring for all of them: each cluster's picker
// changes, so each call publishes one), then IDLE and CONNECTING again (the
// retry after the backoff, which changes no picker). Per SubConn: the
// failure's CPU time, the retry's, and the pickers published in all. The
// ClientConn is a no-op: gRPC's own work for each call is not counted.
func BenchmarkStateBurst(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var fail, retry time.Duration
			var published int64
			b.StopTimer()
			for range b.N {
				bal, cc, ls := burstBalancer(b, n)
				before := cc.published.Load()
				b.StartTimer()
				cpu0 := cpuTime()
				reportAll(ls, balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errDeadline})
				cpu1 := cpuTime()
				reportAll(ls, balancer.SubConnState{ConnectivityState: connectivity.Idle})
				reportAll(ls, balancer.SubConnState{ConnectivityState: connectivity.Connecting})
				cpu2 := cpuTime()
				b.StopTimer()
				fail += cpu1 - cpu0
				retry += cpu2 - cpu1
				published += cc.published.Load() - before
				bal.Close()
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) / float64(n) }
			b.ReportMetric(per(fail), "fail-cpu-µs/sc")
			b.ReportMetric(per(retry), "retry-cpu-µs/sc")
			b.ReportMetric(float64(published)/float64(b.N), "pickers/burst")
		})
	}
}
