package httpxds

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/dataplane/httppath"
	"github.com/goxds/xds/internal/serverconn"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/resources"
)

// keyMaterialTimeout bounds how long a handshake waits for a certificate
// provider that has not read its files yet.
const keyMaterialTimeout = 10 * time.Second

// listener is one address a Server serves: the Listener watch, the route
// configurations its filter chains name, and the generation in force.
//
// A generation is one Listener version served by an http.Server of its
// own, fed by the accept loop. A new version (once its route
// configurations are all held) starts a new generation and the old one is
// shut down gracefully (http.Server.Shutdown: idle connections close,
// requests in progress finish): the drain of Envoy and gRFC A36.
type listener struct {
	s    *Server
	raw  net.Listener
	name string
	// host and port are raw's address, to check the Listener's against.
	host, port string

	// rcs are the route configurations received, by name, replaced whole
	// at each change so that a request reads them without a lock.
	rcs atomic.Pointer[map[string]routeState]
	// extras caches what routes need of their protos (handler.go),
	// emptied with each change of route configurations or Listener
	// version.
	extras atomic.Pointer[sync.Map]

	mu      sync.Mutex
	mode    ServingMode
	cur     *generation               // serves new connections; nil when not serving
	pending *resources.ServerListener // waits for its route configurations
	routes  map[string]func()         // RDS watches by name: their cancel
	live    map[*generation]bool      // generations not yet stopped, draining ones too
	cancel  func()                    // the Listener watch; nil once closed
	closed  bool
}

// routeState is one RouteConfiguration a filter chain names, once
// received: the value, or why there is none.
type routeState struct {
	rc  *resources.RouteConfig
	err error
}

func newListener(s *Server, raw net.Listener, name string) *listener {
	host, port, _ := net.SplitHostPort(raw.Addr().String())
	l := &listener{s: s, raw: raw, name: name, host: host, port: port,
		routes: make(map[string]func()), live: make(map[*generation]bool)}
	l.rcs.Store(&map[string]routeState{})
	l.extras.Store(new(sync.Map))
	return l
}

// serve watches the Listener and runs the accept loop until raw fails or
// the listener is closed.
func (l *listener) serve() error {
	cancel := client.Watch(l.s.xc, resources.ListenerType, l.name, client.WatcherFuncs[*resources.Listener]{
		OnUpdate:        l.onListener,
		OnResourceError: l.notServing,
		OnAmbientError: func(err error) {
			// The Listener held stays in force (a management server
			// unreachable, an update rejected), but the operator is told.
			l.s.warn("serving goes on with the Listener held", "listener", l.name, "error", err)
		},
	})
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		return ErrServerClosed
	}
	l.cancel = cancel
	l.mu.Unlock()

	var delay time.Duration
	for {
		conn, err := l.raw.Accept()
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// As net/http does for a temporary failure: back off.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			l.close()
			l.closeAll()
			return err
		}
		delay = 0
		l.handle(conn)
	}
}

// handle gives conn to the generation in force, over TLS if its filter
// chain says so (serverconn.Handoff: one replaced meanwhile passes it on);
// a connection no chain matches is closed, as is every connection while
// not serving.
func (l *listener) handle(conn net.Conn) {
	local, lok := serverconn.AddrPort(conn.LocalAddr())
	remote, rok := serverconn.AddrPort(conn.RemoteAddr())
	if !lok || !rok {
		conn.Close()
		return
	}
	serverconn.Handoff(conn, l.current, func(g *generation) bool { return g.deliver(conn, local, remote) })
}

// current is the generation in force, nil when not serving.
func (l *listener) current() *generation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// deliver hands conn to g's server through the filter chain it matches;
// false if none matches or g's server no longer accepts.
func (g *generation) deliver(conn net.Conn, local, remote netip.AddrPort) bool {
	fc := authz.FindFilterChain(g.cfg, local, remote)
	if fc == nil {
		return false
	}
	cs := g.chains[fc]
	var c net.Conn = &chainConn{Conn: conn, cs: cs}
	if cs.tls != nil {
		// The handshake runs on the connection's own goroutine (net/http
		// starts it), reading the chain's providers then: never a
		// plaintext fallback for a chain with a DownstreamTlsContext.
		c = tls.Server(c, &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			return g.tlsConfig(hello.Context(), cs)
		}})
	}
	return g.lis.Deliver(c)
}

// onListener handles a new Listener version: it waits for the route
// configurations it names, then replaces the generation in force.
func (l *listener) onListener(res *resources.Listener) {
	sl := res.Server
	if sl == nil {
		l.notServing(l.s.configError("Listener %q is a client Listener (it has an api_listener)", l.name))
		return
	}
	// Port 0 in the Listener matches any port; the address must match.
	if sl.Address != l.host || (sl.Port != 0 && strconv.Itoa(int(sl.Port)) != l.port) {
		l.notServing(l.s.configError("Listener %q is for %s, not for the listening address %s", l.name,
			net.JoinHostPort(sl.Address, strconv.Itoa(int(sl.Port))), net.JoinHostPort(l.host, l.port)))
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.pending = sl
	cancels := l.watchRoutesLocked()
	old := l.activateLocked()
	l.mu.Unlock()
	l.after(old, cancels)
}

// watchRoutesLocked starts the RDS watches the current and pending
// versions need that are missing, and returns the cancels of those no
// longer needed, to call once the lock is released.
func (l *listener) watchRoutesLocked() []func() {
	need := make(map[string]bool)
	for _, sl := range []*resources.ServerListener{l.pending, l.cur.config()} {
		for _, n := range routeNames(sl) {
			need[n] = true
		}
	}
	var cancels []func()
	for n, c := range l.routes {
		if !need[n] {
			cancels = append(cancels, c)
			delete(l.routes, n)
			l.setRoute(n, nil)
		}
	}
	for n := range need {
		if l.routes[n] != nil {
			continue
		}
		// The client delivers a cached value through its callback queue,
		// never from inside Watch, so watching under l.mu is safe.
		l.routes[n] = client.Watch(l.s.xc, resources.RouteConfigType, n, client.WatcherFuncs[*resources.RouteConfig]{
			OnUpdate:        func(rc *resources.RouteConfig) { l.onRoute(n, routeState{rc: rc}) },
			OnResourceError: func(err error) { l.onRoute(n, routeState{err: err}) },
			// An ambient error keeps the route configuration held.
		})
	}
	return cancels
}

// setRoute replaces route configuration n's state (nil: forgets it).
// Called with l.mu held, the only writer.
func (l *listener) setRoute(n string, st *routeState) {
	old := *l.rcs.Load()
	m := make(map[string]routeState, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	if st == nil {
		delete(m, n)
	} else {
		m[n] = *st
	}
	l.rcs.Store(&m)
	l.extras.Store(new(sync.Map))
}

func routeNames(sl *resources.ServerListener) []string {
	if sl == nil {
		return nil
	}
	var out []string
	for _, fc := range servertls.Chains(sl) {
		if fc.RouteConfigName != "" {
			out = append(out, fc.RouteConfigName)
		}
	}
	return out
}

func (l *listener) onRoute(n string, st routeState) {
	l.mu.Lock()
	if l.closed || l.routes[n] == nil {
		l.mu.Unlock()
		return
	}
	l.setRoute(n, &st)
	old := l.activateLocked()
	l.mu.Unlock()
	l.after(old, nil)
}

// activateLocked makes the pending Listener current once every route
// configuration it names has been received (gRFC A36: a server does not
// use a Listener before its RDS resources). It returns the generation
// replaced, to drain.
func (l *listener) activateLocked() (old *generation) {
	v := l.pending
	if v == nil {
		return nil
	}
	rcs := *l.rcs.Load()
	for _, n := range routeNames(v) {
		if _, ok := rcs[n]; !ok {
			return nil
		}
	}
	g := l.newGeneration(v)
	old, l.cur, l.pending = l.cur, g, nil
	l.extras.Store(new(sync.Map))
	if l.mode != ServingModeServing {
		l.mode = ServingModeServing
		l.s.reports.add(modeReport{l: l, mode: ServingModeServing})
	}
	return old
}

// after cancels watches, drains a replaced generation and tells the mode
// changes queued, with no lock held.
func (l *listener) after(old *generation, cancels []func()) {
	for _, c := range cancels {
		c()
	}
	if old != nil {
		old.shutdown()
	}
	l.s.reports.flush()
}

// notServing drops every Listener version held: new connections are
// closed, open ones drained.
func (l *listener) notServing(err error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	old := l.cur
	l.cur, l.pending = nil, nil
	cancels := l.dropRoutesLocked()
	l.mode = ServingModeNotServing
	// Reported even when already not serving: the reason may have changed.
	l.s.reports.add(modeReport{l: l, mode: ServingModeNotServing, err: err})
	l.mu.Unlock()
	l.after(old, cancels)
}

func (l *listener) dropRoutesLocked() []func() {
	var cancels []func()
	for _, c := range l.routes {
		cancels = append(cancels, c)
	}
	l.routes = make(map[string]func())
	l.rcs.Store(&map[string]routeState{})
	return cancels
}

// routeConfig returns the route configuration a filter chain uses now: an
// RDS update applies to open connections.
func (l *listener) routeConfig(fc *resources.FilterChain) (*resources.RouteConfig, error) {
	if fc.InlineRouteConfig != nil {
		return fc.InlineRouteConfig, nil
	}
	st, ok := (*l.rcs.Load())[fc.RouteConfigName]
	switch {
	case !ok:
		return nil, errors.New("route configuration " + strconv.Quote(fc.RouteConfigName) + " is not held")
	case st.rc == nil:
		return nil, errors.New("route configuration " + strconv.Quote(fc.RouteConfigName) + ": " + st.err.Error())
	}
	return st.rc, nil
}

// close stops the watches and the accept loop, and shuts the generation
// in force down gracefully; closeAll then ends what is left.
func (l *listener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	cancel := l.cancel
	g := l.cur
	l.cur, l.pending = nil, nil
	cancels := l.dropRoutesLocked()
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, c := range cancels {
		c()
	}
	l.raw.Close()
	if g != nil {
		g.shutdown()
	}
}

// closeAll closes every generation not yet stopped, draining ones too.
func (l *listener) closeAll() {
	l.mu.Lock()
	gs := make([]*generation, 0, len(l.live))
	for g := range l.live {
		gs = append(gs, g)
	}
	l.mu.Unlock()
	for _, g := range gs {
		g.srv.Close()
		g.stopped()
	}
}

// generation is one Listener version being served.
type generation struct {
	l      *listener
	cfg    *resources.ServerListener
	lis    *serverconn.ChanListener
	srv    *http.Server
	chains map[*resources.FilterChain]*chainState
	// ctx ends when the generation stops, ending the handshakes that wait
	// for its certificate providers.
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// chainState is what a generation keeps of one filter chain: its TLS (nil
// without a DownstreamTlsContext) and how it normalizes paths.
type chainState struct {
	fc   *resources.FilterChain
	tls  *servertls.Chain
	norm httppath.Options
	// strip is the chain's strip_*_host_port; port the listener's port,
	// which strip_matching_host_port drops.
	strip resources.HostPortStrip
	port  int
}

// newGeneration serves cfg. Called with l.mu held: it builds nothing that
// can block (certificate providers are built on demand).
func (l *listener) newGeneration(cfg *resources.ServerListener) *generation {
	s := l.s
	g := &generation{l: l, cfg: cfg, lis: serverconn.NewChanListener(l.raw.Addr()), chains: make(map[*resources.FilterChain]*chainState)}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for _, fc := range servertls.Chains(cfg) {
		cs := &chainState{fc: fc, norm: httppath.Resolve(fc.PathNormalization), strip: fc.StripHostPort}
		cs.port, _ = strconv.Atoi(l.port)
		if fc.Security != nil {
			cs.tls = servertls.NewChain(s.b, fc, func(err error) {
				s.warn("filter chain refuses its connections", "listener", l.name, "filter_chain", fc.Name, "error", err)
			})
		}
		g.chains[fc] = cs
	}
	g.srv = s.newHTTPServer(g)
	l.live[g] = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		g.srv.Serve(g.lis) // returns once shut down or closed
	}()
	return g
}

func (g *generation) config() *resources.ServerListener {
	if g == nil {
		return nil
	}
	return g.cfg
}

// tlsConfig is the TLS of a handshake on chain cs: its providers' current
// key material, so that rotated files are used from the next handshake on.
func (g *generation) tlsConfig(ctx context.Context, cs *chainState) (*tls.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, keyMaterialTimeout)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	sec, err := cs.tls.Get(ctx)
	if err != nil {
		return nil, err
	}
	return sec.Config(ctx, []string{"h2", "http/1.1"})
}

// shutdown drains the generation: its listener closes, idle connections
// close, requests in progress finish (http.Server.Shutdown); Close ends
// what is left.
func (g *generation) shutdown() {
	s := g.l.s
	g.cancel()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		g.srv.Shutdown(context.Background())
		g.stopped()
	}()
}

// stopped releases what the generation held once its server has stopped.
func (g *generation) stopped() {
	g.once.Do(func() {
		g.cancel()
		g.l.mu.Lock()
		delete(g.l.live, g)
		g.l.mu.Unlock()
		for _, cs := range g.chains {
			if cs.tls != nil {
				cs.tls.End()
			}
		}
	})
}
