package resources

import (
	"math"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Small builders for the route tables.

func regexMatcher(re string) *matcherv3.RegexMatcher { return &matcherv3.RegexMatcher{Regex: re} }

// hm shortens header matcher literals: a builder cannot name the type of
// the oneof field.
type hm = routev3.HeaderMatcher

func stringMatch(sm *matcherv3.StringMatcher) *routev3.HeaderMatcher_StringMatch {
	return &routev3.HeaderMatcher_StringMatch{StringMatch: sm}
}

func fraction(n uint32, d typev3.FractionalPercent_DenominatorType) *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: n, Denominator: d}}
}

func withHeaders(hs ...*routev3.HeaderMatcher) func(*routev3.Route) {
	return func(r *routev3.Route) { r.Match.Headers = hs }
}

func withAction(edit func(a *routev3.RouteAction)) func(*routev3.Route) {
	return func(r *routev3.Route) { edit(r.GetRoute()) }
}

func withWeights(ws ...*routev3.WeightedCluster_ClusterWeight) func(*routev3.Route) {
	return withAction(func(a *routev3.RouteAction) {
		a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: ws}}
	})
}

func cw(name string, w uint32) *routev3.WeightedCluster_ClusterWeight {
	return &routev3.WeightedCluster_ClusterWeight{Name: name, Weight: wrapperspb.UInt32(w)}
}

func withHash(ps ...*routev3.RouteAction_HashPolicy) func(*routev3.Route) {
	return withAction(func(a *routev3.RouteAction) { a.HashPolicy = ps })
}

func headerHash(name string, rewrite *matcherv3.RegexMatchAndSubstitute) *routev3.RouteAction_HashPolicy {
	return &routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{
		Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: name, RegexRewrite: rewrite},
	}}
}

func TestDecodeRouteRules(t *testing.T) {
	const p = "virtual_hosts[0].routes[0]."
	tests := []struct {
		name    string
		edit    func(r *routev3.Route)
		wantErr string
	}{
		// Path specifiers.
		{name: "prefix"},
		{name: "path", edit: func(r *routev3.Route) { r.Match.PathSpecifier = &routev3.RouteMatch_Path{Path: "/s/m"} }},
		{name: "safe regex", edit: func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher("/s/.*")}
		}},
		{name: "bad safe regex", edit: func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher("/s/(")}
		}, wantErr: p + `match.safe_regex: invalid regex "/s/("`},
		{name: "regex that only parses once anchored", edit: func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher("a)|(b")}
		}, wantErr: "invalid regex"},
		{name: "perl lookahead is not re2", edit: func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher("(?=a)")}
		}, wantErr: "invalid regex"},
		{name: "no match", edit: func(r *routev3.Route) { r.Match = nil }, wantErr: p + "match: missing"},
		{name: "no path specifier", edit: func(r *routev3.Route) { r.Match.PathSpecifier = nil }, wantErr: p + "match: no path specifier"},
		{name: "path separated prefix", edit: func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/a"}
		}, wantErr: p + "match.path_separated_prefix: not supported"},
		{name: "path match policy", edit: func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_PathMatchPolicy{}
		}, wantErr: p + "match.path_match_policy: not supported"},
		{name: "connect matcher", edit: func(r *routev3.Route) {
			r.Match.PathSpecifier = &routev3.RouteMatch_ConnectMatcher_{}
		}, wantErr: p + "match.connect_matcher: not supported"},
		{name: "case insensitive", edit: func(r *routev3.Route) { r.Match.CaseSensitive = wrapperspb.Bool(false) }},

		// Header matchers: every kind, and each kind's failure.
		{name: "header kinds", edit: withHeaders(
			&hm{Name: "a", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: ""}},
			&hm{Name: "b", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: regexMatcher("x+")}},
			&hm{Name: "c", HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 1, End: 5}}},
			&hm{Name: "d", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}},
			&hm{Name: "e", HeaderMatchSpecifier: &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: "p"}},
			&hm{Name: "f", HeaderMatchSpecifier: &routev3.HeaderMatcher_SuffixMatch{SuffixMatch: "s"}},
			&hm{Name: "g", HeaderMatchSpecifier: &routev3.HeaderMatcher_ContainsMatch{ContainsMatch: "c"}},
			&hm{Name: "h", HeaderMatchSpecifier: stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x"}, IgnoreCase: true})},
			&hm{Name: "i"},
		)},
		{name: "header without a name", edit: withHeaders(&hm{Name: ""}), wantErr: p + "match.headers[0].name: must not be empty"},
		{name: "header bad regex", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: regexMatcher("[")}}),
			wantErr: p + `match.headers[0].safe_regex_match: invalid regex "["`},
		{name: "header empty prefix", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: &routev3.HeaderMatcher_PrefixMatch{}}),
			wantErr: p + "match.headers[0].prefix_match: empty prefix pattern"},
		{name: "header empty suffix", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: &routev3.HeaderMatcher_SuffixMatch{}}),
			wantErr: p + "match.headers[0].suffix_match: empty suffix pattern"},
		{name: "header empty contains", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: &routev3.HeaderMatcher_ContainsMatch{}}),
			wantErr: p + "match.headers[0].contains_match: empty contains pattern"},
		{name: "header inverted range", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 5, End: 1}}}),
			wantErr: p + "match.headers[0].range_match: start 5 is after end 1"},
		{name: "header string match without pattern", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: stringMatch(&matcherv3.StringMatcher{})}),
			wantErr: p + "match.headers[0].string_match: no match pattern"},
		{name: "header string match empty suffix", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{}})}),
			wantErr: p + "match.headers[0].string_match: empty suffix pattern"},
		{name: "header string match bad regex", edit: withHeaders(&hm{Name: "a", HeaderMatchSpecifier: stringMatch(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher("a{2,1}")}})}),
			wantErr: p + "match.headers[0].string_match: invalid regex"},

		// Query parameters are kept.
		{name: "query parameters", edit: func(r *routev3.Route) {
			r.Match.QueryParameters = []*routev3.QueryParameterMatcher{
				{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}},
				{Name: "s", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
					StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "v"}}}},
			}
		}},
		{name: "query parameter without a name", edit: func(r *routev3.Route) {
			r.Match.QueryParameters = []*routev3.QueryParameterMatcher{{}}
		}, wantErr: p + "match.query_parameters[0].name: must not be empty"},
		{name: "query parameter without a specifier", edit: func(r *routev3.Route) {
			r.Match.QueryParameters = []*routev3.QueryParameterMatcher{{Name: "q"}}
		}, wantErr: p + "match.query_parameters[0]: no match specifier"},
		{name: "query parameter bad string match", edit: func(r *routev3.Route) {
			r.Match.QueryParameters = []*routev3.QueryParameterMatcher{{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{}}}
		}, wantErr: p + "match.query_parameters[0].string_match: no match pattern"},

		// Runtime fraction.
		{name: "runtime fraction", edit: func(r *routev3.Route) {
			r.Match.RuntimeFraction = fraction(5, typev3.FractionalPercent_TEN_THOUSAND)
		}},
		{name: "runtime fraction bad denominator", edit: func(r *routev3.Route) {
			r.Match.RuntimeFraction = fraction(5, 7)
		}, wantErr: p + "match.runtime_fraction.default_value: unknown denominator 7"},

		// Cluster specifiers.
		{name: "empty cluster", edit: withAction(func(a *routev3.RouteAction) { a.ClusterSpecifier = &routev3.RouteAction_Cluster{} }), wantErr: p + "route.cluster: must not be empty"},
		{name: "weighted clusters", edit: withWeights(cw("a", 1), cw("b", 0), cw("c", 3))},
		{name: "weighted clusters at the limit", edit: withWeights(cw("a", math.MaxUint32-1), cw("b", 1))},
		{name: "weighted clusters over the limit", edit: withWeights(cw("a", math.MaxUint32), cw("b", 1)),
			wantErr: p + "route.weighted_clusters.clusters: total weight exceeds 4294967295"},
		{name: "weighted clusters all zero", edit: withWeights(cw("a", 0), &routev3.WeightedCluster_ClusterWeight{Name: "b"}),
			wantErr: p + "route.weighted_clusters.clusters: no cluster with a weight above 0"},
		{name: "weighted clusters none", edit: withWeights(), wantErr: "no cluster with a weight above 0"},
		{name: "weighted cluster without a name", edit: withWeights(cw("a", 1), cw("", 1)),
			wantErr: p + "route.weighted_clusters.clusters[1].name: must not be empty"},
		{name: "weighted cluster header", edit: withWeights(&routev3.WeightedCluster_ClusterWeight{ClusterHeader: "h", Weight: wrapperspb.UInt32(1)}),
			wantErr: p + "route.weighted_clusters.clusters[0].cluster_header: not supported"},
		// Routes gRPC cannot use are skipped: routeskip_test.go.

		// Durations.
		{name: "durations", edit: withAction(func(a *routev3.RouteAction) {
			a.Timeout = durationpb.New(time.Second)
			a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{
				MaxStreamDuration:    durationpb.New(0),
				GrpcTimeoutHeaderMax: durationpb.New(time.Minute),
			}
		})},
		{name: "negative timeout", edit: withAction(func(a *routev3.RouteAction) { a.Timeout = durationpb.New(-time.Second) }),
			wantErr: p + "route.timeout: must not be negative"},
		{name: "invalid max stream duration", edit: withAction(func(a *routev3.RouteAction) {
			a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: &durationpb.Duration{Nanos: 2e9}}
		}), wantErr: p + "route.max_stream_duration.max_stream_duration: invalid duration"},
		{name: "negative grpc timeout header max", edit: withAction(func(a *routev3.RouteAction) {
			a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{GrpcTimeoutHeaderMax: durationpb.New(-1)}
		}), wantErr: p + "route.max_stream_duration.grpc_timeout_header_max: must not be negative"},

		// Hash policies.
		{name: "hash policies", edit: withHash(
			headerHash("x-user", &matcherv3.RegexMatchAndSubstitute{Pattern: regexMatcher("[0-9]+"), Substitution: "n"}),
			&routev3.RouteAction_HashPolicy{PolicySpecifier: &routev3.RouteAction_HashPolicy_FilterState_{
				FilterState: &routev3.RouteAction_HashPolicy_FilterState{Key: channelIDFilterStateKey}}},
		)},
		{name: "hash header without a name", edit: withHash(headerHash("", nil)),
			wantErr: p + "route.hash_policy[0].header.header_name: must not be empty"},
		{name: "hash header bad rewrite", edit: withHash(headerHash("a", nil), headerHash("b", &matcherv3.RegexMatchAndSubstitute{Pattern: regexMatcher("(")})),
			wantErr: p + `route.hash_policy[1].header.regex_rewrite.pattern: invalid regex "("`},

		// Other actions are kept with their kind.
		{name: "non forwarding", edit: func(r *routev3.Route) {
			r.Action = &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}
		}},
		{name: "no action", edit: func(r *routev3.Route) { r.Action = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := prefixRoute("/", "c")
			if tt.edit != nil {
				tt.edit(r)
			}
			_, v, err := decodeMsg(RouteConfigType, routeConfig("rc", vhost("vh", []string{"*"}, r)))
			checkErr(t, err, tt.wantErr)
			if err == nil && !proto.Equal(v.VirtualHosts[0].Routes[0].Raw(), r) {
				t.Errorf("route Raw() = %v, want %v", v.VirtualHosts[0].Routes[0].Raw(), r)
			}
		})
	}
}
