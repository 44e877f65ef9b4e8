package httpxds

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"

	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/dataplane/httppath"
	"github.com/goxds/xds/internal/serverlds"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/resources"
)

// listener is one address a Server serves. The Listener watch, its route
// configurations, the serving modes and the swap of generations are
// internal/serverlds's, shared with xdsserver; what is HTTP's is here: a
// generation is one Listener version served by an http.Server of its own,
// and the one a new version replaces is shut down gracefully
// (http.Server.Shutdown: idle connections close, requests in progress
// finish), the drain of Envoy and gRFC A36.
type listener struct {
	s    *Server
	core *serverlds.Listener[*generation]
	// port is the listening port, which strip_matching_host_port drops.
	port int
}

var _ serverlds.Server[*generation] = (*listener)(nil)

func newListener(s *Server, raw net.Listener, name string) *listener {
	l := &listener{s: s}
	if _, p, err := net.SplitHostPort(raw.Addr().String()); err == nil {
		l.port, _ = strconv.Atoi(p)
	}
	l.core = serverlds.New(serverlds.Config[*generation]{Client: s.xc, Bootstrap: s.b, Raw: raw, Name: name, Server: l, Reports: s.reports, Applied: s.applied,
		Side: &s.authzChannels})
	return l
}

// generation is one Listener version being served.
type generation struct {
	l      *listener
	gen    *serverlds.Generation
	srv    *http.Server
	chains map[*resources.FilterChain]*chainState
	// fresh are its connections that have had no request yet, which a
	// drain waits for.
	fresh *freshConns
	// closed is closed when the generation is stopped at once, ending a
	// drain's wait.
	closed    chan struct{}
	closeOnce sync.Once
}

// chainState is what a generation keeps of one filter chain: whether its
// connections are TLS (a DownstreamTlsContext) and how it normalizes
// paths.
type chainState struct {
	fc   *resources.FilterChain
	tls  bool
	norm httppath.Options
	// strip is the chain's strip_*_host_port; port the listener's port,
	// which strip_matching_host_port drops.
	strip resources.HostPortStrip
	port  int
	// stripDot is the chain's strip_trailing_host_dot.
	stripDot bool
}

// Start implements serverlds.Server: an http.Server serving gen's
// version. Called with the core's lock held: it builds nothing that can
// block.
func (l *listener) Start(gen *serverlds.Generation) *generation {
	s := l.s
	g := &generation{l: l, gen: gen, chains: make(map[*resources.FilterChain]*chainState),
		fresh: newFreshConns(), closed: make(chan struct{})}
	for _, fc := range servertls.Chains(gen.Config) {
		g.chains[fc] = &chainState{fc: fc, tls: gen.HasTLS(fc), norm: httppath.Resolve(fc.PathNormalization),
			strip: fc.StripHostPort, port: l.port, stripDot: fc.StripTrailingHostDot}
	}
	g.srv = s.newHTTPServer(g)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		g.srv.Serve(gen.Lis) // returns once shut down or closed
	}()
	return g
}

// Stop implements serverlds.Server: gracefully, the generation's listener
// closes, idle connections close, the others after their next response
// (Connection: close), and once every connection has had its first
// request (or freshWait has passed) the server is shut down
// (http.Server.Shutdown: HTTP/2 connections are told GOAWAY, requests in
// progress finish); otherwise (or to end that) at once.
func (l *listener) Stop(g *generation, graceful bool) {
	if !graceful {
		g.closeOnce.Do(func() { close(g.closed) })
		g.srv.Close()
		l.core.Stopped(g)
		return
	}
	s := l.s
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// No new connection: Handoff gives the next to the version in
		// force.
		g.gen.Lis.Close()
		g.srv.SetKeepAlivesEnabled(false)
		g.fresh.wait(g.closed)
		g.srv.Shutdown(context.Background())
		l.core.Stopped(g)
	}()
}

// Deliver implements serverlds.Server: it hands conn to g's server
// through the filter chain it matches, over TLS if the chain says so.
func (l *listener) Deliver(g *generation, conn net.Conn, local, remote netip.AddrPort) bool {
	fc := authz.FindFilterChain(g.gen.Config, local, remote)
	if fc == nil {
		return false
	}
	cs := g.chains[fc]
	cc := &chainConn{Conn: conn, cs: cs, fresh: g.fresh}
	g.fresh.add()
	var c net.Conn = cc
	if cs.tls {
		// The handshake runs on the connection's own goroutine (net/http
		// starts it), reading the chain's providers then: never a
		// plaintext fallback for a chain with a DownstreamTlsContext.
		c = tls.Server(c, &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cfg, err := g.gen.TLSConfig(hello.Context(), fc, []string{"h2", "http/1.1"})
			if cfg != nil {
				// What the handshake serves, for ext_authz's destination
				// principal: http.Request.TLS has only the client's.
				cc.leaf.Store(servertls.Served(cfg, hello))
			}
			return cfg, err
		}})
	}
	if !g.gen.Lis.Deliver(c) {
		cc.served() // not this generation's to wait for
		return false
	}
	return true
}

// NotServerListener implements serverlds.Server.
func (l *listener) NotServerListener(name string) error {
	return l.s.configError("Listener %q is a client Listener (it has an api_listener)", name)
}

// WrongAddress implements serverlds.Server.
func (l *listener) WrongAddress(name, addr, listening string) error {
	return l.s.configError("Listener %q is for %s, not for the listening address %s", name, addr, listening)
}

// Warn implements serverlds.Server.
func (l *listener) Warn(msg string, args ...any) { l.s.warn(msg, args...) }
