package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/httpxds"
	"github.com/goxds/xds/testutils"
)

const (
	nodeID = "httpmesh-demo"
	// host is the frontend's name for the backends: with the bootstrap's
	// default client template ("%s") it names the client Listener.
	host = "backend.mesh"
	// serverTemplate names each backend's Listener by its address.
	serverTemplate = "http/server?listening_address=%s"
	// frontendID is what the frontend's routes put in x-caller, and the
	// one caller the backends' RBAC allows.
	frontendID   = "frontend"
	shortTimeout = 5 * time.Second
	// outlierInterval is the outlier detector's interval; the demo turns
	// its Transport's clock through it instead of waiting.
	outlierInterval = 10 * time.Second
)

// backend is one instance of a service: an httpxds server on its own
// address, and how many requests its handler served.
type backend struct {
	name   string
	srv    *httpxds.Server
	lis    net.Listener
	served chan error
	hits   atomic.Int64
}

func (b *backend) port() uint32 { return uint32(b.lis.Addr().(*net.TCPAddr).Port) }

// mesh is the demo's world: the management server, the backends, and the
// frontend's two Transports (the outlier scene's runs on a clock the demo
// turns).
type mesh struct {
	out      io.Writer
	ms       *testutils.ManagementServer
	cfg      *bootstrap.Config
	v1, v2   *backend
	bad      *backend
	modes    chan modeChange
	tr       *httpxds.Transport
	hc       *http.Client
	otr      *httpxds.Transport
	ohc      *http.Client
	clock    *testutils.FakeClock
	warnings *slog.Logger
	once     sync.Once
}

type modeChange struct {
	addr net.Addr
	args httpxds.ServingModeChangeArgs
}

var quiet = client.Options{Logger: slog.New(slog.DiscardHandler), WatchExpiry: shortTimeout}

func startMesh(ctx context.Context, out io.Writer) (m *mesh, err error) {
	// The demo's lines and the warnings (below) are written from
	// different goroutines.
	out = &lockedWriter{w: out}
	m = &mesh{out: out, modes: make(chan modeChange, 16)}
	defer func() {
		if err != nil {
			m.stop()
		}
	}()
	// Routine lines stay quiet, but warnings (a configuration refused, a
	// cluster without endpoints) are shown: they say why requests fail.
	m.warnings = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if m.ms, err = testutils.StartManagementServer(testutils.ManagementServerOptions{}); err != nil {
		return nil, err
	}
	if m.cfg, err = bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: m.ms.Address(), NodeID: nodeID})); err != nil {
		return nil, err
	}
	m.cfg.ServerListenerResourceNameTemplate = serverTemplate

	answer := func(version string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "%s served %s", version, r.URL.Path) }
	}
	if m.v1, err = m.startBackend("v1", answer("v1")); err != nil {
		return nil, err
	}
	if m.v2, err = m.startBackend("v2", answer("v2")); err != nil {
		return nil, err
	}
	if m.bad, err = m.startBackend("bad", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad is down", http.StatusServiceUnavailable)
	}); err != nil {
		return nil, err
	}

	opts := httpxds.TransportOptions{Bootstrap: m.cfg, ClientOptions: quiet, Logger: m.warnings}
	if m.hc, m.tr, err = httpxds.NewClient(opts); err != nil {
		return nil, err
	}
	// The outlier scene's Transport: the same configuration, on a clock
	// the demo advances through the detector's interval (10 s, as is
	// usual) rather than sleeping through it.
	m.clock = testutils.NewFakeClock(time.Now())
	opts.Clock = m.clock
	if m.ohc, m.otr, err = httpxds.NewClient(opts); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "management server on %s; backends (httpxds.NewServer) v1 on %s, v2 on %s, bad on %s; frontend (httpxds.NewTransport) to http://%s\n\n",
		m.ms.Address(), m.v1.lis.Addr(), m.v2.lis.Addr(), m.bad.lis.Addr(), host)
	return m, nil
}

// startBackend serves h on a new 127.0.0.1 address with an httpxds
// server, counting the requests h serves.
func (m *mesh) startBackend(name string, h http.HandlerFunc) (*backend, error) {
	b := &backend{name: name, served: make(chan error, 1)}
	counted := func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		h(w, r)
	}
	srv, err := httpxds.NewServer(http.HandlerFunc(counted), httpxds.Options{
		Bootstrap: m.cfg, ClientOptions: quiet, Logger: m.warnings,
		ServingModeCallback: func(addr net.Addr, a httpxds.ServingModeChangeArgs) { m.modes <- modeChange{addr, a} },
	})
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	b.srv, b.lis = srv, lis
	go func() { b.served <- srv.Serve(lis) }()
	return b, nil
}

func (m *mesh) backends() []*backend {
	var bs []*backend
	for _, b := range []*backend{m.v1, m.v2, m.bad} {
		if b != nil {
			bs = append(bs, b)
		}
	}
	return bs
}

// waitServing waits until every backend reports serving.
func (m *mesh) waitServing(ctx context.Context) error {
	pending := make(map[string]bool)
	for _, b := range m.backends() {
		pending[b.lis.Addr().String()] = true
	}
	for len(pending) > 0 {
		select {
		case c := <-m.modes:
			if c.args.Mode != httpxds.ServingModeServing {
				return fmt.Errorf("backend on %v is %v: %v", c.addr, c.args.Mode, c.args.Err)
			}
			delete(pending, c.addr.String())
		case <-ctx.Done():
			return fmt.Errorf("backends never all served (%d left): %w", len(pending), ctx.Err())
		}
	}
	return nil
}

func (m *mesh) stop() {
	m.once.Do(func() {
		if m.tr != nil {
			m.tr.Close()
		}
		if m.otr != nil {
			m.otr.Close()
		}
		for _, b := range m.backends() {
			b.srv.Close()
			if err := <-b.served; err != nil && !errors.Is(err, httpxds.ErrServerClosed) {
				fmt.Fprintf(m.out, "backend %s: %v\n", b.name, err)
			}
		}
		if m.ms != nil {
			m.ms.Stop()
		}
	})
}

// lockedWriter writes to w one Write at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
