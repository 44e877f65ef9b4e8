package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// xdsServer is a go-control-plane ADS server (SotW and delta) on
// 127.0.0.1, serving the snapshot cache in the mode of the cell (-cache):
// non-ADS (as testutils.ManagementServer does: a client may ask for a
// subset and is answered) or ADS (a SotW request is answered only once it
// names every resource of its type), with every request and response
// reported to a tracker and every byte on the wire counted.
type xdsServer struct {
	// Read-only after startServer.
	addr   string
	cache  cache.SnapshotCache
	xs     serverv3.Server
	wire   *wireStats
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	gs      *grpc.Server   // guarded by mu
	serving sync.WaitGroup // Serve goroutines
}

func startServer(tr *tracker, ads bool) (*xdsServer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &xdsServer{
		cache:  cache.NewSnapshotCache(ads, cache.IDHash{}, nil),
		wire:   tr.wire,
		ctx:    ctx,
		cancel: cancel,
	}
	s.xs = serverv3.NewServer(ctx, s.cache, tr.callbacks())
	if err := s.listen("127.0.0.1:0"); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

func (s *xdsServer) listen(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("management server: %w", err)
	}
	gs := grpc.NewServer(
		grpc.StatsHandler(s.wire),
		grpc.MaxRecvMsgSize(256<<20),
	)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, s.xs)
	s.mu.Lock()
	s.addr, s.gs = lis.Addr().String(), gs
	s.mu.Unlock()
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = gs.Serve(lis)
	}()
	return nil
}

// set makes snap what the client sees, pushing it to open watches.
func (s *xdsServer) set(snap *snapshot) error {
	return s.cache.SetSnapshot(s.ctx, nodeID, snap)
}

// restart drops every connection, as a server restart would, and serves
// the same cache on the same address again.
func (s *xdsServer) restart() error {
	s.mu.Lock()
	gs, addr := s.gs, s.addr
	s.mu.Unlock()
	gs.Stop()
	return s.listen(addr)
}

func (s *xdsServer) stop() {
	s.mu.Lock()
	gs := s.gs
	s.mu.Unlock()
	gs.Stop()
	s.cancel()
	s.serving.Wait()
}

// wireStats counts the bytes of every message, as gRPC puts them on the
// wire, in each direction.
type wireStats struct {
	in, out atomic.Int64 // client → server, server → client
}

func (w *wireStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (w *wireStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (w *wireStats) HandleConn(context.Context, stats.ConnStats) {}
func (w *wireStats) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.InPayload:
		w.in.Add(int64(p.WireLength))
	case *stats.OutPayload:
		w.out.Add(int64(p.WireLength))
	}
}

// callbacks reports the server's events to the tracker.
func (t *tracker) callbacks() serverv3.CallbackFuncs {
	return serverv3.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			t.streamOpened(false)
			return nil
		},
		DeltaStreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			t.streamOpened(true)
			return nil
		},
		StreamRequestFunc: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			t.request(req.GetTypeUrl(), len(req.GetResourceNames()), req.GetResponseNonce(), req.GetVersionInfo(), req.GetErrorDetail() != nil)
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			t.sotwResponse(resp)
		},
		StreamDeltaRequestFunc: func(_ int64, req *discoveryv3.DeltaDiscoveryRequest) error {
			names := len(req.GetResourceNamesSubscribe()) + len(req.GetResourceNamesUnsubscribe()) + len(req.GetInitialResourceVersions())
			t.request(req.GetTypeUrl(), names, req.GetResponseNonce(), "", req.GetErrorDetail() != nil)
			return nil
		},
		StreamDeltaResponseFunc: func(_ int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
			t.deltaResponse(resp)
		},
	}
}
