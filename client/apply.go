package client

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// maxNACKBytes bounds the error_detail of a NACK, as Envoy's 4 KiB does: a
// response of many bad resources, or of one whose type_url is a megabyte,
// must not make a NACK larger than the server will take. The transport
// truncates anything longer all the same; here the message is cut between
// errors, so that those it keeps are whole and it can say how many it left
// out.
const maxNACKBytes = transport.MaxErrorDetailBytes

// handleResponse applies one response and returns the verdict: nil to ACK,
// the errors found to NACK. done goes on the callback queue behind the
// notifications, so the transport reads on only once watchers have heard.
func (c *Client) handleResponse(s *server, r *transport.Response, done func()) error {
	c.mu.Lock()
	if c.closed || s.refs == 0 {
		// Closed, or a server released by a switch back (see preferLocked)
		// whose transport is closing: nothing of it applies any more.
		c.unlock()
		done()
		return nil
	}
	// An outage was logged when it began (handleStreamEnd); its end is
	// logged here, once, so that a reader of the log sees each outage both
	// begin and end.
	recovered, outage, nowConnected := c.heardLocked(s)
	// The control plane's identifier says which instance behind the
	// server's address answers: logged when it changes (the first
	// response, a reconnect to another instance), kept for the dump.
	newControlPlane := r.ControlPlane != "" && r.ControlPlane != s.controlPlane
	if newControlPlane {
		s.controlPlane = r.ControlPlane
	}
	// istiod's delta server has a known fault (see istiodDeltaWarning):
	// said once per server, not on every response or reconnect.
	var istiod string
	if r.Delta && !s.warnedIstiod {
		istiod = istiodSign(r.ControlPlane, s.cfg.ServerURI, c.node)
		s.warnedIstiod = istiod != ""
	}
	// A higher-priority server that answers is current again, before its
	// response applies: the entries it serves are found as they were.
	released := c.preferLocked(s)
	if !s.answered {
		c.serverAnsweredLocked(s)
	}
	tc := c.cacheLocked(r.TypeURL)
	var errs []error
	valid := 0
	if tc == nil {
		errs = []error{fmt.Errorf("resource type %q is not known to this client", r.TypeURL)}
	} else {
		errs, valid = c.applyLocked(s, tc, r)
	}
	c.cbs.schedule(done)
	c.unlock()
	c.closeReleased(released)
	if recovered {
		c.logRecovered(s, outage)
	}
	if newControlPlane {
		c.logger.Info("control plane identified", "server", s.cfg.ServerURI, "control_plane", r.ControlPlane)
	}
	if istiod != "" {
		c.logger.Warn(istiodDeltaWarning, "server", s.cfg.ServerURI, "sign", istiod)
	}
	if nowConnected {
		c.metrics.Connected(s.cfg.ServerURI, true)
	}
	c.metrics.ResourceUpdates(s.cfg.ServerURI, r.TypeURL, valid, len(errs))
	return nackError(errs)
}

// minItemsBuffer is the least capacity of a type's items buffer: small
// responses share one.
const minItemsBuffer = 16

// received is one resource of a response, identified and, if it changed,
// decoded.
type received struct {
	name      string
	env       resources.Envelope
	value     resources.Resource
	err       error // decode or validation error
	unchanged bool  // same bytes as last received: not decoded
	ignored   bool  // nobody asked for it: not decoded
	// entry is the cache entry named name, once looked up (or found by
	// its bytes): nil if there was none. A response of 10,000 unchanged
	// resources then costs one map lookup per resource, by its bytes.
	entry *entry
}

// applyLocked applies a response to the cache of its type and returns the
// errors found, and how many resources were valid.
func (c *Client) applyLocked(s *server, tc *typeCache, r *transport.Response) (errs []error, valid int) {
	if ww := tc.wildcard; ww != nil && ww.srv == s {
		ww.answered = true
	}
	tc.gen++
	gen := tc.gen
	now := c.clock.Now()
	// nameless counts errors not attributable to any resource: a response
	// with such an error cannot be trusted to list every resource, so it
	// deletes nothing by omission.
	nameless := 0
	// items reuses the type's buffer, cleared once applied: a response is
	// applied under c.mu, one at a time.
	items := tc.items[:0]
	if n := len(r.Resources) + len(r.DeltaResources); cap(items) < n || cap(items) > 4*n+minItemsBuffer {
		// One allocation of the right size: growing by appending to
		// 10,000 resources made four times the garbage. A buffer far
		// larger than the response is let go (10,000 items are 1.6 MB);
		// SotW, whose responses of a type are all about as large, keeps
		// reusing its own.
		items = make([]received, 0, max(n, minItemsBuffer))
	}
	defer func() {
		clear(items)
		tc.items = items[:0]
		if r.Delta && cap(items) > 4*minItemsBuffer {
			// A large delta response is the exception (the first, a
			// reconnect): the next of the type, if one ever comes, is
			// likely small, and a type may have no other.
			tc.items = nil
		}
	}()
	// fresh counts the names with no cache entry yet, to find duplicates
	// among them; names with entries are counted on the entry.
	var fresh map[string]int
	// seen counts the entries marked seen (seenGen = gen): when it reaches
	// the number of entries, none can be absent from the response.
	seen := 0

	// firstVariant and variantDup serve responses with variants (dynamic
	// parameters): the constraints of the variant that first matched an
	// entry, and the error when a second one matches it too.
	var firstVariant map[*entry]*discoveryv3.DynamicParameterConstraints
	var variantDup map[*entry]error
	add := func(it received, variant bool) {
		if it.entry == nil && !variant {
			it.entry = tc.entries[it.name]
		}
		if e := it.entry; e != nil {
			if e.seenGen == gen {
				e.rareW().dupGen = gen
				if prev := firstVariant[e]; variant && (prev != nil || it.env.Constraints != nil) && variantDup[e] == nil {
					if variantDup == nil {
						variantDup = make(map[*entry]error)
					}
					variantDup[e] = fmt.Errorf("resource %q: variants with constraints %s and %s both match the subscription with dynamic parameters %s",
						e.name, resources.ConstraintsString(prev), resources.ConstraintsString(it.env.Constraints), formatParams(e.rare().params))
				}
			} else {
				seen++
				if variant {
					if firstVariant == nil {
						firstVariant = make(map[*entry]*discoveryv3.DynamicParameterConstraints)
					}
					firstVariant[e] = it.env.Constraints
				}
			}
			e.seenGen = gen
		} else {
			if fresh == nil {
				fresh = make(map[string]int)
			}
			fresh[it.name]++
		}
		items = append(items, it)
	}
	identify := func(env resources.Envelope, err error) {
		if err == nil {
			it := c.identifyLocked(s, tc, env)
			if it.name != "" {
				if it.env.Constraints != nil || tc.variants[it.name] != nil {
					// Variants: each entry of the name whose parameters
					// the constraints match gets it (variants.go).
					for _, vit := range c.variantItemsLocked(s, tc, it) {
						add(vit, true)
					}
					return
				}
				add(it, false)
				return
			}
			err = it.err
		}
		errs = append(errs, err)
		nameless++
	}
	for _, a := range r.Resources {
		identify(resources.Unwrap(a))
	}
	for _, d := range r.DeltaResources {
		identify(resources.FromResource(d))
	}

	version := func(it *received) string {
		if r.Delta || (it.env.Wrapped && it.env.Version != "") {
			return it.env.Version
		}
		return r.Version
	}
	reportedDup := make(map[string]bool)
	for i := range items {
		it := &items[i]
		e := it.entry // nil only for a name without an entry: a fresh one is made below, once
		if (e != nil && e.rare().dupGen == gen) || fresh[it.name] > 1 {
			dupKey := it.name
			if e != nil {
				dupKey = e.key()
			}
			if !reportedDup[dupKey] {
				reportedDup[dupKey] = true
				cause := errors.New("named more than once in one response")
				if err := variantDup[e]; err != nil {
					errs = append(errs, err)
					cause = errors.New("two variants in one response match its dynamic parameters")
				} else {
					errs = append(errs, fmt.Errorf("resource %q appears more than once in the response", it.name))
				}
				if e != nil && e.srv == s {
					c.markErrorLocked(tc, e, cause, now)
				}
			}
			continue
		}
		if e == nil && !it.ignored && tc.wildcard != nil && tc.wildcard.srv == s {
			e = &entry{name: it.name, auth: tc.wildcard.auth, srv: s, seenGen: gen}
			tc.entries[it.name] = e
			seen++
		}
		if e == nil {
			c.applyToAliasesLocked(s, tc, nil, it, version(it), gen, now)
			continue
		}
		if e.srv == s {
			if err := c.applyItemLocked(tc, e, it, version(it), now); err != nil {
				errs = append(errs, err)
			} else {
				valid++
			}
		}
		c.applyToAliasesLocked(s, tc, e, it, version(it), gen, now)
	}

	// A SotW response made only of heartbeats refreshes TTLs; it is not a
	// state of the world (go-control-plane sends such responses with just
	// the resources that have a TTL).
	// Every entry seen (the usual case): none is absent, no need to look.
	// A resource the server reports an error for is not absent: the error
	// is what the server says of it (gRFC A88), not an omission.
	for _, re := range r.ResourceErrors {
		for _, e := range c.errorTargetsLocked(tc, re.GetResourceName()) {
			if e.srv == s && e.seenGen != gen {
				e.rareW().errGen = gen
			}
		}
	}
	if !r.Delta && tc.typ.AllResourcesRequiredInSotW() && nameless == 0 && !allHeartbeats(items) && seen < len(tc.entries) {
		c.deleteAbsentLocked(s, tc, gen, now)
	}
	errs = append(errs, c.applyRemovalsLocked(s, tc, r, gen, now)...)
	for _, re := range r.ResourceErrors {
		for _, e := range c.errorTargetsLocked(tc, re.GetResourceName()) {
			if e.srv != s || e.rare().errGen != gen {
				// Not subscribed, another server's, also sent in the
				// response, or named twice: nothing to report.
				continue
			}
			e.x.errGen = 0 // errGen == gen above: e has its rare part
			detail := re.GetErrorDetail()
			c.serverErrorLocked(s, tc, e, codes.Code(detail.GetCode()), detail.GetMessage(), now)
		}
	}
	return errs, valid
}

// serverErrorLocked applies an error the server reported for e (gRFC A88).
// A resource error is not a reason to NACK: the response is as the server
// meant it. NOT_FOUND and PERMISSION_DENIED are data errors: with the server
// marked fail_on_data_errors, what is held is dropped. Other codes are
// transient, and never drop anything. Watchers holding data that stays get
// an ambient error; the others a resource error.
func (c *Client) serverErrorLocked(s *server, tc *typeCache, e *entry, code codes.Code, msg string, now time.Time) {
	e.stopDNETimer()
	cause := &ServerReportedError{Source: s.sourceName(), Code: code, Message: msg}
	if prev, ok := e.rare().lastErr.(*ServerReportedError); ok && e.status == StatusReceivedError && *prev == *cause {
		// Said already: a SotW server may repeat its errors in every
		// response of the type. Watchers and logs hear of it once.
		return
	}
	had := e.hasData()
	if (code == codes.NotFound || code == codes.PermissionDenied) && s.cfg.FailOnDataErrors() && had {
		e.stopTTLTimer()
		c.dropBytesLocked(tc, e)
		e.value, e.version, e.rcvVersion = nil, "", ""
		e.setRawErr(nil)
		e.setFromDisk(false)
		c.persistChangedLocked(tc, e)
	}
	err := &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params, Err: cause}
	e.setStatus(StatusReceivedError, cause, err, now)
	c.logq.Info("server reported an error for a resource", "server", s.cfg.ServerURI,
		"control_plane", s.controlPlane, "type", tc.typ.TypeURL(), "name", e.logName(), "code", code.String(), "message", msg)
	if e.value != nil {
		c.notifyLocked(tc, e, notifyAmbientError, nil, err, true)
		return
	}
	// Wildcard watchers hear of it only if they had seen the resource.
	c.notifyLocked(tc, e, notifyResourceError, nil, err, had)
	if e.watchers.len() == 0 {
		c.forgetLocked(tc, e)
	}
}

func allHeartbeats(items []received) bool {
	for i := range items {
		if !items[i].env.IsHeartbeat() {
			return false
		}
	}
	return len(items) > 0
}

// applyItemLocked applies one received resource to the entry it names and
// returns the error to NACK with, if any.
func (c *Client) applyItemLocked(tc *typeCache, e *entry, it *received, version string, now time.Time) error {
	if !it.env.IsHeartbeat() {
		e.setConstraints(it.env.Constraints)
	}
	switch {
	case it.env.IsHeartbeat():
		// version, not the wrapper's: a SotW wrapper may leave its version
		// out (go-control-plane's heartbeats do), and the resource's
		// version is then the response's version_info.
		if !e.hasData() || version != e.rcvVersion {
			return fmt.Errorf("resource %q: heartbeat (no body) for version %q, but the client holds %q", it.name, version, e.rcvVersion)
		}
		c.applyTTLLocked(tc, e, it.env)
	case it.unchanged:
		e.rcvVersion, e.src = version, e.srv
		if err := e.rare().rawErr; err != nil {
			return err
		}
		e.version = version
		if e.status == StatusReceivedError || (e.status == StatusDoesNotExist && e.value != nil) {
			// The server sends again what it had reported an error for,
			// or deleted while the value was kept (gRFC A88): the error is
			// over. Watchers hold this value already.
			e.setStatus(StatusACKed, nil, nil, now)
		}
		c.applyTTLLocked(tc, e, it.env)
	case it.err != nil:
		c.rejectLocked(tc, e, it, version, now)
		return it.err
	default:
		c.acceptLocked(tc, e, it, version, now)
	}
	return nil
}

// applyToAliasesLocked applies a delta resource to the subscriptions made
// under its aliases (VHDS subscribes by alias: "route-config/domain"). The
// entry keyed by the alias tracks its canonical name, so that removing the
// canonical name removes it too. Errors were counted for the canonical name
// already.
func (c *Client) applyToAliasesLocked(s *server, tc *typeCache, canonical *entry, it *received, version string, gen uint64, now time.Time) {
	for _, alias := range it.env.Aliases {
		alias = canonicalReceived(alias)
		ae := tc.entries[alias]
		if alias == it.name || ae == nil || ae.srv != s || ae.seenGen == gen {
			continue
		}
		ae.seenGen = gen
		tc.trackAlias(it.name, ae)
		ait := *it
		ait.name = alias
		if it.err == nil && !it.env.IsHeartbeat() {
			// Judge "unchanged" by what the alias entry holds; a value
			// skipped as unchanged for the canonical entry is that entry's.
			ait.unchanged = bytes.Equal(ae.raw(), it.env.Body.GetValue()) && sameSource(ae, s)
			if !ait.unchanged && ait.value == nil && canonical != nil {
				ait.value = canonical.value
			}
			if !ait.unchanged && ait.value == nil {
				continue
			}
		}
		_ = c.applyItemLocked(tc, ae, &ait, version, now)
	}
}

// identifyLocked learns the name of a resource and decodes it unless its
// bytes are those last received for that name, or nobody wants it.
func (c *Client) identifyLocked(s *server, tc *typeCache, env resources.Envelope) received {
	if hasNUL(env.Name) {
		// NUL separates a name from its parameters in cache keys: such a
		// name could reach a subscription it does not name.
		return received{env: env, err: fmt.Errorf("resource %q: a resource name cannot contain a NUL byte", env.Name)}
	}
	it := received{name: canonicalReceived(env.Name), env: env}
	if env.IsHeartbeat() {
		if it.name == "" {
			it.err = errors.New("heartbeat resource without a name")
		}
		return it
	}
	body := env.Body
	if body.GetTypeUrl() != tc.typ.TypeURL() {
		it.err = fmt.Errorf("resource %q: type_url %q in a response for %s", it.name, body.GetTypeUrl(), tc.typ.TypeURL())
		return it
	}
	if e := tc.lookupRaw(body.GetValue()); e != nil && (it.name == "" || it.name == e.name) && sameSource(e, s) {
		// An entry in byRaw is in entries under its name: forgetLocked
		// drops both.
		it.name, it.unchanged, it.entry = e.name, true, e
		return it
	}
	if it.name != "" && !c.wantsLocked(s, tc, it.name) && !c.wantsAnyLocked(s, tc, env.Aliases) {
		it.ignored = true
		return it
	}
	decodeInto(tc, s.dctx, &it)
	return it
}

// sameSource tells whether the bytes e last received, coming again from s,
// are the same value: they were decoded in the context s decodes in, or
// they were accepted and the value does not depend on its source. A value
// may depend on its server (a Cluster's lrs_server "self" names it), so
// such bytes coming from another server after a fallback or the return to
// the primary (gRFC A71) are decoded again; so are rejected ones, which the
// other server's context may judge otherwise. Everything else is kept,
// and nothing re-delivered, at a switch of servers.
func sameSource(e *entry, s *server) bool {
	if e.src == nil || e.src == s || e.src.dctx == s.dctx {
		return true
	}
	return e.value != nil && e.rare().rawErr == nil && !resources.DependsOnSource(e.value)
}

// decodeInto decodes the body of it in ctx, checking that the name it
// gives itself is the one it was wrapped under.
func decodeInto(tc *typeCache, ctx *resources.DecodeContext, it *received) {
	name, v, err := tc.typ.Decode(ctx, it.env.Body)
	name = canonicalReceived(name)
	switch {
	case hasNUL(name):
		name, err = "", fmt.Errorf("resource %q: a resource name cannot contain a NUL byte", name)
	case it.name == "" && name == "" && err == nil:
		// A message without a name field of its own (an
		// LbEndpointCollection), sent bare: nothing to know it by. Without
		// this error such a resource was neither applied nor reported,
		// and the NACK was built of a nil error (a panic).
		err = fmt.Errorf("%s resource has no name: its message carries none, so it must come in a discovery.v3.Resource naming it", tc.typ.TypeName())
	case it.name == "":
		it.name = name
	case name != "" && name != it.name:
		err = fmt.Errorf("resource wrapped as %q is named %q", it.name, name)
	}
	it.value, it.err = v, err
	if it.err != nil {
		it.value = nil
	}
}

func (c *Client) wantsLocked(s *server, tc *typeCache, name string) bool {
	if e := tc.entries[name]; e != nil {
		return e.srv == s
	}
	return tc.wildcard != nil && tc.wildcard.srv == s
}

func (c *Client) wantsAnyLocked(s *server, tc *typeCache, names []string) bool {
	for _, n := range names {
		if e := tc.entries[canonicalReceived(n)]; e != nil && e.srv == s {
			return true
		}
	}
	return false
}

func (c *Client) acceptLocked(tc *typeCache, e *entry, it *received, version string, now time.Time) {
	e.stopDNETimer()
	c.unindexRawLocked(tc, e)
	// The response's own slice, not a copy (see entry.valueRaw); never
	// nil, so that an empty resource is recognised when resent.
	e.valueRaw = nonNil(it.env.Body.GetValue())
	e.setRaw(e.valueRaw)
	e.setRawErr(nil)
	tc.indexRaw(e)
	e.value, e.version, e.rcvVersion, e.src = it.value, version, version, e.srv
	e.setFromDisk(false)
	e.setStatus(StatusACKed, nil, nil, now)
	c.applyTTLLocked(tc, e, it.env)
	c.persistChangedLocked(tc, e)
	c.notifyLocked(tc, e, notifyUpdate, it.value, nil, true)
}

// rejectLocked records an invalid version of e. The last good value, if
// any, stays in force.
func (c *Client) rejectLocked(tc *typeCache, e *entry, it *received, version string, now time.Time) {
	if body := it.env.Body; body != nil && body.GetTypeUrl() == tc.typ.TypeURL() {
		// Remember the bad bytes, so that a resend is rejected again
		// without being decoded again.
		c.unindexRawLocked(tc, e)
		e.setRaw(nonNil(body.GetValue()))
		tc.indexRaw(e)
	}
	e.rcvVersion, e.src = version, e.srv
	e.setRawErr(it.err)
	if e.value != nil && e.srv.cfg.FailOnDataErrors() {
		// gRFC A88: a NACK is a data error, and a server marked
		// fail_on_data_errors cannot be trusted to have someone look into
		// it: the last good value goes, and watchers get a resource error.
		e.stopTTLTimer()
		e.value, e.version = nil, ""
		e.setValueRaw(nil)
		e.setFromDisk(false)
		c.persistChangedLocked(tc, e)
	}
	c.markErrorLocked(tc, e, it.err, now)
}

// markErrorLocked tells the watchers of e of an error with the resource
// without changing what is cached.
func (c *Client) markErrorLocked(tc *typeCache, e *entry, cause error, now time.Time) {
	e.stopDNETimer()
	e.setStatus(StatusNACKed, cause, nil, now)
	err := &Error{TypeURL: tc.typ.TypeURL(), Name: e.name, DynamicParameters: e.rare().params, Err: fmt.Errorf("%w: %v", ErrResourceInvalid, cause)}
	if e.value != nil {
		c.notifyLocked(tc, e, notifyAmbientError, nil, err, true)
	} else {
		c.notifyLocked(tc, e, notifyResourceError, nil, err, true)
	}
}
