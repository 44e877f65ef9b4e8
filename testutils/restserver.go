package testutils

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// RESTServerOptions configures StartRESTServer. The zero value serves on a
// free port of 127.0.0.1, answers at once, and logs nothing.
type RESTServerOptions struct {
	// Address is where to listen. "" means "127.0.0.1:0", a free port; a
	// fixed address lets a test stop a server and start another in its place.
	Address string
	// Logger receives go-control-plane's log lines. nil drops them.
	Logger *slog.Logger
	// LongPoll, if positive, makes the server hold a request for which
	// nothing changed until an Update changes it, or for LongPoll at most,
	// and only then answer 304 Not Modified. Zero answers 304 at once, as
	// go-control-plane's REST handler does.
	LongPoll time.Duration
	// OnRequest is called with every request, decoded, before the server
	// acts on it. A non-nil error is answered with HTTP status 503 and the
	// error's text, for tests of a failing server.
	OnRequest func(req *discoveryv3.DiscoveryRequest) error
	// OnResponse is called after the server answered a request: with the
	// HTTP status, and with the response for a 200.
	OnResponse func(req *discoveryv3.DiscoveryRequest, status int, resp *discoveryv3.DiscoveryResponse)
}

// RESTServer is an xDS server speaking REST-JSON (POST
// /v3/discovery:listeners, :routes, :clusters, :endpoints, :secrets,
// :runtime, :scoped-routes) through go-control-plane's REST handler, over the
// same snapshot cache as ManagementServer, on plain HTTP. Its methods are
// safe for concurrent use.
//
// Versions are those of ManagementServer.Update with a prefix unique to the
// server ("r1-3": the first REST server's third update), as content hashes
// would be: a REST client has no stream whose start tells a server it knows
// nothing, only the version it last accepted, so a restarted server that
// counted versions from "1" again would answer it "nothing changed".
//
// Polls reach go-control-plane's handler as the client sent them. One that
// carries error_detail (a NACK) is answered at once with the rejected
// resources (the NACK's version is not the cache's,
// envoyproxy/go-control-plane#962): the client must pace its NACKs. One
// naming "*" is answered with the resources of the other names it lists,
// if any: the snapshot cache filters by the literal names
// (envoyproxy/go-control-plane#558), so a client sends the wildcard alone as
// an empty list.
type RESTServer struct {
	// Read-only after StartRESTServer.
	ms       *ManagementServer
	gateway  *serverv3.HTTPGateway
	opts     RESTServerOptions
	url      string
	hs       *http.Server
	serving  sync.WaitGroup
	stopOnce sync.Once
	stopped  chan struct{}

	mu       sync.Mutex
	changed  chan struct{}  // closed and replaced by every Update; guarded by mu
	closing  bool           // Stop has begun; guarded by mu
	handlers sync.WaitGroup // requests being served; Add under mu while !closing
}

// restServers numbers the REST servers of the process, to make their
// versions unique.
var restServers atomic.Int64

// StartRESTServer starts a REST server that serves nothing until Update
// gives it resources. Call Stop when done.
func StartRESTServer(opts RESTServerOptions) (*RESTServer, error) {
	ms, err := StartManagementServer(ManagementServerOptions{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	ms.versionPrefix = fmt.Sprintf("r%d-", restServers.Add(1))
	lis, err := net.Listen("tcp", cmp.Or(opts.Address, "127.0.0.1:0"))
	if err != nil {
		ms.Stop()
		return nil, fmt.Errorf("testutils: REST server: %w", err)
	}
	s := &RESTServer{
		ms:      ms,
		gateway: &serverv3.HTTPGateway{Server: ms.xds},
		opts:    opts,
		url:     "http://" + lis.Addr().String(),
		stopped: make(chan struct{}),
		changed: make(chan struct{}),
	}
	s.hs = &http.Server{Handler: http.HandlerFunc(s.serveHTTP)}
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = s.hs.Serve(lis) // returns once Stop closed the listener
	}()
	return s, nil
}

// URL returns the server's base URL, "http://127.0.0.1:port", the
// server_uri of a REST server in a bootstrap.
func (s *RESTServer) URL() string { return s.url }

// Address returns the host:port the server listens on.
func (s *RESTServer) Address() string { return s.url[len("http://"):] }

// Update replaces everything node nodeID sees with res, as
// ManagementServer.Update does, and answers the long polls it changes.
func (s *RESTServer) Update(ctx context.Context, nodeID string, res Resources) error {
	if err := s.ms.Update(ctx, nodeID, res); err != nil {
		return err
	}
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// Stop closes every connection, long polls included, and returns once no
// request is being served. It is idempotent.
func (s *RESTServer) Stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		_ = s.hs.Close() // ends the polls being held, unanswered
		close(s.stopped)
		s.serving.Wait()
		s.handlers.Wait()
		s.ms.Stop()
	})
}

func (s *RESTServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		http.Error(w, "stopping", http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &discoveryv3.DiscoveryRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		http.Error(w, "cannot parse JSON body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s.opts.OnRequest != nil {
		if err := s.opts.OnRequest(req); err != nil {
			s.answer(w, req, http.StatusServiceUnavailable, []byte(err.Error()), nil)
			return
		}
	}
	var deadline <-chan time.Time
	if s.opts.LongPoll > 0 {
		t := time.NewTimer(s.opts.LongPoll)
		defer t.Stop()
		deadline = t.C
	}
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		gr := r.Clone(r.Context())
		gr.Body = io.NopCloser(bytes.NewReader(body))
		out, status, err := s.gateway.ServeHTTP(gr)
		if status != http.StatusNotModified || deadline == nil {
			if err != nil {
				out = []byte(err.Error())
			}
			var resp *discoveryv3.DiscoveryResponse
			if status == http.StatusOK {
				resp = &discoveryv3.DiscoveryResponse{}
				if protojson.Unmarshal(out, resp) != nil {
					resp = nil
				}
			}
			s.answer(w, req, status, out, resp)
			return
		}
		select {
		case <-changed:
		case <-deadline:
			s.answer(w, req, http.StatusNotModified, nil, nil)
			return
		case <-r.Context().Done():
			return
		case <-s.stopped:
			s.answer(w, req, http.StatusServiceUnavailable, []byte("testutils: REST server stopping"), nil)
			return
		}
	}
}

func (s *RESTServer) answer(w http.ResponseWriter, req *discoveryv3.DiscoveryRequest, status int, body []byte, resp *discoveryv3.DiscoveryResponse) {
	if status == http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	if status != http.StatusNotModified {
		_, _ = w.Write(body)
	}
	if s.opts.OnResponse != nil {
		s.opts.OnResponse(req, status, resp)
	}
}
