package main

import (
	"fmt"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	estats "google.golang.org/grpc/experimental/stats"
	_ "google.golang.org/grpc/xds" // registers grpc-go's xds resolver and balancers

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/watchers"
)

// runGoxds follows the listener's tree with goxds: a client from the
// bootstrap in the environment and a config-tree watcher, as a service
// would.
func runGoxds(listener string) (info func() string, stop func(), err error) {
	cfg, err := bootstrap.FromEnv()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, nil, err
	}
	var (
		snapshots, resErrs, ambErrs atomic.Int64
		last                        atomic.Pointer[watchers.Snapshot]
	)
	cancel := watchers.WatchConfigTree(c, listener, watchers.TreeOptions{}, watchers.TreeWatcherFuncs{
		OnUpdate: func(s *watchers.Snapshot) {
			snapshots.Add(1)
			last.Store(s)
		},
		OnResourceError: func(error) { resErrs.Add(1) },
		OnAmbientError:  func(error) { ambErrs.Add(1) },
	})
	var (
		mu       sync.Mutex
		counted  *watchers.Snapshot
		inError  int
		clusters int
	)
	info = func() string {
		mu.Lock()
		defer mu.Unlock()
		if s := last.Load(); s != counted {
			counted, inError, clusters = s, 0, s.Clusters.Len()
			for _, cc := range s.Clusters.All() {
				if cc.Err != nil {
					inError++
				}
			}
		}
		return fmt.Sprintf("snapshots=%d clusters=%d clusters_in_error=%d resource_errors=%d ambient_errors=%d",
			snapshots.Load(), clusters, inError, resErrs.Load(), ambErrs.Load())
	}
	return info, func() { cancel(); c.Close() }, nil
}

// runGRPC follows the listener's tree with grpc-go's own xDS client, through
// its xds resolver alone: the resolver (with its dependency manager) watches
// LDS, RDS, CDS and EDS, and hands the result to a ClientConn that here only
// counts the updates. No channel, no balancer, no subchannels: what is
// measured is the xDS client, as in goxds's column.
func runGRPC(listener string) (info func() string, stop func(), err error) {
	b := resolver.Get("xds")
	if b == nil {
		return nil, nil, fmt.Errorf("grpc-go's xds resolver is not registered")
	}
	u, err := url.Parse("xds:///" + listener)
	if err != nil {
		return nil, nil, err
	}
	cc := &countingConn{}
	r, err := b.Build(resolver.Target{URL: *u}, cc, resolver.BuildOptions{
		Authority:       listener,
		MetricsRecorder: noopRecorder{},
	})
	if err != nil {
		return nil, nil, err
	}
	info = func() string {
		return fmt.Sprintf("resolver_updates=%d resolver_errors=%d", cc.updates.Load(), cc.errors.Load())
	}
	return info, r.Close, nil
}

// countingConn is the resolver.ClientConn of runGRPC.
type countingConn struct {
	updates, errors atomic.Int64
}

func (c *countingConn) UpdateState(resolver.State) error { c.updates.Add(1); return nil }
func (c *countingConn) ReportError(error)                { c.errors.Add(1) }
func (c *countingConn) NewAddress([]resolver.Address)    {}
func (c *countingConn) ParseServiceConfig(string) *serviceconfig.ParseResult {
	return &serviceconfig.ParseResult{}
}

// noopRecorder drops grpc-go's metrics. The embedded interface, left nil,
// only satisfies grpc's rule that recorders embed an implementation.
type noopRecorder struct{ estats.MetricsRecorder }

func (noopRecorder) RecordInt64Count(*estats.Int64CountHandle, int64, ...string)             {}
func (noopRecorder) RecordFloat64Count(*estats.Float64CountHandle, float64, ...string)       {}
func (noopRecorder) RecordInt64Histo(*estats.Int64HistoHandle, int64, ...string)             {}
func (noopRecorder) RecordFloat64Histo(*estats.Float64HistoHandle, float64, ...string)       {}
func (noopRecorder) RecordInt64Gauge(*estats.Int64GaugeHandle, int64, ...string)             {}
func (noopRecorder) RecordInt64UpDownCount(*estats.Int64UpDownCountHandle, int64, ...string) {}
func (noopRecorder) RegisterAsyncReporter(estats.AsyncMetricReporter, ...estats.AsyncMetric) func() {
	return func() {}
}

// writeHeapProfile writes the heap profile to path, if set, after a GC:
// what the client holds at the end of the run.
func writeHeapProfile(path string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer f.Close()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(os.Stderr, "heap in use %d MiB, heap sys %d MiB, total sys %d MiB, GC cycles %d\n",
		ms.HeapInuse>>20, ms.HeapSys>>20, ms.Sys>>20, ms.NumGC)
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
