package testutils

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// ManagementServerOptions configures StartManagementServer. The zero value
// serves from per-node snapshots on a free port of 127.0.0.1 and logs nothing.
//
// The On* hooks let a test watch what the server sees. go-control-plane calls
// them synchronously on the stream's goroutine, so they must not block for
// long and must not modify the messages they are given. Stream IDs are
// counted separately for SotW and delta streams, both from 1.
type ManagementServerOptions struct {
	// Address is where to listen. "" means "127.0.0.1:0", a free port; a
	// fixed address lets a test stop a server and start another in its place.
	Address string
	// Logger receives go-control-plane's log lines. nil drops them.
	Logger *slog.Logger
	// HeartbeatInterval, if positive, makes the server resend every resource
	// that has a TTL (see Resources.TTLs) this often as a heartbeat: a
	// discovery.v3.Resource with the ttl but no body. Not with Linear.
	HeartbeatInterval time.Duration
	// Linear serves from go-control-plane's LinearCache (one per node and
	// type) instead of its snapshot cache. Resource versions are then counters
	// per type, a SotW response for RDS or EDS carries only the resources that
	// changed (the protocol allows it; the snapshot cache always resends all
	// requested ones), a SotW subscription to a type with no resources is
	// answered with an empty response instead of silence, and TTLs are
	// refused.
	Linear bool
	// ADS runs go-control-plane's snapshot cache in its ADS mode, as an
	// Envoy fleet's server would: responses are sent in the order Envoy
	// warms resources (CDS, EDS, LDS, RDS), and a SotW request that names
	// resources (rather than the wildcard) is answered only once it names
	// every resource of its type in the snapshot; a client asking for some
	// of them hears nothing. Not with Linear.
	ADS bool
	// Initial is what each node (by ID) is served from the first stream:
	// StartManagementServer sets it as Update would before it serves. A
	// server that serves first and is given its resources after answers
	// the clients that come in between from nothing: the linear cache tells
	// a delta stream that the resources it holds were removed, and a SotW
	// request to the snapshot cache carrying
	// the version the snapshot is then set at (a restarted server counts
	// from "1" again) is never answered (go-control-plane v0.14's
	// SetSnapshot answers a waiting watch only if the version differs; see
	// envoyproxy/go-control-plane#1356). A test that restarts a server at
	// its address, as a control plane restarts with its configuration
	// loaded, gives it Initial.
	Initial map[string]Resources

	// OnStreamOpen is called when a client opens a stream; an error ends the
	// stream with it.
	OnStreamOpen func(streamID int64, delta bool) error
	// OnStreamClosed is called when a stream ends.
	OnStreamClosed func(streamID int64, delta bool)
	// OnStreamRequest is called for every SotW request, before the server
	// acts on it; an error ends the stream with it.
	OnStreamRequest func(streamID int64, req *discoveryv3.DiscoveryRequest) error
	// OnStreamResponse is called just before a SotW response is sent, with
	// the request that caused it.
	OnStreamResponse func(streamID int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse)
	// OnDeltaRequest is called for every delta request; an error ends the
	// stream with it.
	OnDeltaRequest func(streamID int64, req *discoveryv3.DeltaDiscoveryRequest) error
	// OnDeltaResponse is called just before a delta response is sent.
	OnDeltaResponse func(streamID int64, req *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse)

	// GRPCServerOptions are added to the options of the server's
	// grpc.Server: grpc.Creds to serve over TLS (a PKI's certificate), an
	// interceptor that checks the credentials a client sends on its calls.
	GRPCServerOptions []grpc.ServerOption

	// LoadReporting, if set, is served as the load reporting service
	// beside go-control-plane's, which has none: clusters with
	// lrs_server self report to it (an LRSServer, say).
	LoadReporting lrsv3.LoadReportingServiceServer
}

// Counters counts what a ManagementServer has seen since it started.
type Counters struct {
	Streams        int64 // SotW streams opened
	DeltaStreams   int64 // delta streams opened
	OpenStreams    int64 // streams of either kind open now
	Requests       int64 // SotW requests received
	Responses      int64 // SotW responses sent
	DeltaRequests  int64 // delta requests received
	DeltaResponses int64 // delta responses sent
	NACKs          int64 // requests of either kind that carried error_detail
}

// ManagementServer is an xDS management server built from go-control-plane's
// own server and caches, serving SotW and delta ADS (and the per-type
// services of listeners, routes, scoped routes, virtual hosts, clusters,
// endpoints, secrets and runtime) over insecure gRPC unless
// GRPCServerOptions say otherwise. Its methods are safe for
// concurrent use.
type ManagementServer struct {
	// Read-only after StartManagementServer.
	addr     string
	gs       *grpc.Server
	cancel   context.CancelFunc  // stops heartbeats and go-control-plane's loops
	xds      serverv3.Server     // go-control-plane's server, for RESTServer
	snapshot cache.SnapshotCache // nil with Linear
	linear   *linearCaches       // nil without Linear
	serving  sync.WaitGroup      // the Serve goroutine
	stopOnce sync.Once
	// versionPrefix starts every snapshot version: "" for a ManagementServer,
	// unique to the instance for a RESTServer (see there).
	versionPrefix string

	// Atomic counters behind Counters.
	streams, deltaStreams, open          atomic.Int64
	requests, responses                  atomic.Int64
	deltaRequests, deltaResponses, nacks atomic.Int64

	// Guarded by mu, which also serializes Update.
	mu      sync.Mutex
	updates int                  // Update calls so far; the source of versions
	nodes   map[string]*snapshot // last snapshot per node (snapshot mode)
}

// StartManagementServer starts a management server that serves
// opts.Initial, and nothing else until Update gives it resources. Call Stop
// when done.
func StartManagementServer(opts ManagementServerOptions) (*ManagementServer, error) {
	if opts.Linear && opts.HeartbeatInterval > 0 {
		return nil, errors.New("testutils: HeartbeatInterval needs the snapshot cache, not Linear")
	}
	if opts.Linear && opts.ADS {
		return nil, errors.New("testutils: ADS is a mode of the snapshot cache, not of Linear")
	}
	lis, err := net.Listen("tcp", cmp.Or(opts.Address, "127.0.0.1:0"))
	if err != nil {
		return nil, fmt.Errorf("testutils: management server: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	s := &ManagementServer{
		addr:   lis.Addr().String(),
		cancel: cancel,
		nodes:  make(map[string]*snapshot),
	}
	logger := slogAdapter{opts.Logger}
	var c cache.Cache
	switch {
	case opts.Linear:
		s.linear = &linearCaches{caches: make(map[linearKey]*cache.LinearCache), log: logger}
		c = s.linear
	case opts.HeartbeatInterval > 0:
		s.snapshot = cache.NewSnapshotCacheWithHeartbeating(ctx, opts.ADS, cache.IDHash{}, logger, opts.HeartbeatInterval)
		c = s.snapshot
	default:
		s.snapshot = cache.NewSnapshotCache(opts.ADS, cache.IDHash{}, logger)
		c = s.snapshot
	}

	// The caches as go-control-plane has them: where they fall short of the
	// protocol (an explicit "*" over SotW, envoyproxy/go-control-plane#558;
	// NACKed resources resent at once, #962) the client copes, and the tests
	// say so.
	xs := serverv3.NewServer(ctx, c, s.callbacks(opts))
	s.xds = xs
	for node, res := range opts.Initial {
		if err := s.Update(ctx, node, res); err != nil {
			cancel()
			lis.Close()
			return nil, err
		}
	}
	s.gs = grpc.NewServer(append([]grpc.ServerOption{grpc.WaitForHandlers(true)}, opts.GRPCServerOptions...)...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.gs, xs)
	listenerservice.RegisterListenerDiscoveryServiceServer(s.gs, xs)
	routeservice.RegisterRouteDiscoveryServiceServer(s.gs, xs)
	routeservice.RegisterScopedRoutesDiscoveryServiceServer(s.gs, xs)
	routeservice.RegisterVirtualHostDiscoveryServiceServer(s.gs, xs)
	clusterservice.RegisterClusterDiscoveryServiceServer(s.gs, xs)
	endpointservice.RegisterEndpointDiscoveryServiceServer(s.gs, xs)
	secretservice.RegisterSecretDiscoveryServiceServer(s.gs, xs)
	runtimeservice.RegisterRuntimeDiscoveryServiceServer(s.gs, xs)
	if opts.LoadReporting != nil {
		lrsv3.RegisterLoadReportingServiceServer(s.gs, opts.LoadReporting)
	}

	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = s.gs.Serve(lis) // returns once Stop closed the listener
	}()
	return s, nil
}

// callbacks counts events and forwards them to the hooks in opts.
func (s *ManagementServer) callbacks(opts ManagementServerOptions) serverv3.CallbackFuncs {
	opened := func(id int64, delta bool) error {
		s.open.Add(1)
		if opts.OnStreamOpen != nil {
			return opts.OnStreamOpen(id, delta)
		}
		return nil
	}
	closed := func(id int64, delta bool) {
		s.open.Add(-1)
		if opts.OnStreamClosed != nil {
			opts.OnStreamClosed(id, delta)
		}
	}
	return serverv3.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			s.streams.Add(1)
			return opened(id, false)
		},
		DeltaStreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			s.deltaStreams.Add(1)
			return opened(id, true)
		},
		StreamClosedFunc:      func(id int64, _ *corev3.Node) { closed(id, false) },
		DeltaStreamClosedFunc: func(id int64, _ *corev3.Node) { closed(id, true) },
		StreamRequestFunc: func(id int64, req *discoveryv3.DiscoveryRequest) error {
			s.requests.Add(1)
			if req.GetErrorDetail() != nil {
				s.nacks.Add(1)
			}
			if opts.OnStreamRequest != nil {
				return opts.OnStreamRequest(id, req)
			}
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			s.responses.Add(1)
			if opts.OnStreamResponse != nil {
				opts.OnStreamResponse(id, req, resp)
			}
		},
		StreamDeltaRequestFunc: func(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
			s.deltaRequests.Add(1)
			if req.GetErrorDetail() != nil {
				s.nacks.Add(1)
			}
			if opts.OnDeltaRequest != nil {
				return opts.OnDeltaRequest(id, req)
			}
			return nil
		},
		StreamDeltaResponseFunc: func(id int64, req *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
			s.deltaResponses.Add(1)
			if opts.OnDeltaResponse != nil {
				opts.OnDeltaResponse(id, req, resp)
			}
		},
	}
}

// Address returns the host:port the server listens on.
func (s *ManagementServer) Address() string { return s.addr }

// Counters returns the server's counters as they are now.
func (s *ManagementServer) Counters() Counters {
	return Counters{
		Streams:        s.streams.Load(),
		DeltaStreams:   s.deltaStreams.Load(),
		OpenStreams:    s.open.Load(),
		Requests:       s.requests.Load(),
		Responses:      s.responses.Load(),
		DeltaRequests:  s.deltaRequests.Load(),
		DeltaResponses: s.deltaResponses.Load(),
		NACKs:          s.nacks.Load(),
	}
}

// Update replaces everything node nodeID sees with res and pushes the change
// to its open streams; resources missing from res are deleted. A client hears
// nothing about types whose resources did not change, and nothing at all if
// none did. With the snapshot cache a changed type's new version is the
// number of this Update call ("1" for the first); with Linear, each type
// counts its own changes.
//
// Update does not check that res is consistent (a route may name a cluster
// res lacks), so tests can serve broken trees; it does check that every
// resource has a name, unique within its type.
func (s *ManagementServer) Update(ctx context.Context, nodeID string, res Resources) error {
	rs, err := res.byType()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates++
	if s.linear != nil {
		return s.linear.update(nodeID, rs)
	}

	version := s.versionPrefix + strconv.Itoa(s.updates)
	prev := s.nodes[nodeID]
	next := &snapshot{versions: make(map[string]string), items: rs}
	if prev != nil {
		for typeURL := range prev.items {
			if next.items[typeURL] == nil {
				// Keep the type, emptied, so that its version moves on and
				// SotW clients learn its resources are gone.
				next.items[typeURL] = make(map[string]types.ResourceWithTTL)
			}
		}
	}
	for typeURL, items := range next.items {
		if prev != nil && prev.versions[typeURL] != "" && sameResources(prev.items[typeURL], items) {
			next.versions[typeURL] = prev.versions[typeURL]
		} else {
			next.versions[typeURL] = version
		}
	}
	if err := s.snapshot.SetSnapshot(ctx, nodeID, next); err != nil {
		return fmt.Errorf("testutils: setting the snapshot of node %q: %w", nodeID, err)
	}
	s.nodes[nodeID] = next
	return nil
}

// Stop closes every connection, so that clients see their streams fail with
// status UNAVAILABLE, and returns once every stream handler has returned.
// go-control-plane's heartbeat goroutine, the only one Stop cannot wait for,
// ends as soon as Stop cancels it. Stop is idempotent.
func (s *ManagementServer) Stop() {
	s.stopOnce.Do(func() {
		// Closing connections first lets clients see the streams fail the way
		// they would if a real server went away; cancelling then ends the
		// heartbeat loop.
		s.gs.Stop()
		s.cancel()
		s.serving.Wait()
	})
}
