package serverlds

import (
	"fmt"
	"maps"
	"sync"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/internal/servertls"
	"github.com/goxds/xds/resources"
)

// Routes are the route configurations a Listener's filter chains name, as
// received. A Listener replaces its Routes whole at each change (never
// changes one in place), so that a request reads them without a lock.
type Routes struct {
	// byName holds each route configuration received: the value, or why
	// there is none. One not yet received is missing.
	byName map[string]routeState
	// Cache is for the server to keep what it works out of these route
	// configurations, per route (httpxds: its header mutations and
	// answers). A new Routes, with an empty Cache, comes with each change
	// of the route configurations or of the Listener version, so that
	// nothing of a route that is gone is kept.
	Cache sync.Map
}

// routeState is one route configuration received.
type routeState struct {
	rc  *resources.RouteConfig // nil when it does not exist or is invalid
	err error
}

// Config returns the route configuration fc uses: its inline one, or the
// one it names over RDS.
func (rs *Routes) Config(fc *resources.FilterChain) (*resources.RouteConfig, error) {
	if fc.InlineRouteConfig != nil {
		return fc.InlineRouteConfig, nil
	}
	st, ok := rs.byName[fc.RouteConfigName]
	switch {
	case !ok:
		return nil, fmt.Errorf("route configuration %q is not held", fc.RouteConfigName)
	case st.rc == nil:
		return nil, fmt.Errorf("route configuration %q: %w", fc.RouteConfigName, st.err)
	}
	return st.rc, nil
}

// clone is a copy of rs with an empty Cache, for one change: set and drop
// then change it before it is stored.
func (rs *Routes) clone() *Routes {
	m := make(map[string]routeState, len(rs.byName)+1)
	maps.Copy(m, rs.byName)
	return &Routes{byName: m}
}

// routeWatch is the RDS watch of one route configuration.
type routeWatch struct {
	cancel func()
}

// routeNames are the route configurations sl's chains name over RDS.
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

// watchRoutesLocked starts the RDS watches that the current and pending
// versions need and are missing, forgets those no longer needed, and
// returns their cancels, to call once l.mu is released.
func (l *Listener[G]) watchRoutesLocked() []func() {
	need := make(map[string]bool)
	for _, sl := range []*resources.ServerListener{l.pending, l.curCfg} {
		for _, n := range routeNames(sl) {
			need[n] = true
		}
	}
	var cancels []func()
	var next *Routes
	for n, w := range l.watches {
		if need[n] {
			continue
		}
		cancels = append(cancels, w.cancel)
		delete(l.watches, n)
		if next == nil {
			next = l.routes.Load().clone()
		}
		delete(next.byName, n)
	}
	if next != nil {
		l.routes.Store(next)
	}
	for n := range need {
		if l.watches[n] != nil {
			continue
		}
		w := &routeWatch{}
		l.watches[n] = w
		// The client delivers a cached value through its callback queue,
		// never from inside Watch, so watching under l.mu is safe.
		w.cancel = client.Watch(l.cfg.Client, resources.RouteConfigType, n, client.WatcherFuncs[*resources.RouteConfig]{
			OnUpdate:        func(rc *resources.RouteConfig) { l.onRoute(n, w, routeState{rc: rc}) },
			OnResourceError: func(err error) { l.onRoute(n, w, routeState{err: err}) },
			// An ambient error keeps the route configuration held.
		})
	}
	return cancels
}

// onRoute records route configuration n as watch w received it, and makes
// the pending version current if it waited for no other.
func (l *Listener[G]) onRoute(n string, w *routeWatch, st routeState) {
	l.mu.Lock()
	if l.closed || l.watches[n] != w {
		// A watch cancelled (its callback may run until cancel returns,
		// and cancels are called after l.mu is released).
		l.mu.Unlock()
		return
	}
	next := l.routes.Load().clone()
	next.byName[n] = st
	l.routes.Store(next)
	old := l.activateLocked()
	l.mu.Unlock()
	l.after(old, nil)
}

// dropRoutesLocked forgets every route configuration and returns the
// cancels of their watches, to call once l.mu is released.
func (l *Listener[G]) dropRoutesLocked() []func() {
	cancels := make([]func(), 0, len(l.watches))
	for _, w := range l.watches {
		cancels = append(cancels, w.cancel)
	}
	clear(l.watches)
	l.routes.Store(&Routes{})
	return cancels
}
