package transport

import (
	"errors"
	"log/slog"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/goxds/xds/bootstrap"
)

// muxTransport serves the types of one server over several runners: one
// stream per type (per-type gRPC, REST polling), with the aggregated types,
// if any, sharing one ADS runner per variant. Runners are made on first use
// of a type. Each runner reports the ends of its own stream, naming its
// own types, straight to the handler: whether the server as a whole is
// down, when one stream failed without an answer and another answered, is
// the handler's to judge.
type muxTransport struct {
	// Read-only after newMux.
	handler Handler
	logger  *slog.Logger
	// route returns the runner key of a type and makes its runner; ok is
	// false if the server cannot serve the type at all.
	route func(typeURL string, h Handler) (key string, make func() *runner, ok bool)
	close func() // after every runner stopped: release connections

	mu      sync.Mutex
	closed  bool                  // guarded by mu
	runners map[string]*muxRunner // by key; guarded by mu
	byType  map[string]*muxRunner // guarded by mu
	refused map[string]struct{}   // types the server cannot serve, warned about; guarded by mu
}

// muxRunner is one runner of a muxTransport.
type muxRunner struct {
	r *runner
}

func newMux(h Handler, logger *slog.Logger, route func(string, Handler) (string, func() *runner, bool), closeFn func()) *muxTransport {
	return &muxTransport{
		handler: h,
		logger:  logger,
		route:   route,
		close:   closeFn,
		runners: make(map[string]*muxRunner),
		byType:  make(map[string]*muxRunner),
		refused: make(map[string]struct{}),
	}
}

func (m *muxTransport) UpdateSubscriptions(typeURL string, add, remove []string) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	mr := m.byType[typeURL]
	if mr == nil {
		key, mk, ok := m.route(typeURL, m.handler)
		if !ok {
			_, warned := m.refused[typeURL]
			m.refused[typeURL] = struct{}{}
			m.mu.Unlock()
			if !warned {
				m.logger.Warn("the server's API type has no way to fetch this resource type", "type", typeURL)
			}
			if len(add) > 0 {
				m.handler.OnUnservable(typeURL, add, errNoService)
			}
			return
		}
		if mr = m.runners[key]; mr == nil {
			mr = &muxRunner{r: mk()}
			m.runners[key] = mr
		}
		m.byType[typeURL] = mr
	}
	m.mu.Unlock()
	mr.r.updateSubscriptions(typeURL, add, remove)
}

func (m *muxTransport) Close() {
	m.mu.Lock()
	m.closed = true
	runners := m.runners
	m.runners = nil
	m.mu.Unlock()
	for _, mr := range runners {
		mr.r.stop()
	}
	if m.close != nil {
		m.close()
	}
}

// errNoService is why the names of a type the server's API has no service
// for cannot be fetched.
var errNoService = errors.New("the server's API type has no service for this resource type")

// buildMux returns the transport of a gRPC server that has per-type streams
// (APITypeGRPC, APITypeDeltaGRPC, or per-type overrides).
func (b grpcBuilder) buildMux(server bootstrap.ServerConfig, node *corev3.Node, h Handler) (Transport, error) {
	cc, release, err := b.dial(server)
	if err != nil {
		return nil, err
	}
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	opts := b.opts
	logger := opts.Logger.With("server", server.ServerURI)
	route := func(typeURL string, h Handler) (string, func() *runner, bool) {
		api := server.APITypeFor(typeURL)
		ropts := opts
		ropts.Logger = logger.With("protocol", api.String())
		switch api {
		case bootstrap.APITypeAggregatedGRPC, bootstrap.APITypeAggregatedDeltaGRPC:
			return "ads/" + api.String(), func() *runner { return newRunner(adsProtocol(ads, api), h, node, ropts) }, true
		}
		sotw, delta, ok := perTypeService(cc, typeURL)
		if !ok || (api == bootstrap.APITypeGRPC && sotw == nil) {
			return "", nil, false
		}
		ropts.Logger = ropts.Logger.With("type", typeURL)
		var p protocol = sotwProtocol{open: sotw}
		if api == bootstrap.APITypeDeltaGRPC {
			p = deltaProtocol{open: delta}
		}
		return typeURL, func() *runner { return newRunner(p, h, node, ropts) }, true
	}
	return newMux(h, logger, route, release), nil
}
