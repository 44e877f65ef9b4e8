package httpxds

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/goxds/xds/dataplane/httpfilter"
	"github.com/goxds/xds/dataplane/route"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/watchers"
)

// hostConfig is the configuration of one host at one snapshot: what its
// requests are routed by. Immutable but for its cache of the routes'
// client policies.
type hostConfig struct {
	h    *hostWatch
	snap *watchers.Snapshot
	// chain runs the listener's HTTP filters.
	chain *httpfilter.Chain
	// routes caches each route's clientRoute, kept from the previous
	// configuration while its route configuration and virtual host stay
	// (an update of endpoints).
	routes *sync.Map // *resources.Route → *clientRoute
}

// newHostConfig returns the configuration of s for h.
func newHostConfig(h *hostWatch, s *watchers.Snapshot, prev *hostConfig) *hostConfig {
	cfg := &hostConfig{h: h, snap: s}
	if prev != nil && prev.snap.VirtualHost == s.VirtualHost && prev.snap.RouteConfig == s.RouteConfig && prev.snap.Listener == s.Listener {
		cfg.routes, cfg.chain = prev.routes, prev.chain
		return cfg
	}
	cfg.routes = new(sync.Map)
	cfg.chain = httpfilter.NewChain(s.Listener, h.t.filterEnv())
	return cfg
}

// routeOf returns rt's client policy, worked out on its first request
// (Route.Raw unmarshals the route anew at each call).
func (cfg *hostConfig) routeOf(rt *resources.Route) *clientRoute {
	if v, ok := cfg.routes.Load(rt); ok {
		return v.(*clientRoute)
	}
	v, _ := cfg.routes.LoadOrStore(rt, newClientRoute(rt, cfg.snap.VirtualHost, cfg.snap.RouteConfig, cfg.h.t.srcHash))
	return v.(*clientRoute)
}

// clientRoute is what a client's request needs of a route beyond what
// package resources models, read once from its proto: Envoy's
// RouteAction fields for HTTP.
type clientRoute struct {
	mut      *mutations
	direct   *direct
	redirect *redirect
	// prefixRewrite replaces the matched prefix (or whole path, for a
	// path or regex match) when set; regex and substitution are
	// regex_rewrite's.
	prefixRewrite *string
	regex         *regexp.Regexp
	substitution  string
	// hostRewrite is host_rewrite_literal, "" for none.
	hostRewrite string
	// timeout is route.timeout, hasTimeout whether it is set (0: none);
	// idle the route's idle_timeout (0: none).
	timeout    time.Duration
	hasTimeout bool
	idle       time.Duration
	// retry is the route's retry policy, else the virtual host's, parsed
	// with Envoy's HTTP conditions; nil: one attempt.
	retry *route.RetryPolicy
	// attemptCount is the virtual host's include_request_attempt_count:
	// each attempt carries x-envoy-attempt-count.
	attemptCount bool
	// hash are the route's hash policies, in order.
	hash []hashPolicy
	// err is a route action this client cannot apply: its requests fail
	// with it, naming the route.
	err error
}

// hashPolicy is one of a route's hash_policy entries an HTTP client can
// apply
// (https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto#config-route-v3-routeaction-hashpolicy).
type hashPolicy struct {
	kind     hashKind
	name     string // the header (lower case), cookie or query parameter
	re       *regexp.Regexp
	sub      string
	terminal bool
	// src is hashSource's hash: the Transport's (transportSettings.srcHash).
	src uint64
}

type hashKind uint8

const (
	hashHeader hashKind = iota
	hashCookie
	hashQuery
	// hashSource is connection_properties with source_ip: the hash of the
	// Transport's source address.
	hashSource
)

// newClientRoute reads rt's client policy; src is what a source_ip hash
// policy hashes to (the Transport's srcHash).
func newClientRoute(rt *resources.Route, vh *resources.VirtualHost, rc *resources.RouteConfig, src uint64) *clientRoute {
	cr := &clientRoute{mut: mutationsOf(rt, vh, rc), attemptCount: vh.IncludeRequestAttemptCount}
	policy := rt.RetryPolicy
	if policy == nil {
		policy = vh.RetryPolicy
	}
	cr.retry = route.ParseRetryPolicy(policy, route.Options{HTTP: true})
	if rt.Timeout != nil {
		cr.timeout, cr.hasTimeout = *rt.Timeout, true
	}
	switch rt.Action {
	case resources.RouteActionDirectResponse:
		cr.direct = directOf(rt)
		return cr
	case resources.RouteActionRedirect:
		cr.redirect = redirectOf(rt)
		return cr
	case resources.RouteActionRoute:
	default:
		return cr
	}
	ra := rt.Raw().GetRoute()
	if d := ra.GetIdleTimeout(); d != nil {
		cr.idle = d.AsDuration()
	}
	if p := ra.GetPrefixRewrite(); p != "" {
		if strings.ContainsAny(p, "\r\n\x00?#") {
			cr.err = errors.New("prefix_rewrite: a control character, '?' or '#'")
		}
		cr.prefixRewrite = &p
	}
	if rr := ra.GetRegexRewrite(); rr != nil {
		re, err := regexp.Compile(rr.GetPattern().GetRegex())
		if err != nil {
			cr.err = fmt.Errorf("regex_rewrite.pattern: %w", err)
		}
		cr.regex, cr.substitution = re, rr.GetSubstitution()
	}
	switch hr := ra.GetHostRewriteSpecifier().(type) {
	case nil:
	case *routev3.RouteAction_HostRewriteLiteral:
		if strings.ContainsAny(hr.HostRewriteLiteral, "\r\n\x00 /") {
			cr.err = errors.New("host_rewrite_literal: not a host")
		}
		cr.hostRewrite = hr.HostRewriteLiteral
	case *routev3.RouteAction_AutoHostRewrite:
		// gRFC A81's, honoured from a trusted server only (the
		// resources' AutoHostRewrite), applied per endpoint.
	default:
		cr.err = fmt.Errorf("host rewrite %T is not supported by httpxds's client", hr)
	}
	for _, hp := range ra.GetHashPolicy() {
		p := hashPolicy{terminal: hp.GetTerminal()}
		switch k := hp.GetPolicySpecifier().(type) {
		case *routev3.RouteAction_HashPolicy_Header_:
			p.kind, p.name = hashHeader, strings.ToLower(k.Header.GetHeaderName())
			if rr := k.Header.GetRegexRewrite(); rr != nil {
				re, err := regexp.Compile(rr.GetPattern().GetRegex())
				if err != nil {
					cr.err = fmt.Errorf("hash_policy header %q: regex_rewrite: %w", p.name, err)
					continue
				}
				p.re, p.sub = re, rr.GetSubstitution()
			}
		case *routev3.RouteAction_HashPolicy_Cookie_:
			// A cookie policy with a ttl has Envoy's router make the
			// cookie when the request has none; a client has no
			// response to set it in before the request, so it hashes
			// the cookie only when the request carries it.
			p.kind, p.name = hashCookie, k.Cookie.GetName()
		case *routev3.RouteAction_HashPolicy_QueryParameter_:
			p.kind, p.name = hashQuery, k.QueryParameter.GetName()
		case *routev3.RouteAction_HashPolicy_ConnectionProperties_:
			// Envoy hashes the downstream's IP address, which for an app
			// behind a sidecar is the app's own (its pod IP): every
			// request of one client lands on one endpoint, the
			// stickiness this policy is configured for. The Transport is
			// that downstream: it hashes TransportOptions.SourceAddress,
			// else a value of its own fixed at NewTransport. Without
			// source_ip the policy hashes nothing, as Envoy's adds no
			// hash method then.
			if !k.ConnectionProperties.GetSourceIp() {
				continue
			}
			p.kind, p.src = hashSource, src
		default:
			// filter_state hashes an object that a filter of Envoy's
			// downstream connection or stream stored under a key (the
			// set_filter_state filters, a TLS inspector's): a client
			// runs no such filters and has no such state, so the policy
			// yields no hash and is skipped, as Envoy skips a policy
			// whose value is missing.
			continue
		}
		cr.hash = append(cr.hash, p)
	}
	return cr
}

// requestHash is the request's hash by the route's hash policies, as
// Envoy combines them (each hash that a policy yields mixed in, a terminal
// one that yields a hash ending the list), else a random one, so that the
// request lands anywhere on the ring.
func (cr *clientRoute) requestHash(v *reqView) uint64 {
	var h uint64
	hashed := false
	for i := range cr.hash {
		p := &cr.hash[i]
		var val string
		var ok bool
		switch p.kind {
		case hashHeader:
			val, ok = v.Get(p.name)
			if ok && p.re != nil {
				val = route.RegexSubstitute(p.re, val, p.sub)
			}
		case hashCookie:
			if c, err := v.r.Cookie(p.name); err == nil {
				val, ok = c.Value, true
			}
		case hashQuery:
			val, ok = v.query().Get(p.name)
		case hashSource:
			ok = true
		}
		if !ok {
			continue
		}
		x := p.src // hashSource's, worked out once
		if p.kind != hashSource {
			x = xxhash.Sum64String(val)
		}
		h = bits.RotateLeft64(h, 1) ^ x
		hashed = true
		if p.terminal {
			break
		}
	}
	if !hashed {
		return rand.Uint64()
	}
	return h
}

// rewritePath returns the path the request is sent with: prefix_rewrite
// replaces the matched prefix (the whole path for an exact or regex
// match), regex_rewrite substitutes every match, as Envoy's RouteAction
// says; the path unchanged otherwise.
func (cr *clientRoute) rewritePath(rt *resources.Route, path string) string {
	switch {
	case cr.prefixRewrite != nil:
		n := len(path)
		if rt.PathMatch == resources.PathMatchPrefix {
			n = min(len(rt.Prefix), n)
		}
		return *cr.prefixRewrite + path[n:]
	case cr.regex != nil:
		return route.RegexSubstitute(cr.regex, path, cr.substitution)
	}
	return path
}

// reqView is an HTTP client request as routing sees it: route.Headers
// with Envoy's pseudo-headers, and its query parameters (route.Query).
type reqView struct {
	r      *http.Request
	path   string // as sent, escaped
	parsed bool
	q      url.Values
}

// Get implements route.Headers: Envoy's pseudo-headers, else the values
// joined with ",".
func (v *reqView) Get(name string) (string, bool) {
	r := v.r
	switch name {
	case ":method":
		if r.Method == "" {
			return http.MethodGet, true
		}
		return r.Method, true
	case ":authority", "host":
		if r.Host != "" {
			return r.Host, true
		}
		return r.URL.Host, true
	case ":path":
		if r.URL.RawQuery != "" {
			return v.path + "?" + r.URL.RawQuery, true
		}
		return v.path, true
	case ":scheme":
		return r.URL.Scheme, true
	}
	return headerValue(r.Header, name)
}

// Last implements route.Headers.
func (v *reqView) Last(name string) (string, bool) { return lastHeader(v.r.Header, name) }

// queryOf is reqView's route.Query.
type queryOf struct{ v *reqView }

// Get implements route.Query: the first value of the parameter, the
// query parsed once.
func (q queryOf) Get(name string) (string, bool) {
	v := q.v
	if !v.parsed {
		v.q, _ = url.ParseQuery(v.r.URL.RawQuery)
		v.parsed = true
	}
	vs := v.q[name]
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// query returns v's query view; nil when the request has no query, which
// routing reads as no parameters.
func (v *reqView) query() route.Query {
	if v.r.URL.RawQuery == "" {
		return noQuery{}
	}
	return queryOf{v}
}

type noQuery struct{}

func (noQuery) Get(string) (string, bool) { return "", false }

// host is the request's authority: its Host, else its URL's host.
func (v *reqView) host() string {
	if v.r.Host != "" {
		return v.r.Host
	}
	return v.r.URL.Host
}
