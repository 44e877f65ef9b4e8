package client

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// Watcher receives the events of one watch.
//
// All callbacks of all watchers of a Client run one at a time, in order, on
// a goroutine of the client, never while the client holds a lock: a callback
// may watch and cancel freely. A callback should return promptly: the
// client reads the next response from the server only once the callbacks
// for the previous one have returned. Values passed to Update are shared
// with other watchers and must not be modified.
type Watcher[T resources.Resource] interface {
	// Update delivers a new valid version of the resource. For a wildcard
	// watch it is called for each resource of the type.
	Update(value T)
	// ResourceError reports that the resource cannot be used: it does not
	// exist (ErrResourceNotFound: never sent, deleted, or TTL expired), it
	// was rejected and no good version is held (ErrResourceInvalid), or the
	// server is unreachable and nothing is cached (ErrServerUnavailable).
	// The error is an *Error naming the resource.
	ResourceError(err error)
	// AmbientError reports trouble that leaves the last good value in
	// force: a rejected update, a Listener or Cluster deleted by the
	// server (gRFC A88, unless the server is marked fail_on_data_errors),
	// an error the server reports, or a lost stream.
	AmbientError(err error)
}

// WatcherFuncs adapts functions to a Watcher. Nil functions ignore their
// events.
type WatcherFuncs[T resources.Resource] struct {
	OnUpdate func(T)
	// OnUpdateWithInfo, if set, is called for updates instead of
	// OnUpdate, with where the update comes from.
	OnUpdateWithInfo func(T, UpdateInfo)
	OnResourceError  func(error)
	OnAmbientError   func(error)
}

// UpdateWithInfo implements UpdateInfoWatcher: OnUpdateWithInfo, or else
// OnUpdate.
func (f WatcherFuncs[T]) UpdateWithInfo(v T, info UpdateInfo) {
	if f.OnUpdateWithInfo != nil {
		f.OnUpdateWithInfo(v, info)
		return
	}
	f.Update(v)
}

// Update implements Watcher.
func (f WatcherFuncs[T]) Update(v T) {
	if f.OnUpdate != nil {
		f.OnUpdate(v)
	}
}

// ResourceError implements Watcher.
func (f WatcherFuncs[T]) ResourceError(err error) {
	if f.OnResourceError != nil {
		f.OnResourceError(err)
	}
}

// AmbientError implements Watcher.
func (f WatcherFuncs[T]) AmbientError(err error) {
	if f.OnAmbientError != nil {
		f.OnAmbientError(err)
	}
}

// Watch starts watching the resource of typ named name ("*" for every
// resource of a type that supports wildcard). It never blocks on the
// network. If the resource is cached, w gets it at once. The returned
// cancel is idempotent and may be called from a callback; once it returns,
// no callback of w starts, though one that had already started on the
// callback goroutine when cancel was called from another goroutine may still
// be running. The last cancel of a name unsubscribes from it; the resource
// stays cached until the unsubscription is handed to the transport, right
// after the running callbacks, so that a watch in between, which cancels the
// unsubscription out, finds it.
func Watch[T resources.Resource](c *Client, typ *resources.Type[T], name string, w Watcher[T]) (cancel func()) {
	return WatchWithOptions(c, typ, name, WatchOptions{}, w)
}

// WatchOptions modify one watch.
type WatchOptions struct {
	// DynamicParameters select a variant of the resource (discovery.v3
	// ResourceLocator.dynamic_parameters), on top of
	// Options.DynamicParameters: a key set here overrides the client's. Two
	// watches of one name whose merged parameters differ are two
	// subscriptions with two cache entries, each getting the variant whose
	// constraints its parameters match; equal sets share one. Ignored for
	// a wildcard watch. Nil, with no client defaults: a plain watch.
	DynamicParameters map[string]string
}

// WatchWithOptions is Watch with options for this watch. The parameters
// are copied; the caller may reuse the map.
func WatchWithOptions[T resources.Resource](c *Client, typ *resources.Type[T], name string, opts WatchOptions, w Watcher[T]) (cancel func()) {
	return c.watch(typ.TypeURL(), name, opts, newTypedWatcher(w))
}

// typedWatcher is a user's Watcher[T] with the client's record of it: one
// allocation per watch, with the cancel function's method value.
type typedWatcher[T resources.Resource] struct {
	watcher
	w  Watcher[T]
	uw UpdateInfoWatcher[T] // w, if it is one; nil otherwise
}

func newTypedWatcher[T resources.Resource](w Watcher[T]) *watcher {
	tw := &typedWatcher[T]{w: w}
	tw.uw, _ = w.(UpdateInfoWatcher[T])
	tw.sink = tw
	return &tw.watcher
}

func (tw *typedWatcher[T]) deliver(kind int, v resources.Resource, err error) {
	switch kind {
	case notifyUpdate, notifyUpdateFromDisk:
		t, ok := v.(T)
		if !ok {
			// Values come only from the watch's type (tc is set): a
			// watcher of a Go type the type does not decode to.
			typ := tw.tc.typ
			tw.w.ResourceError(&Error{TypeURL: typ.TypeURL(), Name: v.ResourceName(),
				Err: fmt.Errorf("%w: client decodes %s as %T, watcher wants %T", ErrResourceInvalid, typ.TypeName(), v, t)})
			return
		}
		if tw.uw != nil {
			tw.uw.UpdateWithInfo(t, UpdateInfo{FromDisk: kind == notifyUpdateFromDisk})
			return
		}
		tw.w.Update(t)
	case notifyResourceError:
		tw.w.ResourceError(err)
	case notifyAmbientError:
		tw.w.AmbientError(err)
	}
}

// WatchResource is Watch for a type known only by its URL, with values seen
// as resources.Resource.
func (c *Client) WatchResource(typeURL, name string, w Watcher[resources.Resource]) (cancel func()) {
	return c.watch(typeURL, name, WatchOptions{}, newTypedWatcher(w))
}

// watchParams merges the client's default dynamic parameters with a
// watch's; nil when both are empty.
func (c *Client) watchParams(opts WatchOptions) map[string]string {
	if len(c.params) == 0 && len(opts.DynamicParameters) == 0 {
		return nil
	}
	out := make(map[string]string, len(c.params)+len(opts.DynamicParameters))
	for k, v := range c.params {
		out[k] = v
	}
	for k, v := range opts.DynamicParameters {
		out[k] = v
	}
	return out
}

func (c *Client) watch(typeURL, name string, opts WatchOptions, w *watcher) (cancel func()) {
	c.mu.Lock()
	cancel = c.watchLocked(typeURL, name, opts, w)
	c.unlock()
	return cancel
}

func (c *Client) watchLocked(typeURL, name string, opts WatchOptions, w *watcher) (cancel func()) {
	if c.closed {
		// The callback goroutine is gone, or going: the watcher is told on
		// a goroutine of its own, once no callback can be running.
		err := &Error{TypeURL: typeURL, Name: name, Err: ErrClosed}
		c.cbs.afterClose(func() { w.deliver(notifyResourceError, nil, err) })
		return func() { w.canceled.Store(true) }
	}
	// fail takes the name as it is when called: a closure over name, which
	// changes below, would put name on the heap for every watch.
	fail := func(name string, err error) func() {
		c.cbs.schedule(func() { w.deliver(notifyResourceError, nil, &Error{TypeURL: typeURL, Name: name, Err: err}) })
		return func() { w.canceled.Store(true) }
	}
	tc := c.cacheLocked(typeURL)
	if tc == nil {
		return fail(name, fmt.Errorf("%w: resource type %s is not known to this client", ErrResourceInvalid, typeURL))
	}
	w.tc = tc
	if name == resources.Wildcard {
		if !tc.typ.SupportsWildcard() {
			return fail(name, fmt.Errorf("%w: %s does not support wildcard subscriptions", ErrResourceInvalid, tc.typ.TypeName()))
		}
		return c.watchWildcardLocked(tc, w)
	}
	// Keyed, and sent to the server, in canonical form: any spelling of
	// the name the server answers with then finds this entry.
	canonical, err := canonicalName(name)
	if err != nil {
		return fail(name, fmt.Errorf("%w %q: %v", ErrInvalidName, name, err))
	}
	name = canonical
	if hasNUL(name) {
		// NUL separates a name from its parameters in subscription keys.
		return fail(name, fmt.Errorf("%w %q: a resource name cannot contain a NUL byte", ErrInvalidName, name))
	}
	params := c.watchParams(opts)
	key := transport.SubscriptionKey(name, params)
	a, err := c.authorityForLocked(name)
	if err != nil {
		return fail(name, err)
	}
	s := a.current()
	if tc.typ.DeltaOnly() {
		// Asked only then: APITypeFor copies the server's config.
		if api := s.cfg.APITypeFor(typeURL); !api.IsDelta() {
			return fail(name, fmt.Errorf("%w: %s resources can only be fetched over delta xDS, and server %s speaks %v",
				ErrResourceInvalid, tc.typ.TypeName(), s.cfg.ServerURI, api))
		}
	}
	e := tc.entries[key]
	if e == nil {
		e = &entry{name: name, auth: a, srv: s}
		if key != name || params != nil {
			x := e.rareW()
			x.key, x.params = key, params
		}
		tc.entries[key] = e
		if params != nil {
			tc.addVariant(e)
			c.seedVariantLocked(tc, e)
		}
	}
	w.c, w.e = c, e
	if e.watchers.len() == 0 {
		// The first watcher of a name subscribes to it, even if the entry
		// is already cached through the wildcard.
		c.subscribeAllLocked(a, typeURL, key)
	}
	e.watchers.add(w)
	if s.unreachable != nil && (waiting(e) || a.reachabilityOnly) {
		// The server is down and this watcher would wait: fall back now
		// rather than at the next failed reconnection (gRFC A71). The
		// replay below then finds the new server, not yet failed.
		c.fallBackLocked(a, s.unreachable)
	}
	if c.serveFromDiskLocked(tc, e) {
		// Told to every watcher of e, w among them.
		return w.cancel
	}
	c.replayLocked(tc, e, w)
	return w.cancel
}

// replayLocked tells a new watcher what is already known of e.
func (c *Client) replayLocked(tc *typeCache, e *entry, w *watcher) {
	mkErr := func(err error) error {
		return &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params, Err: err}
	}
	switch {
	case e.value != nil:
		v, kind := e.value, notifyUpdate
		if e.rare().fromDisk {
			kind = notifyUpdateFromDisk
		}
		c.cbs.schedule(func() { w.deliver(kind, v, nil) })
		switch {
		case e.rare().reported != nil:
			err := e.rare().reported
			c.cbs.schedule(func() { w.deliver(notifyAmbientError, nil, err) })
		case e.rare().rawErr != nil:
			err := mkErr(fmt.Errorf("%w: %v", ErrResourceInvalid, e.rare().rawErr))
			c.cbs.schedule(func() { w.deliver(notifyAmbientError, nil, err) })
		}
	case e.rare().reported != nil:
		err := e.rare().reported
		c.cbs.schedule(func() { w.deliver(notifyResourceError, nil, err) })
	case e.status == StatusDoesNotExist:
		err := mkErr(ErrResourceNotFound)
		c.cbs.schedule(func() { w.deliver(notifyResourceError, nil, err) })
	case e.rare().rawErr != nil:
		err := mkErr(fmt.Errorf("%w: %v", ErrResourceInvalid, e.rare().rawErr))
		c.cbs.schedule(func() { w.deliver(notifyResourceError, nil, err) })
	case e.srv.unreachable != nil:
		err := mkErr(e.srv.unavailable(e.srv.unreachable))
		c.cbs.schedule(func() { w.deliver(notifyResourceError, nil, err) })
	}
}

func (c *Client) unwatch(tc *typeCache, e *entry, w *watcher) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return
	}
	if !e.watchers.remove(w) {
		return
	}
	if e.watchers.len() > 0 {
		return
	}
	queued := c.unsubscribeAllLocked(e.auth, tc.typ.TypeURL(), e.key())
	if c.keptByWildcardLocked(tc, e) {
		// Still wanted through the wildcard. In delta the server answers
		// the unsubscription by resending it or removing it.
		e.stopDNETimer()
		return
	}
	if queued {
		return // forgotten when the removal is flushed
	}
	c.forgetLocked(tc, e)
}

// keptByWildcardLocked tells whether e, held, is wanted through the
// wildcard of its type.
func (c *Client) keptByWildcardLocked(tc *typeCache, e *entry) bool {
	return tc.wildcard != nil && tc.wildcard.srv == e.srv && e.hasData() && e.rare().params == nil
}

// forgetLocked drops an entry from the cache.
func (c *Client) forgetLocked(tc *typeCache, e *entry) {
	e.stopTimers()
	// Before e leaves the name's entries: its bytes may lead to another.
	c.unindexRawLocked(tc, e)
	tc.untrackAlias(e)
	if tc.entries[e.key()] == e {
		delete(tc.entries, e.key())
	}
	if e.rare().params != nil {
		tc.dropVariant(e)
	}
}

// unindexRawLocked makes tc.byRaw no longer find e by its last bytes
// received, leaving them on e.
func (c *Client) unindexRawLocked(tc *typeCache, e *entry) {
	raw := e.raw()
	if raw == nil {
		return
	}
	k := tc.rawKey(raw)
	if tc.byRaw[k] != e {
		return
	}
	delete(tc.byRaw, k)
	if tc.variants[e.name] != nil {
		// One variant may be held by several entries of the name: the
		// bytes lead to another, so that it still knows them when
		// resent.
		for _, o := range c.entriesOfLocked(tc, e.name) {
			if o != e && bytes.Equal(o.raw(), raw) {
				tc.byRaw[k] = o
				break
			}
		}
	}
}

// dropBytesLocked forgets the bytes of e: those of its value and the last
// received.
func (c *Client) dropBytesLocked(tc *typeCache, e *entry) {
	c.unindexRawLocked(tc, e)
	e.valueRaw = nil
	e.setRaw(nil)
}

// nonNil returns b, or an empty slice for nil: a resource's bytes are never
// nil once received, nil meaning "none".
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (c *Client) watchWildcardLocked(tc *typeCache, w *watcher) func() {
	if tc.wildcard == nil {
		a, err := c.authorityForLocked(resources.Wildcard)
		if err != nil {
			c.cbs.schedule(func() {
				w.deliver(notifyResourceError, nil, &Error{TypeURL: tc.typ.TypeURL(), Name: resources.Wildcard, Err: err})
			})
			return func() { w.canceled.Store(true) }
		}
		tc.wildcard = &wildcardWatch{auth: a, srv: a.current(), watchers: make(map[*watcher]struct{})}
		c.subscribeAllLocked(a, tc.typ.TypeURL(), resources.Wildcard)
		if s := a.current(); s.unreachable != nil {
			c.fallBackLocked(a, s.unreachable) // as for a named watch
		}
		c.serveWildcardFromDiskLocked(tc)
	}
	ww := tc.wildcard
	ww.watchers[w] = struct{}{}
	for _, e := range tc.entries {
		if e.srv == ww.srv && e.value != nil {
			v, kind := e.value, notifyUpdate
			if e.rare().fromDisk {
				kind = notifyUpdateFromDisk
			}
			c.cbs.schedule(func() { w.deliver(kind, v, nil) })
		}
	}
	return sync.OnceFunc(func() {
		w.canceled.Store(true)
		c.unwatchWildcard(tc, ww, w)
	})
}

func (c *Client) unwatchWildcard(tc *typeCache, ww *wildcardWatch, w *watcher) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed || tc.wildcard != ww {
		return
	}
	delete(ww.watchers, w)
	if len(ww.watchers) > 0 {
		return
	}
	tc.wildcard = nil
	if c.unsubscribeAllLocked(ww.auth, tc.typ.TypeURL(), resources.Wildcard) {
		return // the entries it alone kept are forgotten when the removal is flushed
	}
	for _, e := range tc.entries {
		if e.srv == ww.srv && e.watchers.len() == 0 {
			c.forgetLocked(tc, e)
		}
	}
}
