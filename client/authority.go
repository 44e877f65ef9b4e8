package client

import (
	"fmt"
	"strings"

	"github.com/goxds/xds/bootstrap"
	"github.com/goxds/xds/resources"
)

// authority is the ordered servers of one xDS authority (gRFC A47) and the
// one the client uses for it now (gRFC A71 fallback).
//
// The client uses the first server. It moves to the next only when the
// current one fails without having answered and some watcher of the
// authority waits on a resource the cache lacks; with everything cached,
// a lost server changes nothing, as the gRFC wants: the primary's data is
// better than the fallback's. Servers before the current one keep a
// transport (the one left gets a new one: renewLocked), which keeps
// reconnecting with backoff and has every subscription of the authority,
// so that the first response of a higher-priority server makes it current
// again (see preferLocked); the servers after it are then released, and
// their transports closed.
//
// Every entry of the authority has srv = the current server: the apply
// code accepts a resource only from its entry's srv, so a response from a
// server that is no longer current (a fallback about to be closed) changes
// nothing, and one from a server the client has just gone back to applies
// to the same entries, whose cached values survive the switch. Guarded by
// Client.mu.
type authority struct {
	name    string                   // as in xdstp names; "" for the top-level servers
	configs []bootstrap.ServerConfig // in priority order; read-only
	// servers[i] serves configs[i], for i up to active, the current one;
	// nil for one skipped when falling back (it could not be built, or was
	// known to be down).
	servers []*server
	active  int
	// reachabilityOnly: the authority leaves a server that cannot be
	// reached whatever the cache holds (gRFC A95's
	// fallback_on_reachability_only, with A95 on); read-only.
	reachabilityOnly bool
}

func (a *authority) current() *server { return a.servers[a.active] }

// label names the authority in logs.
func (a *authority) label() string {
	if a == nil || a.name == "" {
		return "#top-level"
	}
	return a.name
}

// authorityForLocked returns the authority of name: that of an xdstp name,
// else the top-level servers. Made on first use, with its first server.
func (c *Client) authorityForLocked(name string) (*authority, error) {
	rest, ok := strings.CutPrefix(name, "xdstp://")
	if !ok {
		// Found once: a tree of 10,000 clusters makes 20,000 watches, and
		// computing the server's key for each showed in profiles.
		if c.topAuthority == nil {
			a, err := c.newAuthorityLocked("", c.cfg.Servers)
			if err != nil {
				return nil, err
			}
			c.topAuthority = a
		}
		return c.topAuthority, nil
	}
	authName, _, _ := strings.Cut(rest, "/")
	if a := c.authorities[authName]; a != nil {
		return a, nil
	}
	servers, ok := c.cfg.ServersForAuthority(authName)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownAuthority, authName)
	}
	a, err := c.newAuthorityLocked(authName, servers)
	if err != nil {
		return nil, err
	}
	c.authorities[authName] = a
	return a, nil
}

func (c *Client) newAuthorityLocked(name string, configs []bootstrap.ServerConfig) (*authority, error) {
	s, err := c.serverOfLocked(configs[0])
	if err != nil {
		return nil, err
	}
	s.refs++
	a := &authority{name: name, configs: configs, servers: []*server{s}}
	if name != "" && c.cfg.EndpointFallback {
		a.reachabilityOnly = c.cfg.Authorities[name].FallbackOnReachabilityOnly
	}
	return a, nil
}

// eachAuthorityLocked calls f for every authority in use.
func (c *Client) eachAuthorityLocked(f func(*authority)) {
	if c.topAuthority != nil {
		f(c.topAuthority)
	}
	for _, a := range c.authorities {
		f(a)
	}
}

// subscribeAllLocked subscribes to name on every server of a in use: the
// current one, and those of higher priority still trying to reconnect,
// which must know every name wanted by the time they answer.
// unsubscribeAllLocked is the reverse; it reports whether the current
// server's removal was queued (see unsubscribeLocked).
func (c *Client) subscribeAllLocked(a *authority, typeURL, name string) {
	for _, s := range a.servers {
		if s != nil {
			c.subscribeLocked(s, typeURL, name)
		}
	}
}

func (c *Client) unsubscribeAllLocked(a *authority, typeURL, name string) (queued bool) {
	for i, s := range a.servers {
		if s == nil {
			continue
		}
		if q := c.unsubscribeLocked(s, typeURL, name); i == a.active {
			queued = q
		}
	}
	return queued
}

// shouldFallBackLocked tells whether a, whose current server has just
// been found unreachable, should move to its next server: always with
// fallback_on_reachability_only (gRFC A95), which keeps endpoints fresh
// from a fallback rather than stale from the cache; otherwise only while a
// watcher waits on what the cache lacks (gRFC A71).
func (c *Client) shouldFallBackLocked(a *authority) bool {
	return a.reachabilityOnly || c.waitingLocked(a)
}

// waitingLocked tells whether a watcher of a waits on a resource the cache
// lacks: neither received nor known not to exist (gRFC A71's condition),
// or, for a wildcard watch, no response of its type at all.
func (c *Client) waitingLocked(a *authority) bool {
	for _, tc := range c.caches {
		if ww := tc.wildcard; ww != nil && ww.auth == a && !ww.answered {
			return true
		}
		for _, e := range tc.entries {
			if e.auth == a && waiting(e) {
				return true
			}
		}
	}
	return false
}

func waiting(e *entry) bool {
	return e.watchers.len() > 0 && e.status == StatusRequested && (!e.hasData() || e.rare().fromDisk)
}

// fallBackLocked moves a from its current server, which failed without
// answering, to the next one that can be built and is not known to be down.
// It reports whether it did.
func (c *Client) fallBackLocked(a *authority, cause error) bool {
	from, fromIdx := a.current(), a.active
	for i := a.active + 1; i < len(a.configs); i++ {
		s, err := c.serverOfLocked(a.configs[i])
		if err != nil {
			c.logq.Warn("cannot use fallback server", "authority", a.label(), "server", a.configs[i].ServerURI, "err", err)
			continue
		}
		if s.unreachable != nil {
			// Shared with another authority, which found it down: no
			// better. The current server's next failed reconnection
			// tries again.
			continue
		}
		s.refs++
		for len(a.servers) < i {
			a.servers = append(a.servers, nil) // skipped
		}
		a.servers = append(a.servers, s)
		a.active = i
		c.moveEntriesLocked(a, s, true)
		c.logq.Warn("server of xds_servers failed before answering while a resource is awaited: falling back to the next",
			"authority", a.label(), "server", from.cfg.ServerURI, "fallback", s.cfg.ServerURI, "err", cause)
		if from.refs == 1 {
			a.servers[fromIdx] = c.renewLocked(a, from)
		}
		return true
	}
	return false
}

// renewLocked replaces old, a server only a uses and that a has just left,
// with a new server of the same config and a new transport, told every name
// of a; old's transport is closed. A transport remembers the versions the
// server last sent, and a SotW stream starts by telling them to the server;
// once the fallback's data has replaced the primary's, that would be false,
// and a server that finds the version it has sends nothing, leaving the
// fallback's data in force after the switch back. go-control-plane v0.14's
// snapshot cache does so for a request that came before the snapshot was
// set (a control plane restarted with versions counted from "1" again):
// SetSnapshot answers a waiting watch only if the version differs, without
// the check CreateWatch makes of what the stream was sent (the logic that
// envoyproxy/go-control-plane#1356 reworks). A new transport starts from
// nothing: the server sends everything once, and what is byte for byte the
// same is not delivered again.
func (c *Client) renewLocked(a *authority, old *server) *server {
	s := &server{c: c, cfg: old.cfg, dctx: old.dctx, warnedIstiod: old.warnedIstiod, refs: 1}
	s.unreachable, s.unreachableSince = old.unreachable, old.unreachableSince
	s.since, s.lastErr, s.lastErrAt = old.since, old.lastErr, old.lastErrAt
	t, err := c.builder.Build(old.cfg, c.node, s)
	if err != nil {
		// Built once with this config, so unexpected: keep the old one.
		c.logq.Warn("cannot renew the transport", "server", old.cfg.ServerURI, "err", err)
		return old
	}
	s.transport = t
	c.servers[old.cfg.Key()] = s
	old.refs = 0
	c.dropPendingLocked(old)
	c.releasing.Add(1)
	go func() {
		defer c.releasing.Done()
		old.transport.Close()
	}()
	for typeURL, tc := range c.caches {
		for _, e := range tc.entries {
			if e.auth == a && e.watchers.len() > 0 {
				c.subscribeAgainLocked(s, typeURL, e.key())
			}
		}
		if ww := tc.wildcard; ww != nil && ww.auth == a {
			c.subscribeAgainLocked(s, typeURL, resources.Wildcard)
		}
	}
	return s
}

// preferLocked makes s current for every authority that lists it before
// its current server: s has answered, so it is back. It returns the
// servers no authority uses any more, whose transports the caller closes
// (closeReleased) once it has let go of c.mu.
func (c *Client) preferLocked(s *server) (released []releasedServer) {
	c.eachAuthorityLocked(func(a *authority) {
		for i := 0; i < a.active; i++ {
			if a.servers[i] != s {
				continue
			}
			from := a.current()
			for _, old := range a.servers[i+1:] {
				if old == nil {
					continue
				}
				if old.refs--; old.refs == 0 {
					delete(c.servers, old.cfg.Key())
					c.dropPendingLocked(old)
					c.releasing.Add(1) // under c.mu, so before Close waits
					released = append(released, releasedServer{old, old.connected})
					old.connected = false
				} else {
					// Another authority still uses it: only a's names go.
					c.unsubscribeEntriesLocked(a, old)
				}
			}
			clear(a.servers[i+1:])
			a.servers, a.active = a.servers[:i+1], i
			c.moveEntriesLocked(a, s, false)
			c.logq.Info("higher-priority server of xds_servers answered: using it again, closing the lower ones",
				"authority", a.label(), "server", s.cfg.ServerURI, "previous", from.cfg.ServerURI)
			return
		}
	})
	return released
}

// moveEntriesLocked makes s the server of every entry of a. Does-not-exist
// timers belong to the server that was told the name: they stop here, and
// start again once s has the name on a live stream. Going to a fallback
// (toFallback), s is told every name first, and reports when it sent them.
// Going back, s answered and was told every name all along, so the timers
// of the names still waited for start now.
func (c *Client) moveEntriesLocked(a *authority, s *server, toFallback bool) {
	for typeURL, tc := range c.caches {
		for _, e := range tc.entries {
			if e.auth != a {
				continue
			}
			e.stopDNETimer()
			e.srv = s
			if toFallback && e.watchers.len() > 0 {
				c.subscribeAgainLocked(s, typeURL, e.key())
			}
			if !toFallback && waiting(e) {
				c.startDNETimerLocked(tc, e)
			}
		}
		if ww := tc.wildcard; ww != nil && ww.auth == a {
			ww.srv = s
			if toFallback {
				c.subscribeAgainLocked(s, typeURL, resources.Wildcard)
			}
		}
	}
}

// unsubscribeEntriesLocked tells s that a no longer wants anything from it.
func (c *Client) unsubscribeEntriesLocked(a *authority, s *server) {
	for typeURL, tc := range c.caches {
		for _, e := range tc.entries {
			if e.auth == a && e.watchers.len() > 0 {
				c.unsubscribeLocked(s, typeURL, e.key())
			}
		}
		if ww := tc.wildcard; ww != nil && ww.auth == a {
			c.unsubscribeLocked(s, typeURL, resources.Wildcard)
		}
	}
}

// startDNETimerLocked starts the does-not-exist timer of e.
func (c *Client) startDNETimerLocked(tc *typeCache, e *entry) {
	c.startDNETimersLocked(tc, []*entry{e})
}

// closeReleased closes the transports of released servers. Not under
// c.mu: closing waits for the transport's goroutines, which may be waiting
// for it. It does not wait itself (the caller is often a transport's
// receiving goroutine, which should move on); Close waits instead.
func (c *Client) closeReleased(released []releasedServer) {
	for _, r := range released {
		if r.connected {
			c.metrics.Connected(r.s.cfg.ServerURI, false)
		}
		go func() {
			defer c.releasing.Done()
			r.s.transport.Close()
		}()
	}
}

// releasedServer is a server no authority uses any more, and whether
// Metrics.Connected last said it was connected.
type releasedServer struct {
	s         *server
	connected bool
}
