package resources

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// PathMatchKind says how a Route matches the request path.
type PathMatchKind int

const (
	// PathMatchPrefix matches paths starting with Route.Prefix.
	PathMatchPrefix PathMatchKind = iota
	// PathMatchExact matches the path Route.Path.
	PathMatchExact
	// PathMatchRegex matches paths Route.Regex matches in full.
	PathMatchRegex
)

// String returns the PathMatchKind as text, for logs and errors.
func (k PathMatchKind) String() string {
	switch k {
	case PathMatchPrefix:
		return "prefix"
	case PathMatchExact:
		return "path"
	case PathMatchRegex:
		return "safe_regex"
	}
	return "PathMatchKind(" + strconv.Itoa(int(k)) + ")"
}

// RouteActionKind says what a matching Route does. Only RouteActionRoute
// forwards a request to clusters; a gRPC client fails RPCs that match a
// route of any other kind.
type RouteActionKind int

const (
	// RouteActionUnsupported is an action this library does not model
	// (filter_action, or none).
	RouteActionUnsupported RouteActionKind = iota
	// RouteActionRoute forwards to Cluster or WeightedClusters.
	RouteActionRoute
	// RouteActionNonForwarding is non_forwarding_action (server side).
	RouteActionNonForwarding
	// RouteActionDirectResponse is direct_response.
	RouteActionDirectResponse
	// RouteActionRedirect is redirect.
	RouteActionRedirect
)

// String returns the RouteActionKind as text, for logs and errors.
func (k RouteActionKind) String() string {
	switch k {
	case RouteActionUnsupported:
		return "unsupported"
	case RouteActionRoute:
		return "route"
	case RouteActionNonForwarding:
		return "non_forwarding_action"
	case RouteActionDirectResponse:
		return "direct_response"
	case RouteActionRedirect:
		return "redirect"
	}
	return "RouteActionKind(" + strconv.Itoa(int(k)) + ")"
}

// Route is one validated route of a virtual host. Like every decoded value
// it is immutable and shared: callers must not modify it.
type Route struct {
	// Name is the route's optional name.
	Name string

	// PathMatch says which of Prefix, Path and Regex applies.
	PathMatch PathMatchKind
	// Prefix is the path prefix of a PathMatchPrefix route ("" matches all).
	Prefix string
	// Path is the path of a PathMatchExact route.
	Path string
	// Regex is the path regex of a PathMatchRegex route, anchored at both
	// ends so that it must match the whole path.
	Regex *regexp.Regexp
	// CaseInsensitive is the inverse of match.case_sensitive (default
	// true); it applies to Prefix and Path, never to Regex.
	CaseInsensitive bool
	// Headers must all match.
	Headers []HeaderMatcher
	// QueryParameters must all match. gRPC requests have no query string,
	// so for a gRPC client a route with any of these never matches.
	QueryParameters []QueryParameterMatcher
	// RuntimeFraction is the share of requests the route matches, in
	// parts per million (0 to 1,000,000), from runtime_fraction's
	// default_value; -1 when the route has no runtime_fraction.
	RuntimeFraction int32

	// Action is what the route does; the fields below are for
	// RouteActionRoute only.
	Action RouteActionKind
	// Cluster is the single target cluster, or "" with WeightedClusters.
	Cluster string
	// WeightedClusters are the targets of a weighted_clusters action:
	// entries with weight 0 are dropped, the rest sum to at most 2^32-1.
	WeightedClusters []WeightedCluster
	// ClusterSpecifierPlugin, when neither Cluster nor WeightedClusters is
	// set, names the route configuration's plugin that chooses the cluster
	// of each request; its configuration is in
	// RouteConfig.ClusterSpecifierPlugins.
	ClusterSpecifierPlugin string
	// HashPolicies are the supported hash policies, in order. Unsupported
	// ones (cookie, query parameter, other filter state keys) are left out.
	HashPolicies []HashPolicy
	// Timeout is route.timeout; nil when unset.
	Timeout *time.Duration
	// MaxStreamDuration is max_stream_duration.max_stream_duration; nil
	// when unset, so the listener's value applies. Zero means no limit.
	MaxStreamDuration *time.Duration
	// GRPCTimeoutHeaderMax is max_stream_duration.grpc_timeout_header_max;
	// nil when unset. gRPC prefers it to MaxStreamDuration.
	GRPCTimeoutHeaderMax *time.Duration
	// RetryPolicy is the route action's retry_policy, nil when unset.
	RetryPolicy *routev3.RetryPolicy
	// AutoHostRewrite is the route action's auto_host_rewrite, honoured
	// only from a management server marked trusted_xds_server (gRFC
	// A81): from any other server, or with no server known, it is false,
	// whatever the route says. A request it routes carries, as its
	// authority, the hostname of the endpoint it is sent to (an EDS
	// endpoint's hostname, a LOGICAL_DNS cluster's host:port), when that
	// endpoint has one.
	AutoHostRewrite bool

	// FilterOverrides are the route's typed_per_filter_config, by filter
	// name, each parsed by its filter type's ParseOverride (or a
	// DisabledFilterOverride); nil when there are none. A weighted
	// cluster's overrides beat these, and these beat the virtual host's.
	FilterOverrides map[string]HTTPFilterConfig

	// raw is the route's part of the bytes received (see RouteConfig.raw).
	raw []byte
}

// WeightedCluster is one target of a weighted_clusters action.
type WeightedCluster struct {
	// Name is the cluster.
	Name string
	// Weight is the cluster's share, out of the sum of the route's weights.
	Weight uint32
	// FilterOverrides are the entry's typed_per_filter_config, as in
	// Route.FilterOverrides; they apply to requests sent to this entry.
	FilterOverrides map[string]HTTPFilterConfig
}

// HashPolicyKind says what a HashPolicy hashes.
type HashPolicyKind int

const (
	// HashPolicyHeader hashes a request header.
	HashPolicyHeader HashPolicyKind = iota
	// HashPolicyChannelID hashes the client channel's identity (filter
	// state key io.grpc.channel_id).
	HashPolicyChannelID
	// HashPolicySourceIP hashes the source IP (connection_properties).
	HashPolicySourceIP
)

// String returns the HashPolicyKind as text, for logs and errors.
func (k HashPolicyKind) String() string {
	switch k {
	case HashPolicyHeader:
		return "header"
	case HashPolicyChannelID:
		return "channel_id"
	case HashPolicySourceIP:
		return "source_ip"
	}
	return "HashPolicyKind(" + strconv.Itoa(int(k)) + ")"
}

// HashPolicy is one supported hash policy of a route action.
type HashPolicy struct {
	Kind HashPolicyKind
	// HeaderName is the header to hash (HashPolicyHeader), lower-cased.
	HeaderName string
	// RegexRewrite, if not nil, rewrites the header value before hashing:
	// every match is replaced by RegexSubstitution, which is kept as
	// configured (RE2 style, \1 for a capture group; Go's Regexp.Expand
	// spells that ${1}).
	RegexRewrite      *regexp.Regexp
	RegexSubstitution string
	// Terminal stops hash computation at this policy if it yields a hash.
	Terminal bool
}

// channelIDFilterStateKey is the one filter_state key gRPC hashes on.
const channelIDFilterStateKey = "io.grpc.channel_id"

// Raw returns the route as received, for the fields Route does not model,
// unmarshalled anew on each call as RouteConfig.Raw is; nil for a value
// not made by the decoder.
func (r *Route) Raw() *routev3.Route {
	m := new(routev3.Route)
	if r == nil || !unmarshalRaw(r.raw, m) {
		return nil
	}
	return m
}

// RegexPattern returns the path regex of a PathMatchRegex route as
// configured, without the anchors Regex adds; "" for other routes.
func (r *Route) RegexPattern() string {
	if r.PathMatch != PathMatchRegex || r.Regex == nil {
		return ""
	}
	s := r.Regex.String()
	// The decoder compiles ^(?:pattern)$; a Regex set by hand is returned
	// as it is.
	if inner, ok := strings.CutPrefix(s, fullMatchPrefix); ok {
		if inner, ok := strings.CutSuffix(inner, fullMatchSuffix); ok {
			return inner
		}
	}
	return s
}

// MatchPath reports whether path satisfies the route's path matcher. It
// does not look at headers, query parameters or the runtime fraction.
func (r *Route) MatchPath(path string) bool {
	switch r.PathMatch {
	case PathMatchPrefix:
		if r.CaseInsensitive {
			return hasPrefixFoldASCII(path, r.Prefix)
		}
		return strings.HasPrefix(path, r.Prefix)
	case PathMatchExact:
		if r.CaseInsensitive {
			return equalFoldASCII(path, r.Path)
		}
		return path == r.Path
	case PathMatchRegex:
		return r.Regex != nil && r.Regex.MatchString(path)
	}
	return false
}

// MatchGRPC reports whether the route matches a gRPC request to path
// (gRFC A28): the path matcher, every header matcher against header (a
// request's value for a name, and whether it has one: the caller decides
// how multiple values join and which headers are hidden), and the runtime
// fraction, drawn anew at each call. gRPC requests carry no query string,
// so a route with query parameter matchers never matches.
func (r *Route) MatchGRPC(path string, header func(name string) (string, bool)) bool {
	if !r.MatchPath(path) || len(r.QueryParameters) > 0 {
		return false
	}
	for _, h := range r.Headers {
		if !h.Match(header(h.Name())) {
			return false
		}
	}
	return r.RuntimeFraction < 0 || rand.Int32N(1_000_000) < r.RuntimeFraction
}

// ClusterNames returns every cluster the route can send a request to,
// without duplicates, in the order the route names them; nil unless the
// route's action is RouteActionRoute.
func (r *Route) ClusterNames() []string {
	if r.Action != RouteActionRoute {
		return nil
	}
	if r.Cluster != "" {
		return []string{r.Cluster}
	}
	out := make([]string, 0, len(r.WeightedClusters))
	seen := make(map[string]struct{}, len(r.WeightedClusters))
	for _, wc := range r.WeightedClusters {
		if _, dup := seen[wc.Name]; !dup {
			seen[wc.Name] = struct{}{}
			out = append(out, wc.Name)
		}
	}
	return out
}

// init fills the zero Route r from p. A route gRPC cannot use is not an
// error (gRFC A28): init returns why it is skipped instead, and r is then
// to be dropped.
func (r *Route) init(ctx *DecodeContext, p *routev3.Route, raw []byte, plugins *clusterPlugins) (skip string, err error) {
	if raw == nil {
		raw = marshalOrNil(p)
	}
	r.Name, r.RuntimeFraction, r.raw = p.GetName(), -1, raw
	if err := r.setMatch(p.GetMatch()); err != nil {
		return "", at("match", err)
	}
	switch a := p.GetAction().(type) {
	case *routev3.Route_Route:
		r.Action = RouteActionRoute
		skip, err := r.setRouteAction(ctx, a.Route, plugins)
		if err != nil {
			return "", at("route", err)
		}
		if skip != "" {
			// Like gRPC, look no further: overrides of a route that is
			// dropped cannot make the resource invalid.
			return skip, nil
		}
	case *routev3.Route_NonForwardingAction:
		r.Action = RouteActionNonForwarding
	case *routev3.Route_DirectResponse:
		r.Action = RouteActionDirectResponse
	case *routev3.Route_Redirect:
		r.Action = RouteActionRedirect
	default:
		r.Action = RouteActionUnsupported
	}
	if r.FilterOverrides, err = parseFilterOverrides(ctx, p.GetTypedPerFilterConfig()); err != nil {
		return "", err
	}
	return "", nil
}

func (r *Route) setMatch(m *routev3.RouteMatch) error {
	if m == nil {
		return errors.New("missing")
	}
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		r.PathMatch, r.Prefix = PathMatchPrefix, ps.Prefix
	case *routev3.RouteMatch_Path:
		r.PathMatch, r.Path = PathMatchExact, ps.Path
	case *routev3.RouteMatch_SafeRegex:
		re, err := compileFullMatch(ps.SafeRegex.GetRegex())
		if err != nil {
			return at("safe_regex", err)
		}
		r.PathMatch, r.Regex = PathMatchRegex, re
	case *routev3.RouteMatch_PathSeparatedPrefix:
		return fieldErrorf("path_separated_prefix", "not supported (use prefix, path or safe_regex)")
	case *routev3.RouteMatch_PathMatchPolicy:
		return fieldErrorf("path_match_policy", "not supported (use prefix, path or safe_regex)")
	case *routev3.RouteMatch_ConnectMatcher_:
		return fieldErrorf("connect_matcher", "not supported (use prefix, path or safe_regex)")
	case nil:
		return errors.New("no path specifier")
	default:
		return fmt.Errorf("unsupported path specifier %T", ps)
	}
	if cs := m.GetCaseSensitive(); cs != nil {
		r.CaseInsensitive = !cs.GetValue()
	}
	if hs := m.GetHeaders(); len(hs) > 0 {
		r.Headers = make([]HeaderMatcher, len(hs))
		for i, h := range hs {
			hm, err := newHeaderMatcher(h)
			if err != nil {
				return at(index("headers", i), err)
			}
			r.Headers[i] = hm
		}
	}
	if qs := m.GetQueryParameters(); len(qs) > 0 {
		r.QueryParameters = make([]QueryParameterMatcher, len(qs))
		for i, q := range qs {
			qm, err := newQueryParameterMatcher(q)
			if err != nil {
				return at(index("query_parameters", i), err)
			}
			r.QueryParameters[i] = qm
		}
	}
	if rf := m.GetRuntimeFraction(); rf != nil {
		pm, err := perMillion(rf.GetDefaultValue())
		if err != nil {
			return at("runtime_fraction.default_value", err)
		}
		r.RuntimeFraction = int32(pm)
	}
	return nil
}

// perMillion normalises a FractionalPercent to parts per million, capped at
// one million (a numerator above its denominator means "always").
func perMillion(f *typev3.FractionalPercent) (uint32, error) {
	var scale uint64
	switch d := f.GetDenominator(); d {
	case typev3.FractionalPercent_HUNDRED:
		scale = 10000
	case typev3.FractionalPercent_TEN_THOUSAND:
		scale = 100
	case typev3.FractionalPercent_MILLION:
		scale = 1
	default:
		return 0, fmt.Errorf("unknown denominator %d", int32(d))
	}
	n := uint64(f.GetNumerator()) * scale
	if n > 1000000 {
		n = 1000000
	}
	return uint32(n), nil
}

// setRouteAction reads a route action; a non-empty skip says the route
// is of no use to gRPC and why. Hash policies are checked first, so that a
// route that is skipped and one that is not fail on the same bad policy, as
// in gRPC.
func (r *Route) setRouteAction(ctx *DecodeContext, a *routev3.RouteAction, plugins *clusterPlugins) (skip string, err error) {
	if r.HashPolicies, err = hashPolicies(a.GetHashPolicy()); err != nil {
		return "", err
	}
	switch cs := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		if cs.Cluster == "" {
			return "", fieldErrorf("cluster", "must not be empty")
		}
		r.Cluster = cs.Cluster
	case *routev3.RouteAction_WeightedClusters:
		wcs, err := weightedClusters(ctx, cs.WeightedClusters.GetClusters())
		if err != nil {
			return "", at("weighted_clusters", err)
		}
		r.WeightedClusters = wcs
	case *routev3.RouteAction_ClusterSpecifierPlugin:
		if skip, err := plugins.route(cs.ClusterSpecifierPlugin); skip != "" || err != nil {
			return skip, err
		}
		r.ClusterSpecifierPlugin = cs.ClusterSpecifierPlugin
	case *routev3.RouteAction_ClusterHeader:
		return "cluster_header is not supported", nil
	case *routev3.RouteAction_InlineClusterSpecifierPlugin:
		return "inline_cluster_specifier_plugin is not supported", nil
	case nil:
		return "no cluster specifier", nil
	default:
		return fmt.Sprintf("unsupported cluster specifier %T", cs), nil
	}
	if err := r.setRouteActionRest(a); err != nil {
		return "", err
	}
	// The authority is security-sensitive (a server may route or
	// authorize by it): it is rewritten only at a trusted server's word.
	r.AutoHostRewrite = a.GetAutoHostRewrite().GetValue() && ctx.trusted()
	return "", nil
}

// setRouteActionRest reads what a forwarding route action has besides its
// target.
func (r *Route) setRouteActionRest(a *routev3.RouteAction) error {
	var err error
	if r.Timeout, err = optionalDuration(a.GetTimeout()); err != nil {
		return at("timeout", err)
	}
	msd := a.GetMaxStreamDuration()
	if r.MaxStreamDuration, err = optionalDuration(msd.GetMaxStreamDuration()); err != nil {
		return at("max_stream_duration.max_stream_duration", err)
	}
	if r.GRPCTimeoutHeaderMax, err = optionalDuration(msd.GetGrpcTimeoutHeaderMax()); err != nil {
		return at("max_stream_duration.grpc_timeout_header_max", err)
	}
	r.RetryPolicy = a.GetRetryPolicy()
	return nil
}

func weightedClusters(ctx *DecodeContext, in []*routev3.WeightedCluster_ClusterWeight) ([]WeightedCluster, error) {
	out := make([]WeightedCluster, 0, len(in))
	var total uint64
	for i, c := range in {
		w := c.GetWeight().GetValue()
		if w == 0 {
			continue
		}
		if c.GetName() == "" {
			if c.GetClusterHeader() != "" {
				return nil, fieldErrorf(index("clusters", i)+".cluster_header", "not supported")
			}
			return nil, fieldErrorf(index("clusters", i)+".name", "must not be empty")
		}
		total += uint64(w)
		if total > math.MaxUint32 {
			return nil, fieldErrorf("clusters", "total weight exceeds %d", uint32(math.MaxUint32))
		}
		overrides, err := parseFilterOverrides(ctx, c.GetTypedPerFilterConfig())
		if err != nil {
			return nil, at(index("clusters", i), err)
		}
		out = append(out, WeightedCluster{Name: c.GetName(), Weight: w, FilterOverrides: overrides})
	}
	if total == 0 {
		return nil, fieldErrorf("clusters", "no cluster with a weight above 0")
	}
	return out, nil
}

func hashPolicies(in []*routev3.RouteAction_HashPolicy) ([]HashPolicy, error) {
	var out []HashPolicy
	for i, p := range in {
		hp := HashPolicy{Terminal: p.GetTerminal()}
		switch spec := p.GetPolicySpecifier().(type) {
		case *routev3.RouteAction_HashPolicy_Header_:
			hp.Kind = HashPolicyHeader
			hp.HeaderName = toLowerASCII(spec.Header.GetHeaderName())
			if hp.HeaderName == "" {
				return nil, fieldErrorf(index("hash_policy", i)+".header.header_name", "must not be empty")
			}
			if rr := spec.Header.GetRegexRewrite(); rr != nil {
				pattern := rr.GetPattern().GetRegex()
				re, err := regexp.Compile(pattern)
				if err != nil {
					return nil, fieldErrorf(index("hash_policy", i)+".header.regex_rewrite.pattern", "invalid regex %q: %v", pattern, err)
				}
				hp.RegexRewrite, hp.RegexSubstitution = re, rr.GetSubstitution()
			}
		case *routev3.RouteAction_HashPolicy_FilterState_:
			if spec.FilterState.GetKey() != channelIDFilterStateKey {
				continue
			}
			hp.Kind = HashPolicyChannelID
		case *routev3.RouteAction_HashPolicy_ConnectionProperties_:
			if !spec.ConnectionProperties.GetSourceIp() {
				continue
			}
			hp.Kind = HashPolicySourceIP
		default:
			continue
		}
		if out == nil {
			out = make([]HashPolicy, 0, len(in)-i)
		}
		out = append(out, hp)
	}
	return out, nil
}
