package resources

import (
	"strings"
	"testing"
	"time"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	accesstokenv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/call_credentials/access_token/v3"
	insecurev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/insecure/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/bootstrap"
)

const authzTarget = "dns:///authz.example.com:443"

// extAuthzMsg is a valid ExtAuthz naming target, with insecure channel
// credentials (after a plugin type gRPC does not know, which is skipped), an access token and initial metadata in its GrpcService.
func extAuthzMsg(target string) *extauthzv3.ExtAuthz {
	return &extauthzv3.ExtAuthz{Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
			TargetUri:                target,
			ChannelCredentialsPlugin: []*anypb.Any{toAny(&wrapperspb.StringValue{}), toAny(&insecurev3.InsecureCredentials{})},
			CallCredentialsPlugin:    []*anypb.Any{toAny(&accesstokenv3.AccessTokenCredentials{Token: "secret"})},
		}},
		Timeout:         durationpb.New(2 * time.Second),
		InitialMetadata: []*corev3.HeaderValue{{Key: "x-tenant", Value: "blue"}},
	}}}
}

// extAuthzListener is a client Listener whose chain runs ext_authz m.
func extAuthzListener(m *extauthzv3.ExtAuthz) *anypb.Any {
	hcm := rdsHCM("rc")
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{{
		Name:       "authz",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(m)},
	}}, hcm.HttpFilters...)
	return toAny(listenerWith("l", hcm))
}

// authzContexts are a trusted and an untrusted server of a bootstrap that
// allows authzTarget and defines the certificate provider instance
// "roots" (for TlsCredentials).
func authzContexts() (trusted, untrusted *DecodeContext) {
	b := bootstrapWith("roots")
	b.AllowedGRPCServices = map[string]bootstrap.AllowedGRPCService{
		authzTarget: {ChannelCreds: []bootstrap.ChannelCreds{{Type: bootstrap.CredsInsecure}}},
	}
	trusted = &DecodeContext{Bootstrap: b, Server: &bootstrap.ServerConfig{
		ServerURI: "trusted.example.com:443", ServerFeatures: []string{bootstrap.FeatureTrustedXDSServer},
	}}
	untrusted = &DecodeContext{Bootstrap: b, Server: &bootstrap.ServerConfig{ServerURI: "cp.example.com:443"}}
	return trusted, untrusted
}

func decodeExtAuthz(t *testing.T, ctx *DecodeContext, m *extauthzv3.ExtAuthz) (*ExtAuthzConfig, *Listener, error) {
	t.Helper()
	_, l, err := ListenerType.DecodeTyped(ctx, extAuthzListener(m))
	if err != nil {
		return nil, nil, err
	}
	c, ok := l.HTTPFilters[0].Parsed.(*ExtAuthzConfig)
	if !ok {
		t.Fatalf("filter parsed as %T", l.HTTPFilters[0].Parsed)
	}
	return c, l, nil
}

// gRFC A102: a trusted server's GrpcService is used as given, credentials
// and initial metadata included.
func TestExtAuthzTrustedServerGrpcService(t *testing.T) {
	trusted, _ := authzContexts()
	c, l, err := decodeExtAuthz(t, trusted, extAuthzMsg("dns:///elsewhere.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	g := c.GrpcService
	if !g.Trusted || g.TargetURI != "dns:///elsewhere.example.com" || g.Timeout != 2*time.Second ||
		g.ChannelCredentials != GrpcChannelInsecure || len(g.AccessTokens) != 1 || g.AccessTokens[0] != "secret" ||
		len(g.InitialMetadata) != 1 || g.InitialMetadata[0] != (HeaderValue{"x-tenant", "blue"}) || g.Allowed != nil {
		t.Fatalf("GrpcService = %+v", g)
	}
	if strings.Contains(g.String(), "secret") {
		t.Fatalf("String shows the token: %s", g)
	}
	if c.StatusOnError != codes.PermissionDenied || c.FilterEnabled != (FaultFraction{100, 100}) || c.AllowedHeaders != nil {
		t.Fatalf("defaults: %+v", c)
	}
	if !l.DependsOnSource() {
		t.Fatal("a Listener with ext_authz does not depend on its source")
	}
}

// gRFC A102: from an untrusted server the target must be allowed by the
// bootstrap, whose credentials are used; initial_metadata is ignored
// (validated all the same: TestGrpcServiceInitialMetadataInvalid).
func TestExtAuthzUntrustedServerGrpcService(t *testing.T) {
	_, untrusted := authzContexts()
	m := extAuthzMsg(authzTarget)
	c, _, err := decodeExtAuthz(t, untrusted, m)
	if err != nil {
		t.Fatal(err)
	}
	g := c.GrpcService
	if g.Trusted || g.InitialMetadata != nil || g.AccessTokens != nil || g.ChannelCredentials != "" ||
		g.Allowed == nil || g.Allowed.Target != authzTarget || g.Allowed.ChannelCreds[0].Type != bootstrap.CredsInsecure {
		t.Fatalf("GrpcService = %+v", g)
	}

	_, _, err = decodeExtAuthz(t, untrusted, extAuthzMsg("dns:///evil.example.com"))
	checkErr(t, err, `"dns:///evil.example.com" is not in the bootstrap's allowed_grpc_services`)
	checkErr(t, err, `server "cp.example.com:443" not marked trusted_xds_server`)
	checkErr(t, err, "grpc_service.google_grpc.target_uri")

	// No server known is no trust either.
	_, _, err = decodeExtAuthz(t, &DecodeContext{Bootstrap: untrusted.Bootstrap}, extAuthzMsg("dns:///evil.example.com"))
	checkErr(t, err, "is not in the bootstrap's allowed_grpc_services")
}

// What gRFC A92 and A102 make invalid, each error naming the field.
func TestExtAuthzInvalid(t *testing.T) {
	trusted, _ := authzContexts()
	for _, tc := range []struct {
		name   string
		change func(m *extauthzv3.ExtAuthz)
		want   string
	}{
		{"no service", func(m *extauthzv3.ExtAuthz) { m.Services = nil }, "grpc_service: must be set"},
		{"http service", func(m *extauthzv3.ExtAuthz) {
			m.Services = &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{}}
		}, "http_service: not supported"},
		{"envoy_grpc", func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().TargetSpecifier = &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "c"}}
		}, "grpc_service.envoy_grpc: not supported"},
		{"empty target", func(m *extauthzv3.ExtAuthz) { m.GetGrpcService().GetGoogleGrpc().TargetUri = "" }, "target_uri: must not be empty"},
		{"zero timeout", func(m *extauthzv3.ExtAuthz) { m.GetGrpcService().Timeout = durationpb.New(0) }, "grpc_service.timeout: must be positive"},
		{"bad timeout", func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().Timeout = &durationpb.Duration{Seconds: 1, Nanos: -1}
		}, "grpc_service.timeout"},
		{"no supported channel creds", func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().GetGoogleGrpc().ChannelCredentialsPlugin = []*anypb.Any{toAny(&wrapperspb.StringValue{})}
		}, "channel_credentials_plugin: no supported type"},
		{"empty token", func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().GetGoogleGrpc().CallCredentialsPlugin = []*anypb.Any{toAny(&accesstokenv3.AccessTokenCredentials{})}
		}, "call_credentials_plugin[0].token: must not be empty"},
		{"metadata pseudo-header", func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().InitialMetadata = []*corev3.HeaderValue{{Key: ":authority", Value: "x"}}
		}, "initial_metadata[0].key"},
		{"metadata upper case", func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().InitialMetadata = []*corev3.HeaderValue{{Key: "X-Tenant", Value: "x"}}
		}, "initial_metadata[0].key"},
		{"metadata bad value", func(m *extauthzv3.ExtAuthz) {
			m.GetGrpcService().InitialMetadata = []*corev3.HeaderValue{{Key: "x", Value: "a\nb"}}
		}, "initial_metadata[0].value"},
		{"filter_enabled without default", func(m *extauthzv3.ExtAuthz) {
			m.FilterEnabled = &corev3.RuntimeFractionalPercent{RuntimeKey: "k"}
		}, "filter_enabled.default_value: must be set"},
		{"deny_at_disable without default", func(m *extauthzv3.ExtAuthz) {
			m.DenyAtDisable = &corev3.RuntimeFeatureFlag{RuntimeKey: "k"}
		}, "deny_at_disable.default_value: must be set"},
		{"bad allowed header", func(m *extauthzv3.ExtAuthz) {
			m.AllowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{}}}
		}, "allowed_headers.patterns[0]"},
		{"bad mutation regex", func(m *extauthzv3.ExtAuthz) {
			m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{AllowExpression: &matcherv3.RegexMatcher{Regex: "("}}
		}, "decoder_header_mutation_rules.allow_expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := extAuthzMsg(authzTarget)
			tc.change(m)
			_, _, err := decodeExtAuthz(t, trusted, m)
			checkErr(t, err, tc.want)
		})
	}
}

// The fields gRFC A92 reads, beyond the GrpcService.
func TestExtAuthzFields(t *testing.T) {
	trusted, _ := authzContexts()
	m := extAuthzMsg(authzTarget)
	m.FilterEnabled = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 300, Denominator: typev3.FractionalPercent_HUNDRED}}
	m.DenyAtDisable = &corev3.RuntimeFeatureFlag{DefaultValue: wrapperspb.Bool(true)}
	m.FailureModeAllow, m.FailureModeAllowHeaderAdd, m.IncludePeerCertificate = true, true, true
	m.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
	m.AllowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-"}}}}
	m.DisallowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}}
	m.DecoderHeaderMutationRules = &mutationv3.HeaderMutationRules{
		DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-fixed.*"},
		AllowExpression:    &matcherv3.RegexMatcher{Regex: "x-.*"},
		DisallowIsError:    wrapperspb.Bool(true),
	}
	c, _, err := decodeExtAuthz(t, trusted, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.FilterEnabled != (FaultFraction{100, 100}) || !c.DenyAtDisable || !c.FailureModeAllow || !c.FailureModeAllowHeaderAdd ||
		!c.IncludePeerCertificate || c.StatusOnError != codes.Unavailable || len(c.AllowedHeaders) != 1 || len(c.DisallowedHeaders) != 1 ||
		!c.MutationRules.DisallowIsError {
		t.Fatalf("config = %+v", c)
	}
	// gRFC A102: with allow_expression set, a name it does not match is
	// disallowed.
	for name, want := range map[string]bool{"x-fixed-id": false, "x-user": true, "other": false} {
		if got := c.MutationRules.Allowed(name); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", name, got, want)
		}
	}
	if (&HeaderMutationRules{DisallowAll: true, Allow: c.MutationRules.Allow}).Allowed("x-user") {
		t.Error("disallow_all let a header through")
	}
}

// An allowed_headers or disallowed_headers of no pattern is as unset
// (gRFC A92, 2026-05-26): every header goes to the service, not none.
func TestExtAuthzEmptyHeaderListsAreUnset(t *testing.T) {
	trusted, _ := authzContexts()
	m := extAuthzMsg(authzTarget)
	m.AllowedHeaders = &matcherv3.ListStringMatcher{}
	m.DisallowedHeaders = &matcherv3.ListStringMatcher{}
	c, _, err := decodeExtAuthz(t, trusted, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.AllowedHeaders != nil || c.DisallowedHeaders != nil {
		t.Fatalf("allowed headers %#v, disallowed %#v: want both nil (unset)", c.AllowedHeaders, c.DisallowedHeaders)
	}
}

// The override (ExtAuthzPerRoute) is accepted and carries nothing: it
// keeps the top-level configuration, while a FilterConfig wrapper's
// disabled switches the filter off (gRFC A92).
func TestExtAuthzPerRouteOverride(t *testing.T) {
	rc := simpleRouteConfig("r", "c")
	rc.VirtualHosts[0].TypedPerFilterConfig = map[string]*anypb.Any{
		"authz": toAny(&extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_Disabled{Disabled: true}}),
	}
	rc.VirtualHosts[0].Routes[0].TypedPerFilterConfig = map[string]*anypb.Any{
		"authz": toAny(&routev3.FilterConfig{Disabled: true}),
	}
	_, got, err := RouteConfigType.DecodeTyped(nil, toAny(rc))
	if err != nil {
		t.Fatal(err)
	}
	vhO, routeO := got.VirtualHosts[0].FilterOverrides, got.VirtualHosts[0].Routes[0].FilterOverrides
	top := &ExtAuthzConfig{}
	f := HTTPFilter{Name: "authz", Parsed: top, Disabled: true}
	eff, on := f.EffectiveConfig(vhO)
	if c, err := ExtAuthzOf(eff, f.Parsed); !on || err != nil || c != top {
		t.Fatalf("virtual host override: on %v, config %v, %v", on, c, err)
	}
	if _, on := f.EffectiveConfig(routeO, vhO); on {
		t.Fatal("the route's disabled FilterConfig left the filter on")
	}
	if _, err := ExtAuthzOf(RouterConfig{}, nil); err == nil {
		t.Fatal("ExtAuthzOf accepted a router config")
	}
}
