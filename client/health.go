package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// This file is the one place that decides what a transport's reports mean
// for a server's health and its watchers (gRFC A57). A transport reports
// three different things, and only two of them are about the server:
//
//   - a response (handleResponse → heardLocked): the server is up;
//   - the end of a stream, having answered or not (handleStreamEnd): routine
//     if the server answered on it or on another of its streams since it
//     started, an outage otherwise, of which every watcher of the server is
//     told once, until the server answers again;
//   - names it cannot serve (handleUnservable): about those names only; the
//     server's health is left as it is.
//
// Does-not-exist timers stop with the stream that carried their names and
// start again once the names are on a new one (handleSubscriptionsSent).

// health is what the client knows of a server's reachability. Guarded by
// c.mu, and changed only here.
type health struct {
	// unreachable is the error of the stream whose end began the outage,
	// from when a stream fails without an answer until the next response:
	// the server is unhealthy.
	unreachable error
	// unreachableSince is when unreachable was set, for the length of the
	// outage in the log line of its end.
	unreachableSince time.Time
	// since is when the server began to be used, and then when it was
	// last found up (heardLocked) or down (handleStreamEnd), for
	// Client.Authorities.
	since time.Time
	// lastErr is the error of the last stream that ended with one, outage
	// or not, and lastErrAt when it ended, for Client.Authorities: kept
	// once the server is up again, since an operator asks what went wrong
	// last.
	lastErr   error
	lastErrAt time.Time
	// connected is what Metrics.Connected last said.
	connected bool
	// heard counts the responses of the server, and heardAt, per type, what
	// heard was when a stream carrying the type last ended: a stream that
	// ends without an answer while heard has moved past the marks of its
	// types ended while another stream of the server answered (per-type
	// streams: the server is up, the type had nothing to say yet).
	heard   uint64
	heardAt map[string]uint64
}

// heardLocked records a response of s: the server is up. It returns
// whether an outage ended, and how long it lasted, and whether
// Metrics.Connected is to say so.
func (c *Client) heardLocked(s *server) (recovered bool, outage time.Duration, nowConnected bool) {
	s.heard++
	if s.unreachable != nil {
		recovered, outage = true, c.clock.Now().Sub(s.unreachableSince)
	}
	s.unreachable = nil
	nowConnected = !s.connected
	if nowConnected {
		s.since = c.clock.Now()
	}
	s.connected = true
	return recovered, outage, nowConnected
}

// routineEndLocked tells whether the end of a stream is routine: the server
// answered on it, or on another stream since it began (the last end of its
// types). It notes the end for the streams of these types to come.
func (s *server) routineEndLocked(se *transport.StreamError) bool {
	var mark uint64
	if s.heardAt == nil {
		s.heardAt = make(map[string]uint64)
	}
	for _, u := range se.TypeURLs {
		mark = max(mark, s.heardAt[u])
		s.heardAt[u] = s.heard
	}
	return se.Answered || s.heard > mark
}

// handleStreamEnd suspends the does-not-exist timers of the names the
// stream carried, to restart once they are sent on a new stream. A routine
// end (routineEndLocked) tells nobody anything: the transport reconnects.
// A stream that fails without an answer makes the server unhealthy (gRFC
// A57): every watcher of the server is told once, until it answers again.
// Those holding data keep it (an ambient error); those still waiting learn
// they cannot get it for now (a resource error).
func (c *Client) handleStreamEnd(s *server, se *transport.StreamError) {
	c.mu.Lock()
	if c.closed || s.refs == 0 { // closed, or released (see preferLocked)
		c.unlock()
		return
	}
	cause := se.Err
	if cause == nil {
		cause = errors.New("stream ended")
	} else {
		s.lastErr, s.lastErrAt = cause, c.clock.Now()
	}
	types := make(map[string]bool, len(se.TypeURLs))
	for _, u := range se.TypeURLs {
		types[u] = true
	}
	routine := s.routineEndLocked(se)
	first := !routine && s.unreachable == nil
	if !routine {
		if s.unreachable == nil {
			s.unreachableSince = c.clock.Now()
		}
		s.unreachable = cause
		// gRFC A71: an authority with a watcher waiting on what the cache
		// lacks moves to its next server (with A95's
		// fallback_on_reachability_only, any authority of s does). Its
		// entries leave s, so the loop below neither stops their timers
		// (the move did) nor tells their watchers: they are told only
		// once no server is left to try.
		c.eachAuthorityLocked(func(a *authority) {
			if a.current() == s && c.shouldFallBackLocked(a) {
				c.fallBackLocked(a, cause)
			}
		})
	}
	wasConnected := s.connected
	if first {
		s.connected = false
		s.since = s.unreachableSince
	}
	for url, tc := range c.caches {
		// The timers of the stream's types stop; the health of the server,
		// and so what watchers are told, is the server's, whichever of its
		// streams brought the news.
		onStream := types[url]
		if !onStream && !first {
			continue
		}
		for _, e := range tc.entries {
			if e.srv != s {
				continue
			}
			if onStream {
				e.stopDNETimer()
			}
			if !first {
				continue
			}
			err := &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params, Err: s.unavailable(cause)}
			switch {
			case e.value != nil:
				c.notifyLocked(tc, e, notifyAmbientError, nil, err, false)
			case e.status == StatusRequested && !e.hasData():
				c.notifyLocked(tc, e, notifyResourceError, nil, err, false)
			}
		}
		if ww := tc.wildcard; first && ww != nil && ww.srv == s {
			c.notifyWildcardLocked(tc, &Error{TypeURL: tc.typ.TypeURL(), Name: resources.Wildcard, Err: s.unavailable(cause)})
		}
	}
	c.unlock()
	if first {
		c.logger.Warn(s.sourceName()+" unavailable", "server", s.cfg.ServerURI, "err", cause)
		c.metrics.ServerFailure(s.cfg.ServerURI)
		if wasConnected {
			c.metrics.Connected(s.cfg.ServerURI, false)
		}
	}
}

// logRecovered logs the end of an outage of s, which lasted outage. Not
// under c.mu. At warning level, as its beginning was (handleStreamEnd):
// a log that passes only warnings (DefaultLogger, with no Options.Logger)
// must not show an outage begin and never end.
func (c *Client) logRecovered(s *server, outage time.Duration) {
	c.logger.Warn(s.sourceName()+" reachable again", "server", s.cfg.ServerURI, "outage", outage)
}

// notifyWildcardLocked gives the wildcard watchers of tc an ambient error.
func (c *Client) notifyWildcardLocked(tc *typeCache, err error) {
	ws := make([]*watcher, 0, len(tc.wildcard.watchers))
	for w := range tc.wildcard.watchers {
		ws = append(ws, w)
	}
	c.cbs.schedule(func() {
		for _, w := range ws {
			w.deliver(notifyAmbientError, nil, err)
		}
	})
}

// handleUnservable tells the watchers of names, subscriptions of typeURL
// to s, that s's transport cannot fetch them (see
// transport.Handler.OnUnservable). It is no answer of the server and
// leaves its health alone: the server is not marked connected, an outage
// is not ended, and the next failure of a stream is judged as if this
// report had not come. Content the transport rejected (a bad resource file)
// is a rejection, as a NACK is (ErrResourceInvalid; StatusNACKed when a
// value is held, which stays); anything else means the name cannot be had
// from s for now (ErrServerUnavailable). Otherwise the status is left as it
// was: a name still REQUESTED gets its does-not-exist timer once the
// transport can serve it and sends it, and a timer already running (the
// last valid file lacked the name) runs on. Either way the error is kept
// for watchers that come later, until something else replaces it.
func (c *Client) handleUnservable(s *server, typeURL string, names []string, cause error) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed || s.refs == 0 {
		return
	}
	tc := c.caches[typeURL]
	if tc == nil {
		return
	}
	rejected := errors.Is(cause, transport.ErrContentRejected)
	now := c.clock.Now()
	for _, key := range names {
		if key == resources.Wildcard {
			if ww := tc.wildcard; ww != nil && ww.srv == s {
				c.notifyWildcardLocked(tc, c.unservableErr(s, tc, resources.Wildcard, nil, cause, rejected))
			}
			continue
		}
		e := tc.entries[key]
		if e == nil || e.srv != s {
			continue // unwatched since, or served by another server now
		}
		err := c.unservableErr(s, tc, e.name, e.rare().params, cause, rejected)
		status := e.status
		if rejected && e.value != nil {
			status = StatusNACKed
		}
		e.setStatus(status, cause, err, now)
		if e.value != nil {
			c.notifyLocked(tc, e, notifyAmbientError, nil, err, true)
		} else {
			c.notifyLocked(tc, e, notifyResourceError, nil, err, true)
		}
	}
}

// unservableErr is what the watchers of name are told when it cannot be
// fetched from s for cause.
func (c *Client) unservableErr(s *server, tc *typeCache, name string, params map[string]string, cause error, rejected bool) error {
	err := s.unavailable(cause)
	if rejected {
		err = fmt.Errorf("%w: %v", ErrResourceInvalid, cause)
	}
	return &Error{TypeURL: tc.typ.TypeURL(), Name: name, DynamicParameters: params, Err: err}
}
