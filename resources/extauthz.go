package resources

import (
	"errors"
	"fmt"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The configuration messages of the external authorization filter.
const (
	extAuthzName         = "envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"
	extAuthzPerRouteName = "envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute"
)

// extAuthzFilterType is the external authorization filter (gRFC A92), on
// clients and servers. Its top-level config names the authorization
// service in a GrpcService, judged by the server that sent it (gRFC A102);
// its override, ExtAuthzPerRoute, carries nothing gRPC uses.
var extAuthzFilterType = HTTPFilterType{
	Name:            "ext_authz",
	TypeURLs:        []string{"type.googleapis.com/" + extAuthzName, "type.googleapis.com/" + extAuthzPerRouteName},
	ParseConfigFrom: parseExtAuthzAny,
	ParseOverride:   parseExtAuthzPerRouteAny,
	ClientSide:      true,
	ServerSide:      true,
}

func init() {
	if err := RegisterHTTPFilter(extAuthzFilterType); err != nil {
		panic(err)
	}
}

// ExtAuthzConfig is the parsed top-level configuration of the external
// authorization filter (envoy.extensions.filters.http.ext_authz.v3.ExtAuthz)
// in the fields gRFC A92 reads; the others (http_service aside, which
// gRPC refuses, as a config without grpc_service) are ignored, and Raw has
// them. Package dataplane/extauthz runs it.
type ExtAuthzConfig struct {
	// GrpcService is the authorization service, validated under gRFC
	// A102's trust rule.
	GrpcService *GrpcService
	// FilterEnabled is the share of requests the filter checks; the rest
	// are let through, or failed with StatusOnError if DenyAtDisable.
	// 100% when filter_enabled is unset.
	FilterEnabled FaultFraction
	// DenyAtDisable fails the requests FilterEnabled leaves out.
	DenyAtDisable bool
	// FailureModeAllow lets a request through when the authorization
	// service cannot be asked (the call fails).
	FailureModeAllow bool
	// FailureModeAllowHeaderAdd adds x-envoy-auth-failure-mode-allowed:
	// true to a request FailureModeAllow let through.
	FailureModeAllowHeaderAdd bool
	// StatusOnError is what a request fails with when the call fails
	// (without FailureModeAllow) or the filter is off for it with
	// DenyAtDisable: status_on_error's HTTP status (403 when unset)
	// through gRPC's HTTP-to-gRPC mapping.
	StatusOnError codes.Code
	// AllowedHeaders, when not nil, are the only request headers sent to
	// the service (allowed_headers; nil when unset or of no pattern, as
	// gRFC A92 says: every header is sent); DisallowedHeaders are never
	// sent, whatever AllowedHeaders says.
	AllowedHeaders, DisallowedHeaders []StringMatcher
	// MutationRules limit the header changes the service may make.
	MutationRules HeaderMutationRules
	// IncludePeerCertificate sends the client's certificate (server side).
	IncludePeerCertificate bool
	// Raw is the message as received.
	Raw *extauthzv3.ExtAuthz
}

// DependsOnSource implements SourceDependent: whether the GrpcService is
// believed depends on the server that sent it.
func (c *ExtAuthzConfig) DependsOnSource() bool { return c != nil }

// ExtAuthzPerRouteConfig is the parsed override of the external
// authorization filter (ExtAuthzPerRoute). gRFC A92 uses none of its
// fields, its own disabled included: an override of this type turns the
// filter on with its top-level configuration, and it is switched off
// only by a FilterConfig wrapper's disabled (DisabledFilterOverride).
// An HTTP transport follows Envoy instead, whose disabled turns the filter
// off and whose check_settings change what the service is told (httpxds's
// server, and its client through dataplane/httpfilter's
// Env.AuthzPerRoute).
type ExtAuthzPerRouteConfig struct {
	// Raw is the message as received.
	Raw *extauthzv3.ExtAuthzPerRoute
}

// HeaderMutationRules are the header changes an authorization or
// processing service may make (envoy.config.common.mutation_rules.v3.
// HeaderMutationRules, in the fields gRFC A102 reads): a change to a
// header they disallow is ignored, or with DisallowIsError fails the
// request. Changes to pseudo-headers and host are never allowed, whatever
// the rules say (dataplane/extauthz's Permitted).
type HeaderMutationRules struct {
	// DisallowAll disallows every change.
	DisallowAll bool
	// Allow, when set, allows headers whose name it matches, unless
	// Disallow matches too.
	Allow *StringMatcher
	// Disallow, when set, disallows headers whose name it matches.
	Disallow *StringMatcher
	// DisallowIsError makes a disallowed change fail the request.
	DisallowIsError bool
}

// Allowed reports whether the rules let a change to header name through
// (pseudo-headers and host aside, which the caller refuses first), as
// gRFC A102 orders them: disallow_all, then disallow_expression; then,
// when allow_expression is set, only the names it matches are allowed,
// and when it is not, every other name is. (Envoy would let a name
// allow_expression does not match through; gRPC does not.)
// allow_all_routing, disallow_system and allow_envoy are not read.
func (r *HeaderMutationRules) Allowed(name string) bool {
	switch {
	case r.DisallowAll:
		return false
	case r.Disallow != nil && r.Disallow.Match(name):
		return false
	case r.Allow != nil:
		return r.Allow.Match(name)
	}
	return true
}

func parseExtAuthzAny(ctx *DecodeContext, a *anypb.Any) (HTTPFilterConfig, error) {
	if !anyIs(a, extAuthzName) {
		return nil, fmt.Errorf("holds %s, want %s", anyName(a), extAuthzName)
	}
	m := new(extauthzv3.ExtAuthz)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("unmarshal ExtAuthz: %v", err)
	}
	return NewExtAuthzConfig(ctx, m)
}

// NewExtAuthzConfig validates an ExtAuthz message as gRPC does (gRFC A92),
// its grpc_service under gRFC A102's rule for the server in ctx (which may
// be nil: no server known, the sender is untrusted; no bootstrap known,
// the target is not checked). Errors name the field.
func NewExtAuthzConfig(ctx *DecodeContext, m *extauthzv3.ExtAuthz) (*ExtAuthzConfig, error) {
	gs := m.GetGrpcService()
	if gs == nil {
		if m.GetHttpService() != nil {
			return nil, fieldErrorf("http_service", "not supported: gRPC asks the authorization service over gRPC (grpc_service)")
		}
		return nil, fieldErrorf("grpc_service", "must be set")
	}
	c := &ExtAuthzConfig{
		FilterEnabled:             FaultFraction{Numerator: 100, Denominator: 100},
		FailureModeAllow:          m.GetFailureModeAllow(),
		FailureModeAllowHeaderAdd: m.GetFailureModeAllowHeaderAdd(),
		StatusOnError:             codes.PermissionDenied,
		IncludePeerCertificate:    m.GetIncludePeerCertificate(),
		Raw:                       m,
	}
	var err error
	if c.GrpcService, err = parseGrpcService(ctx, gs); err != nil {
		return nil, at("grpc_service", err)
	}
	if fe := m.GetFilterEnabled(); fe != nil {
		if fe.GetDefaultValue() == nil {
			return nil, fieldErrorf("filter_enabled.default_value", "must be set")
		}
		c.FilterEnabled = faultFraction(fe.GetDefaultValue())
	}
	if d := m.GetDenyAtDisable(); d != nil {
		if d.GetDefaultValue() == nil {
			return nil, fieldErrorf("deny_at_disable.default_value", "must be set")
		}
		c.DenyAtDisable = d.GetDefaultValue().GetValue()
	}
	if s := m.GetStatusOnError().GetCode(); s != 0 {
		// A status outside [200, 600) has no mapping: Unknown, as gRPC's
		// table has it.
		c.StatusOnError, _ = HTTPStatusToCode(int(s))
	}
	// gRFC A92 (2026-05-26): an allowed_headers of no pattern is as
	// unset, every header sent; not a list that matches nothing.
	if l := m.GetAllowedHeaders(); l != nil {
		if c.AllowedHeaders, err = listStringMatcher(l); err != nil {
			return nil, at("allowed_headers", err)
		}
	}
	if l := m.GetDisallowedHeaders(); l != nil {
		if c.DisallowedHeaders, err = listStringMatcher(l); err != nil {
			return nil, at("disallowed_headers", err)
		}
	}
	if r := m.GetDecoderHeaderMutationRules(); r != nil {
		if c.MutationRules, err = headerMutationRules(r); err != nil {
			return nil, at("decoder_header_mutation_rules", err)
		}
	}
	return c, nil
}

// listStringMatcher compiles a ListStringMatcher's patterns.
func listStringMatcher(l *matcherv3.ListStringMatcher) ([]StringMatcher, error) {
	var out []StringMatcher
	for i, p := range l.GetPatterns() {
		m, err := newStringMatcher(p)
		if err != nil {
			return nil, at(index("patterns", i), err)
		}
		out = append(out, m)
	}
	return out, nil
}

func headerMutationRules(r *mutationv3.HeaderMutationRules) (HeaderMutationRules, error) {
	out := HeaderMutationRules{
		DisallowAll:     r.GetDisallowAll().GetValue(),
		DisallowIsError: r.GetDisallowIsError().GetValue(),
	}
	if e := r.GetAllowExpression(); e != nil {
		m, err := regexStringMatcher(e)
		if err != nil {
			return HeaderMutationRules{}, at("allow_expression", err)
		}
		out.Allow = &m
	}
	if e := r.GetDisallowExpression(); e != nil {
		m, err := regexStringMatcher(e)
		if err != nil {
			return HeaderMutationRules{}, at("disallow_expression", err)
		}
		out.Disallow = &m
	}
	return out, nil
}

func parseExtAuthzPerRouteAny(a *anypb.Any) (HTTPFilterConfig, error) {
	if !anyIs(a, extAuthzPerRouteName) {
		return nil, fmt.Errorf("holds %s, want %s", anyName(a), extAuthzPerRouteName)
	}
	m := new(extauthzv3.ExtAuthzPerRoute)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("unmarshal ExtAuthzPerRoute: %v", err)
	}
	return &ExtAuthzPerRouteConfig{Raw: m}, nil
}

// DependsOnSource implements SourceDependent: a Listener is when one of
// its HTTP filters' configurations is (an external authorization filter,
// whose GrpcService is judged by the server that sent it), or a route
// configuration it carries inline is (auto_host_rewrite, gRFC A81), client
// or server side.
func (l *Listener) DependsOnSource() bool {
	if l == nil {
		return false
	}
	if filtersDependOnSource(l.HTTPFilters) || l.routesDependOnSource() {
		return true
	}
	if s := l.Server; s != nil {
		if s.DefaultFilterChain != nil && filtersDependOnSource(s.DefaultFilterChain.HTTPFilters) {
			return true
		}
		for _, fc := range s.FilterChains {
			if filtersDependOnSource(fc.HTTPFilters) {
				return true
			}
		}
	}
	return false
}

func filtersDependOnSource(fs []HTTPFilter) bool {
	for i := range fs {
		if sd, ok := fs[i].Parsed.(SourceDependent); ok && sd.DependsOnSource() {
			return true
		}
	}
	return false
}

var errNoExtAuthzConfig = errors.New("resources: no external authorization configuration")

// ExtAuthzOf returns the configuration an external authorization filter
// runs with, given its effective configuration for a request (see
// HTTPFilter.EffectiveConfig) and the filter's own top-level one: an
// ExtAuthzPerRouteConfig override keeps the top-level configuration.
func ExtAuthzOf(effective, top HTTPFilterConfig) (*ExtAuthzConfig, error) {
	if _, ok := effective.(*ExtAuthzPerRouteConfig); ok {
		effective = top
	}
	c, ok := effective.(*ExtAuthzConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("%w (have %T)", errNoExtAuthzConfig, effective)
	}
	return c, nil
}
