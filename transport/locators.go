package transport

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// Dynamic parameters on the wire (discovery.v3.ResourceLocator).
//
// A subscription is named by a key: the resource name alone when it has no
// dynamic parameters (so that such subscriptions cost what they always
// did), or SubscriptionKey(name, params) when it has. The transport turns
// each parameterised key into a ResourceLocator{name, dynamic_parameters}:
// SotW resource_locators, delta resource_locators_subscribe and
// resource_locators_unsubscribe. The spec makes resource_locators an
// alternative to resource_names and lets a request mix them; the client
// also lists the name of every parameterised subscription in the plain
// names (SotW resource_names, delta resource_names_subscribe, once per name
// however many parameter sets it has), so that a server that ignores
// locators still serves the resource. A server that reads locators sees the
// name both ways; a variant it sends for the plain name reaches a
// parameterised subscription only if its constraints match that
// subscription's parameters, so nothing is delivered wrongly. The plain name
// is unsubscribed only when no subscription of the name, plain or
// parameterised, is left.
//
// Internally the plain name a parameterised subscription needs is the key
// name+"\x00" (implicitKey), counted per name in typeState.params, and goes
// through the same pending/resubscribe bookkeeping as any other key; it is
// never reported to the handler.
//
// initial_resource_versions is keyed by name only (the spec's map has no
// room for parameters): a name goes in with the version the client holds
// when every subscription of the name holds the same version, and is left
// out otherwise, so that the server sends it again rather than believing the
// client holds a variant it does not. A subscription that holds nothing
// agrees with no version, and the wildcard counts as a subscription of each
// plain name it covers.

// keySep separates a name from its parameters in a subscription key. A
// watched name never contains it (the client refuses such names).
const keySep = '\x00'

// SubscriptionKey returns the key of a subscription to name with dynamic
// parameters params: name itself when params is empty, otherwise name, a NUL
// byte and the parameters sorted by key, each key and value prefixed by its
// length. Equal parameter sets give equal keys.
func SubscriptionKey(name string, params map[string]string) string {
	if len(params) == 0 {
		return name
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte(keySep)
	for _, k := range keys {
		writeLP(&b, k)
		writeLP(&b, params[k])
	}
	return b.String()
}

func writeLP(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// ParseSubscriptionKey splits a key made by SubscriptionKey into the name
// and its parameters (nil for a plain name).
func ParseSubscriptionKey(key string) (name string, params map[string]string, err error) {
	i := strings.IndexByte(key, keySep)
	if i < 0 {
		return key, nil, nil
	}
	name, rest := key[:i], key[i+1:]
	if rest == "" {
		return "", nil, errors.New("subscription key without parameters after its separator")
	}
	params = make(map[string]string)
	for rest != "" {
		var k, v string
		if k, rest, err = readLP(rest); err != nil {
			return "", nil, err
		}
		if v, rest, err = readLP(rest); err != nil {
			return "", nil, err
		}
		params[k] = v
	}
	return name, params, nil
}

func readLP(s string) (field, rest string, err error) {
	lenText, after, ok := strings.Cut(s, ":")
	n, convErr := strconv.Atoi(lenText)
	if !ok || convErr != nil || n < 0 || n > len(after) {
		return "", "", errors.New("malformed subscription key parameters")
	}
	return after[:n], after[n:], nil
}

// KeyName returns the resource name of a subscription key.
func KeyName(key string) string {
	if i := strings.IndexByte(key, keySep); i >= 0 {
		return key[:i]
	}
	return key
}

// paramKey tells a parameterised key (implicit ones included) from a plain
// name, and returns its name.
func paramKey(key string) (name string, ok bool) {
	i := strings.IndexByte(key, keySep)
	if i < 0 {
		return key, false
	}
	return key[:i], true
}

// implicitKey is the key of the plain name that the parameterised
// subscriptions of name need on the wire (see above).
func implicitKey(name string) string { return name + string(keySep) }

func isImplicit(key string) bool { return len(key) > 0 && key[len(key)-1] == keySep }

// locatorOf builds the ResourceLocator of a parameterised key.
func locatorOf(key string) *discoveryv3.ResourceLocator {
	name, params, err := ParseSubscriptionKey(key)
	if err != nil {
		// Keys come from SubscriptionKey; a malformed one is sent as the
		// name it starts with, which is the most a server could use.
		return &discoveryv3.ResourceLocator{Name: KeyName(key)}
	}
	return &discoveryv3.ResourceLocator{Name: name, DynamicParameters: params}
}

// sotwWire splits the sorted keys of a SotW request into resource_names
// (plain names, and the name of each parameterised key, once each) and
// resource_locators. Keys sort with a name's parameterised keys right after
// the name itself (NUL sorts first), so duplicates are adjacent.
func (ts *typeState) sotwWireLocked(keys []string) (names []string, locs []*discoveryv3.ResourceLocator) {
	names = make([]string, 0, len(keys))
	for _, k := range keys {
		name, param := paramKey(k)
		if param && !isImplicit(k) {
			locs = append(locs, locatorOf(k))
		}
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
	}
	return names, locs
}

// deltaWireLocked turns the subscribe and unsubscribe keys of a delta
// request into names and locators. The plain name n is subscribed for the
// key n (a new plain subscription: the server sends the resource again,
// which the new subscription needs), and for implicitKey(n) unless the
// server has n already; it is unsubscribed only when neither is wanted any
// more.
func (ts *typeState) deltaWireLocked(sub, unsub []string) (subNames, unsubNames []string, subLocs, unsubLocs []*discoveryv3.ResourceLocator) {
	// told tells whether the server has the plain name through key k (k
	// is wanted and its subscription is not pending).
	told := func(k string) bool {
		if _, ok := ts.names[k]; !ok {
			return false
		}
		_, pending := ts.pendingSub[k]
		return !pending
	}
	for _, k := range sub {
		name, param := paramKey(k)
		switch {
		case param && !isImplicit(k):
			subLocs = append(subLocs, locatorOf(k))
			continue
		case param && told(name):
			continue
		case param:
			if _, ok := ts.pendingUnsub[name]; ok {
				// The plain subscription leaves as the parameterised
				// ones arrive: the server keeps the name (see below).
				continue
			}
		}
		if len(subNames) == 0 || subNames[len(subNames)-1] != name {
			subNames = append(subNames, name)
		}
	}
	for _, k := range unsub {
		name, param := paramKey(k)
		switch {
		case param && !isImplicit(k):
			unsubLocs = append(unsubLocs, locatorOf(k))
			continue
		case param:
			if _, ok := ts.names[name]; ok {
				continue
			}
		default:
			if _, ok := ts.names[implicitKey(name)]; ok {
				continue
			}
		}
		if len(unsubNames) == 0 || unsubNames[len(unsubNames)-1] != name {
			unsubNames = append(unsubNames, name)
		}
	}
	return subNames, unsubNames, subLocs, unsubLocs
}

// reportedKeys drops the implicit keys from keys, for the handler, which
// never asked for them. keys is not modified.
func reportedKeys(keys []string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if !isImplicit(k) {
			out = append(out, k)
		}
	}
	return out
}
