package client

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/transport"
)

// Dynamic parameters (discovery.v3 ResourceLocator, ResourceName).
//
// A watch with dynamic parameters (WatchOptions, Options.DynamicParameters)
// is its own cache entry, keyed by transport.SubscriptionKey(name, params)
// and listed in typeCache.variants under its name; a plain watch is the entry
// keyed by the name, as ever. A received resource that names itself with
// resource_name and constraints is a variant: it is matched against the
// parameters of every entry of its name (the plain entry has none) and
// applied to each entry it matches, decoded once. A resource without
// constraints matches every entry of its name. Two variants in one response
// that match one entry are an error: the response is NACKed with a message
// naming both. SotW: the entries of a whole-world type (Listener, Cluster)
// that no variant of a response matched are deleted, as any absent resource
// is; delta: removed_resource_names removes the variant with exactly those
// constraints from the entries holding it, a plain removed_resources name
// the variant without constraints (and does-not-exist for entries holding
// nothing). A new entry with parameters starts with the variant another
// entry of its name holds from the same server, if exactly one matches
// (seedVariantLocked): a delta server sends nothing twice.

// seedVariantLocked gives e, a new entry with parameters, the variant of
// its name that its server has already sent and another entry holds, when
// exactly one such variant matches e's parameters. Over delta a server
// sends a resource once per stream: one that ignores locators (stock
// go-control-plane) never sends it again for a new subscription with
// parameters, and the watch would wait for what the client already holds
// until its does-not-exist timer fired. A server that reads locators
// answers the new locator with its own choice, which then replaces this
// one. Values with a TTL, from disk, or not ACKed are not lent: each has
// state (a timer, a pending answer) the new entry would not share.
func (c *Client) seedVariantLocked(tc *typeCache, e *entry) {
	var from *entry
	for _, o := range c.entriesOfLocked(tc, e.name) {
		if o == e || o.srv != e.srv || o.src != e.srv || o.value == nil || o.rare().fromDisk ||
			o.status != StatusACKed || o.rare().ttlTimer != nil || !resources.MatchConstraints(o.rare().constraints, e.rare().params) {
			continue
		}
		if from != nil && !proto.Equal(from.rare().constraints, o.rare().constraints) {
			return // two variants match: only the server can say which
		}
		from = o
	}
	if from == nil {
		return
	}
	e.value, e.version, e.rcvVersion, e.src = from.value, from.version, from.rcvVersion, from.src
	e.valueRaw = from.valueRaw
	e.setRaw(from.raw())
	e.setConstraints(from.rare().constraints)
	e.setStatus(StatusACKed, nil, nil, from.lastUpdated)
	c.persistChangedLocked(tc, e)
}

// variantItemsLocked fans a received resource of a name with variants out
// to the entries of the name whose parameters its constraints match: one
// item per entry, with the entry set, plus one with no entry for the
// wildcard to make the plain entry when there is none and the constraints
// match a subscription without parameters. A variant nobody matches is
// dropped, as an unwanted resource is.
func (c *Client) variantItemsLocked(s *server, tc *typeCache, it received) []received {
	body := it.env.Body.GetValue()
	decoded := it.value != nil || it.err != nil || it.env.IsHeartbeat()
	decode := func() {
		if !decoded {
			decoded = true
			it.value, it.err = nil, nil
			decodeInto(tc, s.dctx, &it)
		}
	}
	var out []received
	for _, e := range c.entriesOfLocked(tc, it.name) {
		if e.srv != s || !resources.MatchConstraints(it.env.Constraints, e.rare().params) {
			continue
		}
		vit := it
		vit.entry, vit.ignored = e, false
		if !it.env.IsHeartbeat() && it.err == nil {
			// Unchanged is judged by what this entry holds: another
			// entry's bytes may be those of another variant.
			vit.unchanged = bytes.Equal(e.raw(), body) && sameSource(e, s)
			if !vit.unchanged {
				decode()
				vit.value, vit.err = it.value, it.err
			}
		}
		out = append(out, vit)
	}
	if ww := tc.wildcard; ww != nil && ww.srv == s && tc.entries[it.name] == nil && resources.MatchConstraints(it.env.Constraints, nil) {
		decode()
		vit := it
		vit.entry, vit.ignored, vit.unchanged = nil, false, false
		out = append(out, vit)
	}
	return out
}

// applyRemovalsLocked applies a delta response's removals and returns the
// errors found. A plain name (removed_resources, or a removed_resource_names
// entry without constraints) removes the variant without constraints: from
// the plain entry, and from those with dynamic parameters that hold it or
// nothing yet (the server does not have what they asked for). A
// removed_resource_names entry with constraints removes the variant with
// exactly those from the entries holding it. A removal of a Listener or
// Cluster held is a data error (gRFC A88, serverDeletedLocked): kept unless
// the server is marked fail_on_data_errors.
func (c *Client) applyRemovalsLocked(s *server, tc *typeCache, r *transport.Response, gen uint64, now time.Time) (errs []error) {
	for _, name := range r.Removed {
		if hasNUL(name) {
			continue // names nothing the client can hold (see identifyLocked)
		}
		name = canonicalReceived(name)
		for ae := range tc.aliasesOf[name] {
			if ae.srv == s && ae.seenGen != gen && tc.entries[ae.key()] == ae {
				c.serverDeletedLocked(s, tc, ae, "removed by the "+s.sourceName(), now)
			}
		}
		for _, e := range c.entriesOfLocked(tc, name) {
			if e.srv != s || e.rare().constraints != nil {
				continue
			}
			if e.seenGen == gen {
				errs = append(errs, fmt.Errorf("resource %q is both in resources and in removed_resources", name))
				continue
			}
			c.serverDeletedLocked(s, tc, e, "removed by the "+s.sourceName(), now)
		}
	}
	for _, rn := range r.RemovedVariants {
		name := canonicalReceived(rn.GetName())
		if hasNUL(name) {
			continue
		}
		for _, e := range c.entriesOfLocked(tc, name) {
			if e.srv != s || e.rare().constraints == nil || !proto.Equal(e.rare().constraints, rn.GetDynamicParameterConstraints()) {
				continue
			}
			if e.seenGen == gen {
				errs = append(errs, fmt.Errorf("resource %q with constraints %s is both in resources and in removed_resource_names",
					name, resources.ConstraintsString(e.rare().constraints)))
				continue
			}
			c.serverDeletedLocked(s, tc, e, "removed by the "+s.sourceName(), now)
		}
	}
	return errs
}

// errorTargetsLocked returns the entries a server's resource error for rn
// (gRFC A88) concerns: the plain entry of the name and, when the name has
// entries with dynamic parameters, those rn's constraints match (all of
// them for an error without constraints: the name fails for everyone).
func (c *Client) errorTargetsLocked(tc *typeCache, rn *discoveryv3.ResourceName) []*entry {
	if hasNUL(rn.GetName()) {
		return nil // a subscription key, which no server sends
	}
	name := canonicalReceived(rn.GetName())
	cons := rn.GetDynamicParameterConstraints()
	if tc.variants[name] == nil && cons.GetType() == nil {
		if e := tc.entries[name]; e != nil {
			return []*entry{e}
		}
		return nil
	}
	if resources.ValidateConstraints(cons) != nil {
		return nil // names no variant the client could hold
	}
	var out []*entry
	for _, e := range c.entriesOfLocked(tc, name) {
		if resources.MatchConstraints(cons, e.rare().params) {
			out = append(out, e)
		}
	}
	return out
}

// entriesOfLocked returns the entries of name: the plain one first, then
// those with dynamic parameters, by key, so that errors come in a stable
// order.
func (c *Client) entriesOfLocked(tc *typeCache, name string) []*entry {
	plain := tc.entries[name]
	vs := tc.variants[name]
	if len(vs) == 0 {
		if plain == nil {
			return nil
		}
		return []*entry{plain}
	}
	out := make([]*entry, 0, len(vs)+1)
	for e := range vs {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	if plain != nil {
		out = append([]*entry{plain}, out...)
	}
	return out
}

// hasNUL tells whether s has a NUL byte, which separates a name from its
// parameters in subscription keys (transport.SubscriptionKey).
func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

// logName is the entry's name for logs: with its dynamic parameters, if
// any, so that the lines of two subscriptions of one name tell them apart.
func (e *entry) logName() string {
	if e.rare().params == nil {
		return e.name
	}
	return e.name + formatParams(e.rare().params)
}

// formatParams renders dynamic parameters for errors, logs and dumps:
// {k1="v1", k2="v2"}, keys sorted; "{}" for none.
func formatParams(params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(params[k]))
	}
	b.WriteByte('}')
	return b.String()
}
