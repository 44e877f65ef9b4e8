package main

import (
	"context"
	"encoding/json"
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
	"github.com/goxds/xds/internal/demopki"
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
	frontendID = "frontend"
	// The SPIFFE IDs of the secure backend's and the frontend's
	// certificates.
	secureID     = "spiffe://httpmesh.demo/ns/default/sa/secure"
	frontendSPID = "spiffe://httpmesh.demo/ns/default/sa/frontend"
	// refreshInterval is how often the file_watcher providers read the
	// certificate files again (ten minutes by default).
	refreshInterval = "0.1s"
	shortTimeout    = 5 * time.Second
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
	secure   *backend // served over mTLS only
	pki      *demopki.PKI
	frontCfg *bootstrap.Config // the frontend's: its own certificate
	modes    chan modeChange
	done     chan struct{} // closed by stop: the mode changes go unread
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
	m = &mesh{out: out, modes: make(chan modeChange, 16), done: make(chan struct{})}
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
	if m.pki, err = demopki.New("httpmesh"); err != nil {
		return nil, err
	}
	srvCert, srvKey, err := m.pki.Issue("secure", secureID, false)
	if err != nil {
		return nil, err
	}
	cliCert, cliKey, err := m.pki.Issue("frontend", frontendSPID, true)
	if err != nil {
		return nil, err
	}
	if m.cfg, err = m.bootstrap(srvCert, srvKey); err != nil {
		return nil, err
	}
	m.cfg.ServerListenerResourceNameTemplate = serverTemplate
	if m.frontCfg, err = m.bootstrap(cliCert, cliKey); err != nil {
		return nil, err
	}

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
	// secure names the caller's certificate, and closes each connection
	// after its response so that every request is a new handshake: the
	// demo shows a rotated certificate reach new connections.
	if m.secure, err = m.startBackend("secure", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		c := r.TLS.PeerCertificates[0]
		fmt.Fprintf(w, "secure served %s to %v (certificate serial %x)", r.URL.Path, c.URIs, c.SerialNumber)
	}); err != nil {
		return nil, err
	}

	opts := httpxds.TransportOptions{Bootstrap: m.frontCfg, ClientOptions: quiet, Logger: m.warnings}
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
	fmt.Fprintf(out, "management server on %s; backends (httpxds.NewServer) v1 on %s, v2 on %s, bad on %s, secure (mTLS) on %s; frontend (httpxds.NewTransport) to http://%s\n\n",
		m.ms.Address(), m.v1.lis.Addr(), m.v2.lis.Addr(), m.bad.lis.Addr(), m.secure.lis.Addr(), host)
	return m, nil
}

// bootstrap is a bootstrap for the management server with two
// file_watcher certificate providers: "identity" (cert and key) and
// "roots" (the demo's CA).
func (m *mesh) bootstrap(cert, key string) (*bootstrap.Config, error) {
	cfg, err := bootstrap.Parse(testutils.BootstrapJSON(testutils.BootstrapOptions{ServerURI: m.ms.Address(), NodeID: nodeID}))
	if err != nil {
		return nil, err
	}
	id, err := json.Marshal(map[string]string{"certificate_file": cert, "private_key_file": key, "refresh_interval": refreshInterval})
	if err != nil {
		return nil, err
	}
	roots, err := json.Marshal(map[string]string{"ca_certificate_file": m.pki.CAFile})
	if err != nil {
		return nil, err
	}
	cfg.CertificateProviders = map[string]bootstrap.CertificateProvider{
		"identity": {PluginName: "file_watcher", Config: id},
		"roots":    {PluginName: "file_watcher", Config: roots},
	}
	return cfg, nil
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
		ServingModeCallback: func(addr net.Addr, a httpxds.ServingModeChangeArgs) {
			// Closing a server may tell it of its addresses; nobody
			// reads them then, and Close must not wait on that.
			select {
			case m.modes <- modeChange{addr, a}:
			case <-m.done:
			}
		},
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
	for _, b := range []*backend{m.v1, m.v2, m.bad, m.secure} {
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
		close(m.done)
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
		if m.pki != nil {
			m.pki.Remove()
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
