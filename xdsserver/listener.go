package xdsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/dataplane/authz"
	"github.com/goxds/xds/internal/serverconn"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/resources"
)

// listener is one address a GRPCServer serves: the Listener watch, the
// route configurations its filter chains name, and the generation in
// force.
//
// A generation is one Listener version served by a grpc.Server of its own,
// fed by the accept loop. A new Listener version starts a new generation
// (once its route configurations are all held) and the old one is stopped
// with grpc.Server.GracefulStop: its connections get a GOAWAY and close
// when their RPCs are done. That is how grpc-go drains connections on a
// Listener change, done with public API only.
type listener struct {
	s    *GRPCServer
	raw  net.Listener
	name string
	// host and port are raw's address, to check the Listener's against.
	host, port string

	mu sync.Mutex
	// mode is the current serving mode.
	mode ServingMode
	// cur serves new connections; nil when not serving.
	cur *generation
	// pending is the Listener version that waits for its route
	// configurations; nil when none waits.
	pending *resources.ServerListener
	// routes are the RDS watches the current and pending versions need.
	routes map[string]*routeWatch
	// cancelLDS ends the Listener watch; nil once closed.
	cancelLDS func()
	closed    bool
	graceful  bool

	// logged and loggedReason are the last mode logged without a
	// ServingModeCallback, and its reason; only flushReports, one
	// goroutine at a time, touches them.
	logged       ServingMode
	loggedReason string
}

// routeWatch is one RouteConfiguration a filter chain names.
type routeWatch struct {
	cancel   func()
	received bool
	rc       *resources.RouteConfig // nil when it does not exist or is invalid
	err      error
}

func newListener(s *GRPCServer, raw net.Listener, name string) *listener {
	host, port, _ := net.SplitHostPort(raw.Addr().String())
	return &listener{s: s, raw: raw, name: name, host: host, port: port, routes: make(map[string]*routeWatch)}
}

// serve watches the Listener and runs the accept loop until raw fails or
// the listener is closed.
func (l *listener) serve() error {
	cancel := client.Watch(l.s.xc, resources.ListenerType, l.name, client.WatcherFuncs[*resources.Listener]{
		OnUpdate:        l.onListener,
		OnResourceError: l.onListenerError,
		OnAmbientError:  l.onListenerAmbientError,
	})
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		return nil
	}
	l.cancelLDS = cancel
	l.mu.Unlock()

	var delay time.Duration
	for {
		conn, err := l.raw.Accept()
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// As net/http and grpc do for a temporary failure
				// (out of file descriptors): back off and retry.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			l.close(false)
			return err
		}
		delay = 0
		l.handle(conn)
	}
}

// handle gives conn to the generation in force, if its filter chain
// matches it (serverconn.Handoff: one replaced meanwhile passes it on);
// otherwise it closes it.
func (l *listener) handle(conn net.Conn) {
	local, lok := serverconn.AddrPort(conn.LocalAddr())
	remote, rok := serverconn.AddrPort(conn.RemoteAddr())
	if !lok || !rok {
		conn.Close()
		return
	}
	serverconn.Handoff(conn, l.current, func(g *generation) bool {
		fc := authz.FindFilterChain(g.cfg, local, remote)
		if fc == nil {
			return false // no chain for this peer
		}
		return g.lis.Deliver(&chainConn{Conn: conn, tls: g.sec[fc], stopped: g.ctx})
	})
}

// current is the generation in force, nil when not serving.
func (l *listener) current() *generation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// onListener handles a new Listener version: it waits for the route
// configurations it names, then replaces the generation in force.
func (l *listener) onListener(res *resources.Listener) {
	sl := res.Server
	if sl == nil {
		l.notServing(l.s.configError("received client-side listener resource %q on server-side (it has an api_listener)", l.name))
		return
	}
	// Port 0 in the Listener matches any port; the address must match.
	if sl.Address != l.host || (sl.Port != 0 && strconv.Itoa(int(sl.Port)) != l.port) {
		l.notServing(l.s.configError("address (%s) in Listener update does not match listening address: (%s): Listener %q",
			net.JoinHostPort(sl.Address, strconv.Itoa(int(sl.Port))), net.JoinHostPort(l.host, l.port), l.name))
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.pending = sl
	var cancels []func()
	l.routes, cancels = l.watchRoutesLocked(sl)
	old := l.activateLocked()
	l.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	l.after(old)
}

// watchRoutesLocked returns the route watches the current and pending
// Listeners need, starting the missing ones, and the cancel functions of
// those no longer needed, to call once the lock is released.
func (l *listener) watchRoutesLocked(pending *resources.ServerListener) (map[string]*routeWatch, []func()) {
	need := make(map[string]bool)
	for _, sl := range []*resources.ServerListener{pending, l.cur.config()} {
		for _, n := range routeNames(sl) {
			need[n] = true
		}
	}
	routes := make(map[string]*routeWatch, len(need))
	var cancels []func()
	for n, w := range l.routes {
		if need[n] {
			routes[n] = w
		} else {
			cancels = append(cancels, w.cancel)
		}
	}
	for n := range need {
		if routes[n] != nil {
			continue
		}
		w := &routeWatch{}
		routes[n] = w
		// The client delivers a cached value through its callback queue,
		// never from inside Watch, so watching under l.mu is safe.
		w.cancel = client.Watch(l.s.xc, resources.RouteConfigType, n, client.WatcherFuncs[*resources.RouteConfig]{
			OnUpdate:        func(rc *resources.RouteConfig) { l.onRoute(w, rc, nil) },
			OnResourceError: func(err error) { l.onRoute(w, nil, err) },
		})
	}
	return routes, cancels
}

func routeNames(sl *resources.ServerListener) []string {
	if sl == nil {
		return nil
	}
	var out []string
	for _, fc := range sl.FilterChains {
		if fc.RouteConfigName != "" {
			out = append(out, fc.RouteConfigName)
		}
	}
	if fc := sl.DefaultFilterChain; fc != nil && fc.RouteConfigName != "" {
		out = append(out, fc.RouteConfigName)
	}
	return out
}

func (l *listener) onRoute(w *routeWatch, rc *resources.RouteConfig, err error) {
	l.mu.Lock()
	if l.closed || l.routes[routeKey(l.routes, w)] != w {
		l.mu.Unlock()
		return
	}
	w.received, w.rc, w.err = true, rc, err
	old := l.activateLocked()
	l.mu.Unlock()
	l.after(old)
}

// routeKey finds w's name in routes ("" if it is no longer there).
func routeKey(routes map[string]*routeWatch, w *routeWatch) string {
	for n, x := range routes {
		if x == w {
			return n
		}
	}
	return ""
}

// activateLocked makes the pending Listener current once every route
// configuration it names has been received (gRFC A36: a server does not
// use a Listener before its RDS resources). Certificate providers are not
// waited for: a chain's are built by the first handshake that asks for
// them (servertls.Chain). It returns the generation replaced, to drain, and queues the
// report if the mode became serving.
func (l *listener) activateLocked() (old *generation) {
	v := l.pending
	if v == nil {
		return nil
	}
	for _, n := range routeNames(v) {
		if !l.routes[n].received {
			return nil
		}
	}
	g := newGeneration(l, v)
	old, l.cur, l.pending = l.cur, g, nil
	if l.mode != ServingModeServing {
		l.mode = ServingModeServing
		l.s.queueReportLocked(modeReport{l: l, mode: ServingModeServing})
	}
	return old
}

// after drains a replaced generation and tells the mode changes queued,
// with no lock held.
func (l *listener) after(old *generation) {
	if old != nil {
		old.stop(true)
	}
	l.s.flushReports()
}

func (l *listener) onListenerError(err error) { l.notServing(err) }

// onListenerAmbientError leaves the Listener held in force: a management
// server unreachable, an update rejected, or (gRFC A88) a deletion by a
// server not marked fail_on_data_errors. Serving goes on, but the operator
// is told, since the server no longer follows its configuration.
func (l *listener) onListenerAmbientError(err error) {
	l.s.warn("serving goes on with the Listener held", "listener", l.name, "error", err)
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
	var cancels []func()
	for _, w := range l.routes {
		cancels = append(cancels, w.cancel)
	}
	l.routes = make(map[string]*routeWatch)
	l.mode = ServingModeNotServing
	// Reported even when already not serving, as grpc-go does: the
	// reason may have changed, and the callback learns it.
	l.s.queueReportLocked(modeReport{l: l, mode: ServingModeNotServing, err: err})
	l.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	l.after(old)
}

// routeConfig returns the route configuration a filter chain uses now.
func (l *listener) routeConfig(fc *resources.FilterChain) (*resources.RouteConfig, error) {
	if fc.InlineRouteConfig != nil {
		return fc.InlineRouteConfig, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.routes[fc.RouteConfigName]
	switch {
	case w == nil || !w.received:
		return nil, fmt.Errorf("route configuration %q not held", fc.RouteConfigName)
	case w.rc == nil:
		return nil, fmt.Errorf("route configuration %q: %v", fc.RouteConfigName, w.err)
	}
	return w.rc, nil
}

// close stops the watch, the accept loop and the generation in force.
func (l *listener) close(graceful bool) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed, l.graceful = true, graceful
	cancel := l.cancelLDS
	g := l.cur
	l.cur, l.pending = nil, nil
	var cancels []func()
	for _, w := range l.routes {
		cancels = append(cancels, w.cancel)
	}
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, c := range cancels {
		c()
	}
	l.raw.Close()
	if g != nil {
		g.stop(graceful)
	}
}

// generation is one Listener version being served.
type generation struct {
	l   *listener
	cfg *resources.ServerListener
	lis *serverconn.ChanListener
	srv *grpc.Server
	// sec holds the TLS of each chain that has a DownstreamTlsContext,
	// built on demand; ended when srv has stopped.
	sec map[*resources.FilterChain]*servertls.Chain
	// ctx ends when the generation stops, ending the handshakes that wait
	// for its certificate providers.
	ctx    context.Context
	cancel context.CancelFunc
}

// newGeneration serves cfg. Called with l.mu held: it builds nothing that
// can block (certificate providers are built on demand, by servertls.Chain).
func newGeneration(l *listener, cfg *resources.ServerListener) *generation {
	g := &generation{l: l, cfg: cfg, lis: serverconn.NewChanListener(l.raw.Addr()), sec: make(map[*resources.FilterChain]*servertls.Chain)}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for _, fc := range servertls.Chains(cfg) {
		if fc.Security != nil {
			g.sec[fc] = servertls.NewChain(l.s.opts.bootstrap, fc, func(err error) {
				l.s.warn("filter chain refuses its connections", "listener", l.name, "filter_chain", fc.Name, "error", err)
			})
		}
	}
	g.srv = l.s.newGRPCServer(g)
	l.s.mu.Lock()
	l.s.live[g] = true
	l.s.mu.Unlock()
	l.s.wg.Add(1)
	go func() {
		defer l.s.wg.Done()
		g.srv.Serve(g.lis) // returns when stopped
		// Serve returns when the listener closes; a graceful stop may
		// still be waiting for RPCs, and GracefulStop's goroutine
		// removes the generation then.
	}()
	return g
}

func (g *generation) config() *resources.ServerListener {
	if g == nil {
		return nil
	}
	return g.cfg
}

// stop ends the generation: gracefully, its connections get a GOAWAY and
// close when their RPCs end; otherwise at once.
func (g *generation) stop(graceful bool) {
	s := g.l.s
	g.cancel()
	if !graceful {
		g.lis.Close()
		g.srv.Stop()
		g.stopped()
		return
	}
	// Counted before lis closes: until then Serve's goroutine holds the
	// count above zero, so a Stop waiting meanwhile waits for this one too.
	s.wg.Add(1)
	g.lis.Close()
	go func() {
		defer s.wg.Done()
		g.srv.GracefulStop()
		g.stopped()
	}()
}

// stopped releases what the generation held once its server has stopped.
func (g *generation) stopped() {
	s := g.l.s
	s.mu.Lock()
	delete(s.live, g)
	s.mu.Unlock()
	for _, c := range g.sec {
		c.End()
	}
}
