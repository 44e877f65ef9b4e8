package testutils

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errStopping is the status of a stream that opens while the server stops.
var errStopping = status.Error(codes.Unavailable, "testutils: fake server stopping")

// FakeServerOptions configures StartFakeServer.
type FakeServerOptions struct {
	// Address is where to listen. "" means "127.0.0.1:0", a free port; a
	// fixed address lets a test stop a server and start another in its place.
	Address string
}

// FakeServer is an xDS server with no logic: it serves both
// StreamAggregatedResources (SotW) and DeltaAggregatedResources (delta), and
// the per-type services (ListenerDiscoveryService.StreamListeners and
// DeltaListeners, and those of routes, scoped routes, virtual hosts,
// clusters, endpoints, secrets and runtime), records every request, and
// sends only what the test tells it to, exactly as given, so a test can
// script any exchange, malformed ones included.
//
// Requests can be read in three ways, each with its own cursor over the same
// records: NextRequest and NextDeltaRequest read the requests of every stream
// in the order they arrived; FakeStream.NextRequest reads those of one
// stream; Requests returns the whole history. The methods that act on "the
// current stream" (Send, SendDelta, CutStream) use the stream opened last.
//
// Its methods are safe for concurrent use.
type FakeServer struct {
	// Read-only after StartFakeServer.
	addr     string
	gs       *grpc.Server
	lis      *holdListener
	workers  sync.WaitGroup // the Serve goroutine and every stream's receiver
	stopOnce sync.Once

	// Logs with their own locks; pushes happen under mu so that all of them
	// agree on the order.
	streams     *queue[*FakeStream] // every stream, in the order opened
	sotwReqs    *queue[Request]     // SotW requests of every stream
	deltaReqs   *queue[Request]     // delta requests of every stream
	allRequests *queue[Request]     // every request; read only through all()

	mu      sync.Mutex
	stopped bool                   // guarded by mu
	last    *FakeStream            // guarded by mu: the stream opened last
	perType map[string]*FakeStream // guarded by mu: the per-type stream of each type opened last
}

// StartFakeServer starts a fake ADS server. Call Stop when done.
func StartFakeServer(opts FakeServerOptions) (*FakeServer, error) {
	lis, err := net.Listen("tcp", cmp.Or(opts.Address, "127.0.0.1:0"))
	if err != nil {
		return nil, fmt.Errorf("testutils: fake server: %w", err)
	}
	s := &FakeServer{
		addr:        lis.Addr().String(),
		lis:         &holdListener{Listener: lis},
		streams:     newQueue[*FakeStream](),
		sotwReqs:    newQueue[Request](),
		deltaReqs:   newQueue[Request](),
		allRequests: newQueue[Request](),
	}
	s.gs = grpc.NewServer(grpc.WaitForHandlers(true))
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.gs, fakeADS{s: s})
	registerPerTypeServices(s.gs, s)
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		_ = s.gs.Serve(s.lis) // returns once Stop closed the listener
	}()
	return s, nil
}

// Address returns the host:port the server listens on.
func (s *FakeServer) Address() string { return s.addr }

// fakeADS is the gRPC face of a FakeServer, kept apart so that the RPC
// methods stay out of FakeServer's API.
type fakeADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	s *FakeServer
}

func (f fakeADS) StreamAggregatedResources(gs discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	st, err := f.s.open(gs, false)
	if err != nil {
		return err
	}
	return st.serve(f.s, func() (Request, error) {
		req, err := gs.Recv()
		return Request{SotW: req}, err
	})
}

func (f fakeADS) DeltaAggregatedResources(gs discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	st, err := f.s.open(gs, true)
	if err != nil {
		return err
	}
	return st.serve(f.s, func() (Request, error) {
		req, err := gs.Recv()
		return Request{Delta: req}, err
	})
}

// open registers a new ADS stream.
func (s *FakeServer) open(gs grpc.ServerStream, delta bool) (*FakeStream, error) {
	return s.openTyped(gs, delta, "")
}

// openTyped registers a new stream: an ADS stream if typeURL is empty,
// else the per-type stream of typeURL.
func (s *FakeServer) openTyped(gs grpc.ServerStream, delta bool, typeURL string) (*FakeStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errStopping
	}
	st := &FakeStream{
		ID:      s.streams.len() + 1,
		Delta:   delta,
		TypeURL: typeURL,
		Opened:  time.Now(),
		reqs:    newQueue[Request](),
		cut:     make(chan error, 1),
		done:    make(chan struct{}),
		gs:      gs,
	}
	s.last = st
	if typeURL != "" {
		if s.perType == nil {
			s.perType = make(map[string]*FakeStream)
		}
		s.perType[typeURL] = st
	}
	s.streams.push(st)
	return st, nil
}

// record files a request received on st.
func (s *FakeServer) record(st *FakeStream, r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allRequests.push(r)
	if st.Delta {
		s.deltaReqs.push(r)
	} else {
		s.sotwReqs.push(r)
	}
	st.reqs.push(r)
}

// NextRequest waits for the next SotW request, from any stream, not yet read
// through NextRequest. It fails when ctx is done, or with ErrServerStopped
// once the server has stopped and every request has been read.
func (s *FakeServer) NextRequest(ctx context.Context) (*discoveryv3.DiscoveryRequest, error) {
	r, err := s.sotwReqs.next(ctx)
	return r.SotW, err
}

// NextDeltaRequest is NextRequest for delta requests.
func (s *FakeServer) NextDeltaRequest(ctx context.Context) (*discoveryv3.DeltaDiscoveryRequest, error) {
	r, err := s.deltaReqs.next(ctx)
	return r.Delta, err
}

// Requests returns every request received so far, of every stream, in order.
func (s *FakeServer) Requests() []Request { return s.allRequests.all() }

// NextStream waits for the next stream, of either kind, not yet returned by
// NextStream: the first call returns the first stream ever opened. It fails
// when ctx is done, or with ErrServerStopped once the server has stopped and
// every stream has been returned.
func (s *FakeServer) NextStream(ctx context.Context) (*FakeStream, error) {
	return s.streams.next(ctx)
}

// StreamCount returns how many streams clients have opened so far.
func (s *FakeServer) StreamCount() int { return s.streams.len() }

// Streams returns every stream opened so far, in order.
func (s *FakeServer) Streams() []*FakeStream { return s.streams.all() }

// current returns the stream a response of typeURL goes on: the stream
// opened last if it is an ADS stream or the per-type stream of typeURL,
// else the per-type stream of typeURL opened last.
func (s *FakeServer) current(typeURL string) (*FakeStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return nil, errors.New("testutils: no stream has opened yet")
	}
	if s.last.TypeURL == "" || s.last.TypeURL == typeURL {
		return s.last, nil
	}
	if st := s.perType[typeURL]; st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("testutils: no stream of %s has opened yet", typeURL)
}

// Send sends resp, as it is, on the current stream of its type: the stream
// opened last if that is an ADS stream, else the per-type stream of
// resp's type opened last. It must be a SotW stream that has not ended.
func (s *FakeServer) Send(resp *discoveryv3.DiscoveryResponse) error {
	st, err := s.current(resp.GetTypeUrl())
	if err != nil {
		return err
	}
	return st.Send(resp)
}

// SendDelta sends resp, as it is, on the current stream of its type (see
// Send), which must be a delta stream that has not ended.
func (s *FakeServer) SendDelta(resp *discoveryv3.DeltaDiscoveryResponse) error {
	st, err := s.current(resp.GetTypeUrl())
	if err != nil {
		return err
	}
	return st.SendDelta(resp)
}

// CutStream ends the current stream with err as its status; see
// FakeStream.Cut. When the stream opened last is a per-type stream, the
// client has one current stream per type, and CutStream ends each of them.
func (s *FakeServer) CutStream(err error) error {
	s.mu.Lock()
	cut := []*FakeStream{s.last}
	if s.last != nil && s.last.TypeURL != "" {
		cut = cut[:0]
		for _, st := range s.perType {
			cut = append(cut, st)
		}
	}
	s.mu.Unlock()
	if cut[0] == nil {
		return errors.New("testutils: no stream has opened yet")
	}
	for _, st := range cut {
		st.Cut(err)
	}
	return nil
}

// SetBlackhole switches black-hole mode. While it is on, the server accepts
// new TCP connections but never reads or writes a byte on them, so a client
// stays stuck connecting and never gets a stream. Turning it off closes the
// connections it held, and clients may then reconnect. Connections made
// before it was turned on are not affected.
func (s *FakeServer) SetBlackhole(on bool) { s.lis.setHold(on) }

// Stop closes every connection, so that clients see their streams fail with
// status UNAVAILABLE, stops the server and waits until none of its goroutines
// is left. It is idempotent.
func (s *FakeServer) Stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		// Closing the connections ends every stream's Recv and so its
		// handler, which Stop waits for. Were the handlers ended first, a
		// client could open its next stream on a connection about to close.
		s.gs.Stop()
		s.workers.Wait()
		s.streams.closeWith(ErrServerStopped)
		s.sotwReqs.closeWith(ErrServerStopped)
		s.deltaReqs.closeWith(ErrServerStopped)
	})
}

// holdListener is a net.Listener that, while hold is on, keeps the
// connections it accepts to itself instead of handing them to the server.
type holdListener struct {
	net.Listener

	mu   sync.Mutex
	hold bool
	held []net.Conn
}

func (l *holdListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if !l.hold {
			l.mu.Unlock()
			return c, nil
		}
		l.held = append(l.held, c)
		l.mu.Unlock()
	}
}

func (l *holdListener) setHold(on bool) {
	l.mu.Lock()
	l.hold = on
	var release []net.Conn
	if !on {
		release, l.held = l.held, nil
	}
	l.mu.Unlock()
	for _, c := range release {
		_ = c.Close()
	}
}

func (l *holdListener) Close() error {
	l.setHold(false)
	return l.Listener.Close()
}
