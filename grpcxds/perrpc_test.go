package grpcxds_test

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

// unservedBackend is a backend whose port accepts TCP connections but
// speaks no gRPC until start is called: a channel's connection to it stays
// CONNECTING, and RPCs sent to it wait.
func unservedBackend(t *testing.T, name string) (b *backend, start func()) {
	t.Helper()
	b = &backend{name: name}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	b.port = uint32(lis.Addr().(*net.TCPAddr).Port)
	t.Cleanup(func() {
		b.stop()
		lis.Close()
	})
	return b, func() { b.serve(lis) }
}

// The route and the weighted cluster of an RPC are chosen once, when it
// starts (gRFC A31): RPCs queued for a cluster that is still connecting
// keep that cluster across picker updates, so a 50/50 split stays 50/50
// instead of drifting to the cluster that was ready first.
func TestClusterChosenOncePerRPC(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, grpcxds.Options{FailoverTimeout: time.Minute})
	a, a2 := startBackend(t, "a"), startBackend(t, "a2")
	b, startB := unservedBackend(t, "b")
	e.update(tree(routes(weighted(prefix("/"), testutils.ClusterWeight{Name: "A", Weight: 1}, testutils.ClusterWeight{Name: "B", Weight: 1})),
		clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial()

	const n = 400
	var (
		firstPicks, repicks sync.WaitGroup
		queued              atomic.Int64
		done                sync.WaitGroup
		errs                = make(chan error, n)
	)
	firstPicks.Add(n)
	for range n {
		var picks atomic.Int64
		ctx := grpcxds.WithPickObserver(e.ctx, func(err error) {
			switch picks.Add(1) {
			case 1:
				if err != nil { // waiting for B: it must be picked again
					queued.Add(1)
					repicks.Add(1)
				}
				firstPicks.Done()
			case 2:
				repicks.Done()
			}
		})
		done.Add(1)
		go func() {
			defer done.Done()
			if _, err := call(ctx, conn, grpc.WaitForReady(true)); err != nil {
				errs <- err
			}
		}()
	}
	firstPicks.Wait()
	// A new picker: every RPC still waiting is picked again.
	e.update(tree(routes(weighted(prefix("/"), testutils.ClusterWeight{Name: "A", Weight: 1}, testutils.ClusterWeight{Name: "B", Weight: 1})),
		clusters("A", "B"), eds("A", a, a2), eds("B", b)))
	repicks.Wait()
	startB()
	done.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("RPC failed: %v", err)
	}
	toB := b.rpcs.Load()
	t.Logf("%d RPCs: %d were queued at their first pick; served by A %d, B %d", n, queued.Load(), a.rpcs.Load()+a2.rpcs.Load(), toB)
	if share := float64(toB) / n; share < 0.4 || share > 0.6 {
		t.Errorf("B served %d of %d RPCs of a 50/50 route (%.0f%%); want 40%% to 60%%", toB, n, 100*share)
	}
}

// A channel that went idle closes its resolver; the interceptors' next RPC
// wakes it and waits for the new resolver's configuration, instead of
// waiting for a configuration no resolver will bring.
func TestIdleChannelWakes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := startBackend(t, "a")
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	conn := e.dial(grpc.WithIdleTimeout(50 * time.Millisecond))
	for i := range 2 {
		if got, err := call(e.ctx, conn); err != nil || got != "a" {
			t.Fatalf("RPC %d: %q, %v; want served by a", i+1, got, err)
		}
		for s := conn.GetState(); s != connectivity.Idle; s = conn.GetState() {
			if !conn.WaitForStateChange(e.ctx, s) {
				t.Fatalf("channel never went idle: %v", s)
			}
		}
	}
}

// An RPC that wakes an idle channel waits for the configuration of the
// resolver gRPC builds; gRPC does not count that RPC as active, so when
// the configuration takes longer than the idle timeout the channel goes
// idle again and closes that resolver. The RPC then wakes the channel
// once more: it is served when the configuration comes, instead of
// waiting for one from the closed resolver until its deadline. Here the
// management server has no listener until the channel has gone idle, so
// this happens every time.
func TestIdleChannelWakesAgainWhileRPCWaits(t *testing.T) {
	t.Parallel()
	// Listener subscriptions as the server sees them: true when the
	// client asks for the listener, false when it stops asking.
	subs := make(chan bool, 1000)
	note := func(on bool) {
		select {
		case subs <- on:
		default: // the test needs only the first two
		}
	}
	e := newEnvServer(t, grpcxds.Options{}, testutils.ManagementServerOptions{
		OnStreamRequest: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			if req.GetTypeUrl() == resources.ListenerTypeURL {
				note(slices.Contains(req.GetResourceNames(), listener))
			}
			return nil
		},
		OnStreamClosed: func(int64, bool) { note(false) },
	})
	a := startBackend(t, "a")
	conn := e.dial(grpc.WithIdleTimeout(50 * time.Millisecond))
	done := make(chan error, 1)
	go func() {
		got, err := call(e.ctx, conn)
		if err == nil && got != "a" {
			err = fmt.Errorf("served by %q", got)
		}
		done <- err
	}()
	for _, want := range []bool{true, false} { // the resolver built, then closed
		for on := !want; on != want; {
			select {
			case on = <-subs:
			case <-e.ctx.Done():
				t.Fatalf("no listener subscription %v seen", want)
			}
		}
	}
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	if err := <-done; err != nil {
		t.Errorf("RPC that woke the channel, which went idle before the configuration came: %v; want served by a", err)
	}
}

// An RPC waiting for a cluster that then leaves the configuration is
// routed again by the configuration in force, not failed.
func TestQueuedRPCRoutedAgainWhenClusterRemoved(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, grpcxds.Options{FailoverTimeout: time.Minute})
	a := startBackend(t, "a")
	b, _ := unservedBackend(t, "b")
	e.update(tree(routes(toCluster(prefix("/"), "B")), clusters("A", "B"), eds("A", a), eds("B", b)))
	conn := e.dial()
	picked := make(chan struct{})
	var once sync.Once
	ctx := grpcxds.WithPickObserver(e.ctx, func(err error) {
		if err != nil {
			once.Do(func() { close(picked) })
		}
	})
	done := make(chan error, 1)
	go func() {
		got, err := call(ctx, conn, grpc.WaitForReady(true))
		if err == nil && got != "a" {
			err = fmt.Errorf("served by %q", got)
		}
		done <- err
	}()
	<-picked // waiting for B
	e.update(tree(routes(toCluster(prefix("/"), "A")), clusters("A"), eds("A", a)))
	if err := <-done; err != nil {
		t.Errorf("RPC that waited for removed cluster B: %v; want served by a", err)
	}
}
