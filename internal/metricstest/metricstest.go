// Package metricstest drives a real goxds client against go-control-plane's
// server (testutils.ManagementServer) through the events gRFC A78 counts,
// for the tests of the metrics adapters: they scrape their registry or
// reader at each stage and compare it with what the client reported.
package metricstest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/transport"
)

// timeout bounds every wait; a test that reaches it has failed.
const timeout = 10 * time.Second

// The stages at which Run calls check.
const (
	// StageValid: cluster C1 was received and ACKed.
	StageValid = "valid"
	// StageNACKed: the server then sent an invalid C1, which was NACKed;
	// the server may still be resending it (go-control-plane answers a
	// NACK with the same response), so the counters may still move.
	StageNACKed = "nacked"
	// StageFailed: the server was stopped and the client's reconnection
	// failed. Nothing moves any more.
	StageFailed = "failed"
)

// Stage is where Run is, and what the client reported to its Metrics so
// far.
type Stage struct {
	Name string
	// Server is the server's URI, the grpc.xds.server value.
	Server string
	// Valid, Invalid and Failures are the sums of what the client reported
	// through ResourceUpdates and ServerFailure.
	Valid, Invalid, Failures int64
}

// Run makes a client whose Metrics are m, hands it to observe, and takes
// it through a valid update of Cluster C1 (SotW ADS), an invalid one, and
// the server's failure, calling check at each stage.
func Run(t *testing.T, m client.Metrics, observe func(*client.Client), check func(t *testing.T, s Stage)) {
	t.Helper()
	ms, err := testutils.StartManagementServer(testutils.ManagementServerOptions{
		Initial: map[string]testutils.Resources{"node": {Clusters: []*clusterv3.Cluster{testutils.Cluster("C1", "")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Stop()
	b, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{
		ServerURI: ms.Address(), APIType: testutils.APITypeSotW, NodeID: "node",
	}))
	if err != nil {
		t.Fatal(err)
	}
	tm := &tee{next: m, failed: make(chan struct{}), poke: make(chan struct{}, 1)}
	c, err := client.New(b, client.Options{Metrics: tm, Logger: slog.New(slog.DiscardHandler), TransportOptions: fast})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	observe(c)

	updates, errs := make(chan *resources.Cluster, 100), make(chan error, 100)
	cancel := client.WatchCluster(c, "C1", client.WatcherFuncs[*resources.Cluster]{
		OnUpdate:        func(v *resources.Cluster) { updates <- v },
		OnAmbientError:  func(err error) { errs <- err },
		OnResourceError: func(err error) { errs <- err },
	})
	defer cancel()
	select {
	case <-updates:
	case err := <-errs:
		t.Fatalf("C1: %v, want an update", err)
	case <-time.After(timeout):
		t.Fatal("no update of C1")
	}
	// The watcher may hear of a response before the client reports it to
	// its Metrics (the report follows the apply): wait for the report.
	tm.wait(t, "the valid update's report", func() bool { return tm.valid >= 1 && tm.connected })
	check(t, tm.stage(StageValid, ms.Address()))

	// A Cluster with no discovery type is invalid.
	bad := &clusterv3.Cluster{Name: "C1"}
	ctx, stop := context.WithTimeout(context.Background(), timeout)
	defer stop()
	if err := ms.Update(ctx, "node", testutils.Resources{Clusters: []*clusterv3.Cluster{bad}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-errs: // the NACK, with the good C1 held
	case <-time.After(timeout):
		t.Fatal("the invalid C1 was not reported")
	}
	tm.wait(t, "the invalid update's report", func() bool { return tm.invalid >= 1 })
	check(t, tm.stage(StageNACKed, ms.Address()))

	ms.Stop()
	select {
	case <-tm.failed:
	case <-time.After(timeout):
		t.Fatal("no server failure reported")
	}
	check(t, tm.stage(StageFailed, ms.Address()))
}

// fast makes the client's reconnection after the server stops quick.
var fast = transport.Options{
	Backoff:           quick,
	MinStreamInterval: time.Millisecond,
	DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: quick, MinConnectTimeout: time.Second,
	})},
}

var quick = backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 50 * time.Millisecond}

// tee passes the client's reports on to the adapter and then sums them,
// as the truth to compare a scrape with: once the tee has a report, so has
// the adapter.
type tee struct {
	next client.Metrics
	// poke has a value after each report, for wait.
	poke chan struct{}

	mu                       sync.Mutex
	valid, invalid, failures int64
	connected                bool // as last reported
	// failed is closed once a failure and the loss of the connection that
	// follows it have both been reported.
	failed     chan struct{}
	failedOnce sync.Once
}

func (m *tee) ResourceUpdates(server, typeURL string, valid, invalid int) {
	m.next.ResourceUpdates(server, typeURL, valid, invalid)
	m.mu.Lock()
	m.valid += int64(valid)
	m.invalid += int64(invalid)
	m.mu.Unlock()
	m.notify()
}

func (m *tee) ServerFailure(server string) {
	m.next.ServerFailure(server)
	m.mu.Lock()
	m.failures++
	m.mu.Unlock()
	m.notify()
}

func (m *tee) Connected(server string, connected bool) {
	m.next.Connected(server, connected)
	m.mu.Lock()
	m.connected = connected
	failed := m.failures > 0
	m.mu.Unlock()
	if failed && !connected {
		m.failedOnce.Do(func() { close(m.failed) })
	}
	m.notify()
}

func (m *tee) notify() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// wait waits until cond, called with m.mu held, holds.
func (m *tee) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		m.mu.Lock()
		ok := cond()
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-m.poke:
		case <-deadline:
			t.Fatalf("waiting for %s", what)
		}
	}
}

func (m *tee) stage(name, server string) Stage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stage{Name: name, Server: server, Valid: m.valid, Invalid: m.invalid, Failures: m.failures}
}
