package grpcxds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// manualClock is a clock whose timers fire when the test advances it, in
// deadline order, on the test's goroutine.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c       *manualClock
	at      time.Time
	f       func()
	stopped bool // or fired
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// advance moves the time on by d and runs the timers due, outside the
// clock's lock: a timer may arm another.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, rest []*manualTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *manualTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}

// stuckCC is a ClientConn whose SubConns never report a state: their
// endpoints stay as if connecting forever (a blackholed network). It
// counts the pickers published.
type stuckCC struct {
	balancer.ClientConn
	published atomic.Int64
	// onUpdate, if set, runs on every publish (under the balancer's lock).
	onUpdate func(balancer.State)
}

type stuckSC struct{ balancer.SubConn }

func (stuckSC) Connect()  {}
func (stuckSC) Shutdown() {}

func (*stuckCC) NewSubConn([]resolver.Address, balancer.NewSubConnOptions) (balancer.SubConn, error) {
	return stuckSC{}, nil
}

func (cc *stuckCC) UpdateState(s balancer.State) {
	cc.published.Add(1)
	if cc.onUpdate != nil {
		cc.onUpdate(s)
	}
}

// withSnapshot returns the attributes of a resolver state that carries
// snap alone, as no resolver makes it: a balancer's tests feed it so.
func withSnapshot(snap *watchers.Snapshot) *attributes.Attributes {
	return attributes.New(configKey{}, &channelConfig{snap: snap})
}

// clustersState is a resolver state of n EDS clusters of one endpoint
// each, every cluster the target of a route.
func clustersState(n int) resolver.State { return clustersStateOf(n, 1) }

// clustersStateOf is a resolver state of n EDS clusters of m endpoints
// each (every address distinct), every cluster the target of a route.
func clustersStateOf(n, m int) resolver.State {
	vh := &resources.VirtualHost{}
	ccs := make(map[string]*watchers.ClusterConfig, n)
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		vh.Routes = append(vh.Routes, &resources.Route{Action: resources.RouteActionRoute, Cluster: name})
		eps := make([]resources.Endpoint, m)
		for j := range eps {
			k := i*m + j
			eps[j] = resources.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d:80", k>>16&0xff, k>>8&0xff, k&0xff)}, Weight: 1}
		}
		ccs[name] = &watchers.ClusterConfig{
			Name:      name,
			Cluster:   &resources.Cluster{Name: name, Kind: resources.ClusterKindEDS, MaxRequests: 1024},
			Endpoints: &resources.Endpoints{Name: name, Localities: []resources.Locality{{Weight: 1, Endpoints: eps}}},
		}
	}
	snap := &watchers.Snapshot{VirtualHost: vh, Clusters: watchers.NewClusterMap(ccs)}
	return resolver.State{Attributes: withSnapshot(snap)}
}

// newStuckBalancer builds a balancer on cc whose failover timers run on
// clk, with the given failover timeout.
func newStuckBalancer(cc *stuckCC, clk clock, timeout time.Duration) *xdsBalancer {
	b := balancerBuilder{}.Build(cc, balancer.BuildOptions{}).(*xdsBalancer)
	b.clock = clk
	b.logger = slog.New(slog.DiscardHandler)
	b.set = cluster.NewSet(b, clk, cluster.Config{FailoverTimeout: timeout})
	return b
}

// When the endpoints of many clusters never connect, their failover timers
// expire together; handling each expiry on its own rebuilt the route
// picker over every cluster, once per cluster: O(N²), seconds at 10,000
// clusters. The expiries are one batch: one picker published, every
// cluster given up on.
func TestFailoverTimersExpireAsOneBatch(t *testing.T) {
	t.Parallel()
	const n = 2000
	clk := &manualClock{now: time.Unix(1000, 0)}
	cc := &stuckCC{}
	b := newStuckBalancer(cc, clk, time.Second)
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: clustersState(n)}); err != nil {
		t.Fatal(err)
	}
	before := cc.published.Load()
	clk.advance(2 * time.Second)
	if got := cc.published.Load() - before; got != 1 {
		t.Errorf("%d failover timers expiring together published %d pickers, want 1", n, got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, name := range b.set.Names() {
		if info, _ := b.set.Info(name); !slices.Contains(info.TimedOut, 0) {
			t.Fatalf("cluster %s: priority 0 not given up on after the failover timeout", name)
		}
	}
}

// BenchmarkFailoverExpiry measures, with real timers, the round in which
// the failover timers of clusters whose endpoints never connect expire:
// from the configuration to the last expiry handled, wall time and the
// process's CPU time.
func BenchmarkFailoverExpiry(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			state := clustersState(n)
			const timeout = 50 * time.Millisecond
			var wall, cpu time.Duration
			for range b.N {
				done := make(chan struct{})
				var count atomic.Int64
				// Counts the expiries as they are logged, outside any lock.
				h := countingHandler{msg: cluster.FailoverLogMsg, n: &count, want: int64(n), done: done}
				cc := &stuckCC{}
				bal := newStuckBalancer(cc, realClock{}, timeout)
				bal.logger = slog.New(h)
				if err := bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: state}); err != nil {
					b.Fatal(err)
				}
				start, cpu0 := time.Now(), cpuTime()
				select {
				case <-done:
				case <-time.After(5 * time.Minute):
					b.Fatalf("%d of %d expiries after 5 minutes", count.Load(), n)
				}
				wall += time.Since(start)
				cpu += cpuTime() - cpu0
				bal.Close()
			}
			b.ReportMetric(float64((wall / time.Duration(b.N)).Milliseconds()), "wall-ms/round")
			b.ReportMetric(float64((cpu / time.Duration(b.N)).Milliseconds()), "cpu-ms/round")
		})
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingHandler counts the log lines of one message and closes done at
// the want'th.
type countingHandler struct {
	msg  string
	n    *atomic.Int64
	want int64
	done chan struct{}
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg && h.n.Add(1) == h.want {
		close(h.done)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// failingCC is a ClientConn whose SubConns fail to connect, as to a closed
// port: each reports CONNECTING then TRANSIENT_FAILURE, one listener call
// at a time on one goroutine, as gRPC's serializer calls them.
type failingCC struct {
	stuckCC
	calls   chan func()
	reports atomic.Int64
	want    int64
	done    chan struct{}
	// ready: the SubConns connect instead, for the reachable case.
	ready bool
}

type failingSC struct {
	balancer.SubConn
	cc       *failingCC
	listener func(balancer.SubConnState)
	once     sync.Once
}

func (sc *failingSC) Connect() {
	sc.once.Do(func() {
		sc.cc.calls <- func() {
			sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
			if sc.cc.ready {
				sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
			} else {
				sc.listener(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errors.New("connection refused")})
			}
			if sc.cc.reports.Add(1) == sc.cc.want {
				close(sc.cc.done)
			}
		}
	})
}
func (*failingSC) Shutdown() {}

func (cc *failingCC) NewSubConn(_ []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	return &failingSC{cc: cc, listener: opts.StateListener}, nil
}

// BenchmarkUnreachableEndpoints measures the configuration of n clusters
// whose endpoints all fail to connect: from the configuration to the last
// SubConn's failure handled, wall time and the process's CPU time; and,
// for comparison, the same with endpoints that connect ("ready").
func BenchmarkUnreachableEndpoints(b *testing.B) {
	for _, c := range []struct {
		n     int
		ready bool
	}{{1000, false}, {10000, false}, {1000, true}, {10000, true}} {
		n := c.n
		name := fmt.Sprint(n)
		if c.ready {
			name += "-ready"
		}
		b.Run(name, func(b *testing.B) {
			state := clustersState(n)
			var wall, cpu time.Duration
			for range b.N {
				cc := &failingCC{calls: make(chan func(), 2*n), want: int64(n), done: make(chan struct{}), ready: c.ready}
				bal := newStuckBalancer(&cc.stuckCC, realClock{}, time.Minute)
				bal.cc = cc
				start, cpu0 := time.Now(), cpuTime()
				if err := bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: state}); err != nil {
					b.Fatal(err)
				}
				serialized := make(chan struct{})
				go func() {
					defer close(serialized)
					for {
						select {
						case f := <-cc.calls:
							f()
						case <-cc.done:
							return
						}
					}
				}()
				select {
				case <-cc.done:
				case <-time.After(5 * time.Minute):
					b.Fatalf("%d of %d SubConns failed after 5 minutes", cc.reports.Load(), n)
				}
				<-serialized
				wall += time.Since(start)
				cpu += cpuTime() - cpu0
				bal.Close()
			}
			b.ReportMetric(float64((wall / time.Duration(b.N)).Milliseconds()), "wall-ms/round")
			b.ReportMetric(float64((cpu / time.Duration(b.N)).Milliseconds()), "cpu-ms/round")
		})
	}
}
