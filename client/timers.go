package client

import (
	"fmt"
	"time"

	"github.com/goxds/xds/bootstrap"

	"github.com/goxds/xds/resources"
)

// handleSubscriptionsSent starts the does-not-exist timer of every name
// just sent on a live stream that has no data and no timer yet. Timers stop
// when the stream fails and start again here once the name is sent anew.
func (c *Client) handleSubscriptionsSent(s *server, typeURL string, names []string) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return
	}
	tc := c.caches[typeURL]
	if tc == nil {
		return
	}
	start := make([]*entry, 0, len(names))
	for _, name := range names {
		e := tc.entries[name]
		// A value from disk is no answer of the server: its timer runs.
		if e == nil || e.srv != s || e.dneTimer != nil || e.status != StatusRequested || (e.hasData() && !e.rare().fromDisk) || e.watchers.len() == 0 {
			continue
		}
		start = append(start, e)
	}
	c.startDNETimersLocked(tc, start)
}

// dneBatch is the does-not-exist timer of names whose timers started
// together (one request of 10,000 names): one clock timer for all of them,
// so that arming costs one timer, not one per name, and expiring is one
// pass under the lock, each name costing O(that name).
type dneBatch struct {
	timer   Timer
	tc      *typeCache
	members []dneMember
	// live counts the members whose timer is still this batch; at 0 the
	// clock timer is stopped.
	live int
}

// dneMember is one name of a batch, with the entry's dneGen when its timer
// started: a member whose entry has moved on since is skipped.
type dneMember struct {
	e   *entry
	gen uint64
}

// startDNETimersLocked starts the does-not-exist timers of es, entries of
// one server (one expiry), as one batch.
func (c *Client) startDNETimersLocked(tc *typeCache, es []*entry) {
	if len(es) == 0 {
		return
	}
	b := &dneBatch{tc: tc, members: make([]dneMember, len(es)), live: len(es)}
	for i, e := range es {
		b.members[i] = dneMember{e: e, gen: e.dneGen}
		e.dneTimer = b
	}
	b.timer = c.clock.AfterFunc(c.expiryOf(es[0].srv), func() { c.dneBatchExpired(b) })
}

// dneBatchExpired ends the timers of the batch's members still waiting.
func (c *Client) dneBatchExpired(b *dneBatch) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return
	}
	members := b.members
	b.members = nil
	for _, m := range members {
		e := m.e
		if e.dneTimer != b || e.dneGen != m.gen || b.tc.entries[e.key()] != e {
			continue
		}
		e.dneTimer = nil
		b.live--
		c.dneExpiredLocked(b.tc, e)
	}
}

// dneExpiredLocked handles the end of e's does-not-exist timer.
func (c *Client) dneExpiredLocked(tc *typeCache, e *entry) {
	expiry := c.expiryOf(e.srv)
	if e.rare().fromDisk {
		if !e.srv.answered || e.srv.cfg.ResourceTimerIsTransientFailure() {
			// Connected but silent, or slow: the persisted value is the
			// best there is, and silence says nothing of it. The timer
			// runs again, so that a server that answers and still does
			// not send it is found out.
			c.startDNETimerLocked(tc, e)
			return
		}
		// The server answers, and has not sent it: it is gone.
		c.logq.Info("resource does not exist: not received in time; dropping its value from disk",
			"server", e.srv.cfg.ServerURI, "type", tc.typ.TypeURL(), "name", e.name, "timeout", expiry)
		c.deleteLocked(tc, e, fmt.Sprintf("not received within %v of the request", expiry), c.clock.Now())
		return
	}
	if e.srv.cfg.ResourceTimerIsTransientFailure() {
		// gRFC A88: this server reports missing resources itself, so
		// silence means it is slow, not that the resource is missing. The
		// watcher cannot have data (the timer runs only without), so it is
		// a resource error all the same, of another kind.
		cause := fmt.Errorf("%w: %s did not send it within %v of the request (%s)",
			ErrServerUnavailable, e.srv.sourceName(), expiry, bootstrap.FeatureResourceTimerIsTransientError)
		err := &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params, Err: cause}
		e.setStatus(StatusTimeout, cause, err, c.clock.Now())
		c.logq.Warn("resource not received in time; the server is slow",
			"server", e.srv.cfg.ServerURI, "type", tc.typ.TypeURL(), "name", e.logName(), "timeout", expiry)
		c.notifyLocked(tc, e, notifyResourceError, nil, err, false)
		return
	}
	// An error the transport reported for the name (handleUnservable) is
	// over: the name is known not to exist.
	e.setStatus(StatusDoesNotExist, nil, nil, c.clock.Now())
	c.logq.Info("resource does not exist: not received in time",
		"server", e.srv.cfg.ServerURI, "type", tc.typ.TypeURL(), "name", e.logName(), "timeout", expiry)
	err := &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params,
		Err: fmt.Errorf("%w: not received within %v of the request", ErrResourceNotFound, expiry)}
	c.notifyLocked(tc, e, notifyResourceError, nil, err, false)
}

// expiryOf is the does-not-exist timeout for names fetched from s: the
// configured one, doubled for a server marked
// resource_timer_is_transient_error (either spelling), as gRFC A88 makes
// 15 s into 30 s for those.
func (c *Client) expiryOf(s *server) time.Duration {
	if s.cfg.ResourceTimerIsTransientFailure() {
		return 2 * c.expiry
	}
	return c.expiry
}

// applyTTLLocked (re)starts the TTL timer of e if env carries a TTL, and
// stops it if not: a resource sent without a TTL no longer expires.
func (c *Client) applyTTLLocked(tc *typeCache, e *entry, env resources.Envelope) {
	e.stopTTLTimer()
	if !env.HasTTL {
		return
	}
	x := e.rareW()
	gen := x.ttlGen
	x.ttlTimer = c.clock.AfterFunc(env.TTL, func() { c.ttlExpired(tc, e, gen) })
}

// ttlExpired removes a resource whose TTL ran out. It runs whether or not
// the server is reachable: expiry while the server is gone is what TTLs are
// for.
func (c *Client) ttlExpired(tc *typeCache, e *entry, gen uint64) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed || e.rare().ttlGen != gen || tc.entries[e.key()] != e {
		return
	}
	e.x.ttlTimer = nil // made by applyTTLLocked
	c.logq.Info("resource TTL expired", "server", e.srv.cfg.ServerURI, "type", tc.typ.TypeURL(), "name", e.logName())
	c.deleteLocked(tc, e, "TTL expired", c.clock.Now())
}

// resourceVersions lists what the client holds of a type from a server, for
// a delta stream's initial_resource_versions.
func (c *Client) resourceVersions(s *server, typeURL string) map[string]string {
	c.mu.Lock()
	defer c.unlock()
	tc := c.caches[typeURL]
	if tc == nil {
		return nil
	}
	out := make(map[string]string)
	for name, e := range tc.entries {
		// Only what came from s: versions are the server's own.
		// Not what was read from disk: the server must send it, so that
		// watchers learn the server's version.
		if e.srv == s && e.src == s && e.value != nil && !e.rare().fromDisk {
			out[name] = e.version
		}
	}
	return out
}
