package resources

import (
	"testing"
	"time"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// extProcContexts are authzContexts, whose default registry has the
// ext_proc filter on both sides (TestExtProcOnBothSides).
func extProcContexts() (trusted, untrusted *DecodeContext) {
	return authzContexts()
}

// A client runs the filter (grpcxds) as a server does (xdsserver): a
// Listener that requires ext_proc is accepted on both sides, once
// NACKed on clients when no client runtime bound it.
func TestExtProcOnBothSides(t *testing.T) {
	trusted, _ := authzContexts()
	hcm := rdsHCM("rc")
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{{
		Name:       "proc",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(extProcMsg(authzTarget))},
	}}, hcm.HttpFilters...)
	if _, _, err := ListenerType.DecodeTyped(trusted, toAny(serverListener(hcmChain(hcm)))); err != nil {
		t.Fatalf("a server Listener requiring ext_proc: %v", err)
	}
	_, l, err := ListenerType.DecodeTyped(trusted, toAny(listenerWith("l", hcm)))
	if err != nil {
		t.Fatalf("a client Listener requiring ext_proc: %v", err)
	}
	if _, ok := l.HTTPFilters[0].Parsed.(*ExtProcConfig); !ok {
		t.Fatalf("client filter parsed as %T, want *ExtProcConfig", l.HTTPFilters[0].Parsed)
	}
}

// extProcMsg is a valid ExternalProcessor naming target, with the
// GrpcService of extAuthzMsg, sending headers only.
func extProcMsg(target string) *extprocv3.ExternalProcessor {
	return &extprocv3.ExternalProcessor{
		GrpcService:    extAuthzMsg(target).GetGrpcService(),
		ProcessingMode: &extprocv3.ProcessingMode{},
	}
}

func decodeExtProc(t *testing.T, ctx *DecodeContext, m *extprocv3.ExternalProcessor) (*ExtProcConfig, *Listener, error) {
	t.Helper()
	hcm := rdsHCM("rc")
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{{
		Name:       "proc",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: toAny(m)},
	}}, hcm.HttpFilters...)
	_, l, err := ListenerType.DecodeTyped(ctx, toAny(listenerWith("l", hcm)))
	if err != nil {
		return nil, nil, err
	}
	c, ok := l.HTTPFilters[0].Parsed.(*ExtProcConfig)
	if !ok {
		t.Fatalf("filter parsed as %T", l.HTTPFilters[0].Parsed)
	}
	return c, l, nil
}

// The defaults of gRFC A93: headers both ways, no trailers, no bodies,
// a 5s deferred close; the Listener depends on its source (gRFC A102).
func TestExtProcDefaults(t *testing.T) {
	trusted, untrusted := extProcContexts()
	c, l, err := decodeExtProc(t, trusted, extProcMsg("dns:///elsewhere.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ExtProcModes{RequestHeaders: true, ResponseHeaders: true}); c.Modes != want {
		t.Errorf("Modes = %+v, want %+v", c.Modes, want)
	}
	if c.DeferredClose != 5*time.Second || c.FailureModeAllow || c.ObservabilityMode || c.AllowedHeaders != nil || !c.GrpcService.Trusted {
		t.Errorf("config = %+v", c)
	}
	if !l.DependsOnSource() {
		t.Error("a Listener with ext_proc does not depend on its source")
	}
	// gRFC A102 from an untrusted server: the target must be allowed.
	if c, _, err := decodeExtProc(t, untrusted, extProcMsg(authzTarget)); err != nil || c.GrpcService.Trusted || c.GrpcService.Allowed == nil {
		t.Fatalf("untrusted, allowed target: %+v, %v", c, err)
	}
	_, _, err = decodeExtProc(t, untrusted, extProcMsg("dns:///evil.example.com"))
	checkErr(t, err, "grpc_service.google_grpc.target_uri")
	checkErr(t, err, "is not in the bootstrap's allowed_grpc_services")
}

// The fields gRFC A93 reads.
func TestExtProcFields(t *testing.T) {
	trusted, _ := extProcContexts()
	m := extProcMsg(authzTarget)
	m.ProcessingMode = &extprocv3.ProcessingMode{
		RequestHeaderMode:   extprocv3.ProcessingMode_SKIP,
		ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
		ResponseTrailerMode: extprocv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocv3.ProcessingMode_GRPC,
		ResponseBodyMode:    extprocv3.ProcessingMode_GRPC,
		// Ignored: gRPC sends no request trailers.
		RequestTrailerMode: extprocv3.ProcessingMode_SEND,
	}
	m.FailureModeAllow, m.DisableImmediateResponse, m.ObservabilityMode = true, true, true
	m.RequestAttributes, m.ResponseAttributes = []string{"request.path"}, []string{"response.code"}
	m.MutationRules = &mutationv3.HeaderMutationRules{DisallowExpression: &matcherv3.RegexMatcher{Regex: "x-fixed.*"}}
	m.ForwardRules = &extprocv3.HeaderForwardingRules{
		AllowedHeaders:    &matcherv3.ListStringMatcher{},
		DisallowedHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "x-secret"}}}},
	}
	m.DeferredCloseTimeout = durationpb.New(time.Second)
	// Ignored by gRPC.
	m.MessageTimeout, m.StatPrefix = durationpb.New(-time.Second), "p"
	c, _, err := decodeExtProc(t, trusted, m)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ExtProcModes{ResponseHeaders: true, ResponseTrailers: true, RequestBody: true, ResponseBody: true}); c.Modes != want {
		t.Errorf("Modes = %+v, want %+v", c.Modes, want)
	}
	if !c.FailureModeAllow || !c.DisableImmediateResponse || !c.ObservabilityMode || c.DeferredClose != time.Second ||
		len(c.RequestAttributes) != 1 || len(c.ResponseAttributes) != 1 || c.AllowedHeaders == nil || len(c.AllowedHeaders) != 0 ||
		len(c.DisallowedHeaders) != 1 || c.MutationRules.Allowed("x-fixed-id") {
		t.Errorf("config = %+v", c)
	}
}

// What gRFC A93 makes invalid, each error naming the field.
func TestExtProcInvalid(t *testing.T) {
	trusted, _ := extProcContexts()
	for _, tc := range []struct {
		name   string
		change func(m *extprocv3.ExternalProcessor)
		want   string
	}{
		{"no service", func(m *extprocv3.ExternalProcessor) { m.GrpcService = nil }, "grpc_service: must be set"},
		{"http service", func(m *extprocv3.ExternalProcessor) {
			m.GrpcService, m.HttpService = nil, &extprocv3.ExtProcHttpService{}
		}, "http_service: not supported"},
		{"envoy_grpc", func(m *extprocv3.ExternalProcessor) {
			m.GrpcService.TargetSpecifier = &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "c"}}
		}, "grpc_service.envoy_grpc: not supported"},
		{"no processing mode", func(m *extprocv3.ExternalProcessor) { m.ProcessingMode = nil }, "processing_mode: must be set"},
		{"streamed request body", func(m *extprocv3.ExternalProcessor) {
			m.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_STREAMED
		}, "processing_mode.request_body_mode: STREAMED not supported"},
		{"full duplex response body", func(m *extprocv3.ExternalProcessor) {
			m.ProcessingMode.ResponseBodyMode = extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
		}, "processing_mode.response_body_mode: FULL_DUPLEX_STREAMED not supported"},
		{"buffered request body", func(m *extprocv3.ExternalProcessor) {
			m.ProcessingMode.RequestBodyMode = extprocv3.ProcessingMode_BUFFERED
		}, "processing_mode.request_body_mode: BUFFERED not supported"},
		{"response body without trailers", func(m *extprocv3.ExternalProcessor) {
			m.ProcessingMode.ResponseBodyMode = extprocv3.ProcessingMode_GRPC
		}, "processing_mode.response_trailer_mode: must be SEND when response_body_mode is GRPC"},
		{"response body trailers skipped", func(m *extprocv3.ExternalProcessor) {
			m.ProcessingMode.ResponseBodyMode = extprocv3.ProcessingMode_GRPC
			m.ProcessingMode.ResponseTrailerMode = extprocv3.ProcessingMode_SKIP
		}, "processing_mode.response_trailer_mode: must be SEND"},
		{"unknown header mode", func(m *extprocv3.ExternalProcessor) {
			m.ProcessingMode.ResponseHeaderMode = 7
		}, "processing_mode.response_header_mode: unknown header send mode 7"},
		{"zero deferred close", func(m *extprocv3.ExternalProcessor) { m.DeferredCloseTimeout = durationpb.New(0) }, "deferred_close_timeout: must be positive"},
		{"negative deferred close", func(m *extprocv3.ExternalProcessor) {
			m.DeferredCloseTimeout = durationpb.New(-time.Second)
		}, "deferred_close_timeout: must not be negative"},
		{"invalid deferred close", func(m *extprocv3.ExternalProcessor) {
			m.DeferredCloseTimeout = &durationpb.Duration{Seconds: 1, Nanos: -1}
		}, "deferred_close_timeout: invalid duration"},
		{"bad mutation regex", func(m *extprocv3.ExternalProcessor) {
			m.MutationRules = &mutationv3.HeaderMutationRules{AllowExpression: &matcherv3.RegexMatcher{Regex: "("}}
		}, "mutation_rules.allow_expression"},
		{"bad allowed header", func(m *extprocv3.ExternalProcessor) {
			m.ForwardRules = &extprocv3.HeaderForwardingRules{AllowedHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{}}}}
		}, "forward_rules.allowed_headers.patterns[0]"},
		{"bad disallowed header", func(m *extprocv3.ExternalProcessor) {
			m.ForwardRules = &extprocv3.HeaderForwardingRules{DisallowedHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{}}}}
		}, "forward_rules.disallowed_headers.patterns[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := extProcMsg(authzTarget)
			tc.change(m)
			_, _, err := decodeExtProc(t, trusted, m)
			checkErr(t, err, tc.want)
		})
	}
}

// extProcRouteConfig is a route configuration whose virtual host carries
// override o for filter "proc".
func extProcRouteConfig(o *extprocv3.ExtProcPerRoute) *routev3.RouteConfiguration {
	rc := simpleRouteConfig("r", "c")
	rc.VirtualHosts[0].TypedPerFilterConfig = map[string]*anypb.Any{"proc": toAny(o)}
	return rc
}

// The override (ExtProcPerRoute's overrides) replaces the fields it sets;
// its grpc_service is judged by its sender (gRFC A102), which makes the
// route configuration depend on its source; its disabled is not read
// (gRFC A93).
func TestExtProcPerRouteOverride(t *testing.T) {
	trusted, untrusted := extProcContexts()
	o := &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{
		ProcessingMode:      &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SKIP, RequestBodyMode: extprocv3.ProcessingMode_GRPC},
		GrpcService:         extAuthzMsg(authzTarget).GetGrpcService(),
		FailureModeAllow:    wrapperspb.Bool(true),
		RequestAttributes:   []string{"request.host"},
		GrpcInitialMetadata: []*corev3.HeaderValue{{Key: "Bad Key", Value: "ignored"}},
	}}}
	_, got, err := RouteConfigType.DecodeTyped(untrusted, toAny(extProcRouteConfig(o)))
	if err != nil {
		t.Fatal(err)
	}
	if !got.DependsOnSource() {
		t.Error("a route configuration whose ext_proc override names a GrpcService does not depend on its source")
	}
	top, _, err := decodeExtProc(t, trusted, extProcMsg("dns:///elsewhere.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	top.ResponseAttributes = []string{"response.code"}
	f := HTTPFilter{Name: "proc", Parsed: top}
	eff, on := f.EffectiveConfig(got.VirtualHosts[0].FilterOverrides)
	c, err := ExtProcOf(eff, f.Parsed)
	if !on || err != nil {
		t.Fatalf("on %v, %v", on, err)
	}
	if c == top || c.GrpcService.TargetURI != authzTarget || c.GrpcService.Trusted || !c.FailureModeAllow ||
		c.Modes != (ExtProcModes{ResponseHeaders: true, RequestBody: true}) ||
		len(c.RequestAttributes) != 1 || c.RequestAttributes[0] != "request.host" || len(c.ResponseAttributes) != 1 {
		t.Fatalf("effective config = %+v", c)
	}
	if top.FailureModeAllow || top.GrpcService.TargetURI == authzTarget {
		t.Fatal("ExtProcOf changed the top-level configuration")
	}

	// Only what is set is replaced; disabled is not read.
	_, got, err = RouteConfigType.DecodeTyped(untrusted, toAny(extProcRouteConfig(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Disabled{Disabled: true}})))
	if err != nil {
		t.Fatal(err)
	}
	if got.DependsOnSource() {
		t.Error("a route configuration whose override names no GrpcService depends on its source")
	}
	eff, on = f.EffectiveConfig(got.VirtualHosts[0].FilterOverrides)
	if c, err := ExtProcOf(eff, f.Parsed); !on || err != nil || c.GrpcService != top.GrpcService || c.Modes != top.Modes {
		t.Fatalf("empty override: on %v, %+v, %v", on, c, err)
	}
	if _, err := ExtProcOf(eff, RouterConfig{}); err == nil {
		t.Fatal("ExtProcOf applied an override to a router config")
	}
	if _, err := ExtProcOf(RouterConfig{}, nil); err == nil {
		t.Fatal("ExtProcOf accepted a router config")
	}
}

// An override is invalid as the top-level fields it carries are, from
// where it is: a route's or a weighted cluster's too.
func TestExtProcPerRouteInvalid(t *testing.T) {
	_, untrusted := extProcContexts()
	overrides := func(o *extprocv3.ExtProcOverrides) *extprocv3.ExtProcPerRoute {
		return &extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: o}}
	}
	_, _, err := RouteConfigType.DecodeTyped(untrusted, toAny(extProcRouteConfig(overrides(&extprocv3.ExtProcOverrides{
		GrpcService: extAuthzMsg("dns:///evil.example.com").GetGrpcService(),
	}))))
	checkErr(t, err, `typed_per_filter_config["proc"]`)
	checkErr(t, err, "overrides.grpc_service.google_grpc.target_uri")
	checkErr(t, err, "is not in the bootstrap's allowed_grpc_services")

	rc := simpleRouteConfig("r", "c")
	rc.VirtualHosts[0].Routes[0].TypedPerFilterConfig = map[string]*anypb.Any{"proc": toAny(overrides(&extprocv3.ExtProcOverrides{
		ProcessingMode: &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_BUFFERED_PARTIAL},
	}))}
	_, _, err = RouteConfigType.DecodeTyped(untrusted, toAny(rc))
	checkErr(t, err, "overrides.processing_mode.request_body_mode: BUFFERED_PARTIAL not supported")
}

// A route's own override naming a GrpcService makes the route
// configuration depend on its source, as the virtual host's does.
func TestExtProcRouteOverrideDependsOnSource(t *testing.T) {
	trusted, _ := extProcContexts()
	rc := simpleRouteConfig("r", "c")
	rc.VirtualHosts[0].Routes[0].TypedPerFilterConfig = map[string]*anypb.Any{"proc": toAny(&extprocv3.ExtProcPerRoute{
		Override: &extprocv3.ExtProcPerRoute_Overrides{Overrides: &extprocv3.ExtProcOverrides{GrpcService: extAuthzMsg(authzTarget).GetGrpcService()}},
	})}
	_, got, err := RouteConfigType.DecodeTyped(trusted, toAny(rc))
	if err != nil {
		t.Fatal(err)
	}
	if !got.DependsOnSource() {
		t.Fatal("a route's ext_proc override naming a GrpcService does not make its route configuration depend on its source")
	}
}
