package serverlds

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/internal/serverconn"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/resources"
)

// Server is what a server does with its generations: start one per
// Listener version, stop it, hand it connections. G is the server's own
// generation type; its zero value means none.
type Server[G comparable] interface {
	// Start serves a Listener version in a new generation, whose common
	// part (the version, the net.Listener its server accepts from, the
	// chains' TLS) is gen. It is called with the Listener's lock held, so
	// it must not block, nor call the Listener.
	Start(gen *Generation) G
	// Stop stops g, gracefully (its connections drain, the requests in
	// progress finish) or at once, with no lock held. Once g's server has
	// stopped, the server calls Listener.Stopped(g). Stop(g, false) may
	// follow Stop(g, true), to end a drain at Close.
	Stop(g G, graceful bool)
	// Deliver hands conn, between local and remote, to g's server
	// through the filter chain it matches; false if no chain matches or
	// g's server no longer accepts (then the caller tries the version in
	// force, or closes conn).
	Deliver(g G, conn net.Conn, local, remote netip.AddrPort) bool
	// NotServerListener is the error that puts the address out of
	// service when the Listener is a client's (it has an api_listener).
	NotServerListener(name string) error
	// WrongAddress is the error that puts the address out of service
	// when the Listener is for another address (host:port, as the
	// Listener has it) than the listening one.
	WrongAddress(name, addr, listening string) error
	// Warn logs a warning of the server's.
	Warn(msg string, args ...any)
}

// Config is what a Listener is made of; every field is required.
type Config[G comparable] struct {
	// Client watches the Listener and its route configurations.
	Client *client.Client
	// Bootstrap has the certificate providers of the chains' TLS.
	Bootstrap *bootstrap.Config
	// Raw is the listening socket; Serve accepts from it, Close closes it.
	Raw net.Listener
	// Name is the Listener resource's name for Raw's address.
	Name string
	// Server builds the generations.
	Server Server[G]
	// Reports tells the serving-mode changes; one per server, so that
	// its listeners' reports never overlap.
	Reports *Reporter
	// Applied, if set, is called with no lock held each time a Listener
	// or route configuration update (or the Listener's loss) has been
	// handled: the generation in force and the routes replaced, a
	// replaced generation told to drain. It is the event a server's tests
	// wait on for a configuration to take effect, rather than polling
	// with requests.
	Applied func()
	// Side, if set, are the server's channels to side services: each
	// update tells them which services the version in force names (its
	// chains' filters, their route configurations), so that channels no
	// configuration names close once their calls end (Channels.Name).
	Side *extauthzgrpc.Channels
}

// Listener is one address a server serves: the Listener watch, the route
// configurations its filter chains name, and the generation in force.
type Listener[G comparable] struct {
	// Read-only after New.
	cfg Config[G]
	// host and port are Raw's address, to check the Listener's against.
	host, port string

	// routes is the route configurations received, replaced whole at
	// each change so that a request reads them without a lock.
	routes atomic.Pointer[Routes]

	mu   sync.Mutex
	mode Mode
	// cur serves new connections; zero when not serving.
	cur G
	// curCfg is cur's Listener version; nil when not serving.
	curCfg *resources.ServerListener
	// pending is the Listener version that waits for its route
	// configurations; nil when none waits.
	pending *resources.ServerListener
	// watches are the RDS watches the current and pending versions need.
	watches map[string]*routeWatch
	// live are the generations whose server has not stopped, draining
	// ones included, for CloseAll.
	live map[G]*Generation
	// cancelLDS ends the Listener watch; nil until Serve starts it.
	cancelLDS func()
	closed    bool

	// sideMu orders the Listener's reports to Config.Side, so that an
	// older one never follows a newer.
	sideMu sync.Mutex

	// said is what the log was last told of this listener, for Log; only
	// the Reporter, one goroutine at a time, touches it.
	said said
}

// New returns the Listener of cfg.Raw; Serve starts it.
func New[G comparable](cfg Config[G]) *Listener[G] {
	host, port, _ := net.SplitHostPort(cfg.Raw.Addr().String())
	l := &Listener[G]{cfg: cfg, host: host, port: port,
		watches: make(map[string]*routeWatch), live: make(map[G]*Generation)}
	l.routes.Store(&Routes{})
	return l
}

// Name is the Listener resource's name.
func (l *Listener[G]) Name() string { return l.cfg.Name }

// Addr is the listening address.
func (l *Listener[G]) Addr() net.Addr { return l.cfg.Raw.Addr() }

// Routes are the route configurations held now: an RDS update applies to
// open connections.
func (l *Listener[G]) Routes() *Routes { return l.routes.Load() }

// Serve watches the Listener and runs the accept loop until Raw fails or
// the Listener is closed: nil then. When Raw fails, every generation is
// stopped at once and Raw's error returned.
func (l *Listener[G]) Serve() error {
	cancel := client.Watch(l.cfg.Client, resources.ListenerType, l.cfg.Name, client.WatcherFuncs[*resources.Listener]{
		OnUpdate:        l.onListener,
		OnResourceError: l.notServing,
		// The Listener held stays in force: a management server
		// unreachable, an update rejected, or (gRFC A88) a deletion by
		// a server not marked fail_on_data_errors. The operator is told,
		// since the server no longer follows its configuration.
		OnAmbientError: func(err error) {
			l.cfg.Server.Warn("serving goes on with the Listener held", "listener", l.cfg.Name, "error", err)
		},
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
		conn, err := l.cfg.Raw.Accept()
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// As net/http and grpc do for a temporary failure (out
				// of file descriptors): back off and retry.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			l.Close(false)
			l.CloseAll()
			return err
		}
		delay = 0
		l.handle(conn)
	}
}

// handle gives conn to the generation in force (serverconn.Handoff: one
// replaced meanwhile passes it on); a connection no chain matches is
// closed, as is every connection while not serving.
func (l *Listener[G]) handle(conn net.Conn) {
	local, lok := serverconn.AddrPort(conn.LocalAddr())
	remote, rok := serverconn.AddrPort(conn.RemoteAddr())
	if !lok || !rok {
		conn.Close()
		return
	}
	serverconn.Handoff(conn, l.current, func(g G) bool { return l.cfg.Server.Deliver(g, conn, local, remote) })
}

// current is the generation in force, zero when not serving.
func (l *Listener[G]) current() G {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// onListener handles a new Listener version: it waits for the route
// configurations it names, then replaces the generation in force.
func (l *Listener[G]) onListener(res *resources.Listener) {
	sl := res.Server
	if sl == nil {
		l.notServing(l.cfg.Server.NotServerListener(l.cfg.Name))
		return
	}
	// Port 0 in the Listener matches any port; the address must match.
	if sl.Address != l.host || (sl.Port != 0 && strconv.Itoa(int(sl.Port)) != l.port) {
		l.notServing(l.cfg.Server.WrongAddress(l.cfg.Name,
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

// activateLocked makes the pending Listener version current once every
// route configuration it names has been received (gRFC A36: a server does
// not use a Listener before its RDS resources). Certificate providers are
// not waited for: a chain's are built by the first handshake that asks
// for them (servertls.Chain). It returns the generation replaced, to
// drain, and queues the report if the mode became serving.
func (l *Listener[G]) activateLocked() (old G) {
	v := l.pending
	if v == nil {
		return old
	}
	rs := l.routes.Load()
	for _, n := range routeNames(v) {
		if _, ok := rs.byName[n]; !ok {
			return old
		}
	}
	gen := l.newGeneration(v)
	g := l.cfg.Server.Start(gen)
	l.live[g] = gen
	old, l.cur, l.curCfg, l.pending = l.cur, g, v, nil
	// A new cache: what a server kept of the old version's inline route
	// configurations is not kept alive.
	l.routes.Store(rs.clone())
	if l.mode != Serving {
		l.mode = Serving
		l.cfg.Reports.add(l.report(Serving, nil))
	}
	return old
}

// notServing drops every Listener version held: new connections are
// closed, open ones drained.
func (l *Listener[G]) notServing(err error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	var zero G
	old := l.cur
	l.cur, l.curCfg, l.pending = zero, nil, nil
	cancels := l.dropRoutesLocked()
	l.mode = NotServing
	// Reported even when already not serving, as grpc-go does: the
	// reason may have changed, and the callback learns it.
	l.cfg.Reports.add(l.report(NotServing, err))
	l.mu.Unlock()
	l.after(old, cancels)
}

// after cancels watches, drains a replaced generation and tells the mode
// changes queued, with no lock held.
func (l *Listener[G]) after(old G, cancels []func()) {
	for _, c := range cancels {
		c()
	}
	l.nameSide()
	l.stop(old, true)
	l.cfg.Reports.flush()
	if l.cfg.Applied != nil {
		l.cfg.Applied()
	}
}

// stop stops g (none if zero), first ending the handshakes that wait for
// its certificate providers.
func (l *Listener[G]) stop(g G, graceful bool) {
	var zero G
	if g == zero {
		return
	}
	l.mu.Lock()
	gen := l.live[g]
	l.mu.Unlock()
	if gen != nil {
		gen.cancel()
	}
	l.cfg.Server.Stop(g, graceful)
}

// Stopped tells the Listener that g's server has stopped: what the
// generation held is released (its chains' certificate providers). It may
// be called more than once.
func (l *Listener[G]) Stopped(g G) {
	l.mu.Lock()
	gen := l.live[g]
	delete(l.live, g)
	l.mu.Unlock()
	if gen != nil {
		gen.end()
	}
}

// Close stops the watches, the accept loop (Raw is closed) and the
// generation in force, gracefully or at once; generations still draining
// from earlier versions go on draining (CloseAll ends them).
func (l *Listener[G]) Close(graceful bool) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	cancel := l.cancelLDS
	var zero G
	g := l.cur
	l.cur, l.curCfg, l.pending = zero, nil, nil
	cancels := l.dropRoutesLocked()
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, c := range cancels {
		c()
	}
	l.cfg.Raw.Close()
	l.nameSide()
	l.stop(g, graceful)
}

// nameSide tells Config.Side the services the version in force names
// (none when not serving or closed); the draining generations' RPCs still
// have theirs until their calls end.
func (l *Listener[G]) nameSide() {
	if l.cfg.Side == nil {
		return
	}
	l.sideMu.Lock()
	defer l.sideMu.Unlock()
	l.mu.Lock()
	sl, rs := l.curCfg, l.routes.Load()
	l.mu.Unlock()
	var named extauthzgrpc.Services
	if sl != nil {
		for _, fc := range servertls.Chains(sl) {
			named.AddFilters(fc.HTTPFilters)
			if rc, err := rs.Config(fc); err == nil {
				named.AddRouteConfig(rc)
			}
		}
	}
	l.cfg.Side.Name(l, named)
}

// CloseAll stops at once every generation whose server has not stopped,
// draining ones too.
func (l *Listener[G]) CloseAll() {
	l.mu.Lock()
	gs := make([]G, 0, len(l.live))
	for g := range l.live {
		gs = append(gs, g)
	}
	l.mu.Unlock()
	for _, g := range gs {
		l.stop(g, false)
	}
}

func (l *Listener[G]) report(m Mode, err error) Report {
	return Report{Addr: l.cfg.Raw.Addr(), Name: l.cfg.Name, Mode: m, Err: err, said: &l.said}
}
