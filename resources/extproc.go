package resources

import (
	"fmt"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The configuration messages of the external processing filter.
const (
	extProcName         = "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
	extProcPerRouteName = "envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute"
)

// extProcFilterType is the external processing filter (gRFC A93). Its
// configuration and its override may both name the processing service in
// a GrpcService, judged by the server that sent it (gRFC A102), so both
// parsers are told their source.
//
// It runs on both sides: xdsserver binds dataplane/extproc to grpc-go's
// server, grpcxds to its client channels. A transport that cannot run it
// (the HTTP client, which has no processing clients) fails the requests
// of a chain that requires it, as httpfilter.NewChain does for any filter
// it has no runtime for. The parsers validate it for both sides
// (TestExtProcInvalid).
var extProcFilterType = HTTPFilterType{
	Name:              "ext_proc",
	TypeURLs:          []string{"type.googleapis.com/" + extProcName, "type.googleapis.com/" + extProcPerRouteName},
	ParseConfigFrom:   parseExtProcAny,
	ParseOverrideFrom: parseExtProcPerRouteAny,
	ClientSide:        true,
	ServerSide:        true,
}

func init() {
	if err := RegisterHTTPFilter(extProcFilterType); err != nil {
		panic(err)
	}
}

// DefaultExtProcDeferredClose is how long an observability-mode processing
// stream stays open after its RPC ends when deferred_close_timeout is
// unset (gRFC A93), so that the processor can read what was sent.
const DefaultExtProcDeferredClose = 5 * time.Second

// ExtProcModes says which events of an RPC go to the processing service
// (ProcessingMode, in the modes gRFC A93 allows). Bodies go in GRPC mode
// only, one whole deframed message per body chunk; request trailers are
// never sent, since gRPC has none.
type ExtProcModes struct {
	// RequestHeaders: the client's headers (request_header_mode; SEND
	// unless SKIP).
	RequestHeaders bool
	// ResponseHeaders: the server's headers (response_header_mode; SEND
	// unless SKIP).
	ResponseHeaders bool
	// ResponseTrailers: the server's trailers (response_trailer_mode;
	// only when SEND). Always set when ResponseBody is.
	ResponseTrailers bool
	// RequestBody: the client's messages and half-close
	// (request_body_mode GRPC).
	RequestBody bool
	// ResponseBody: the server's messages (response_body_mode GRPC).
	ResponseBody bool
}

// ExtProcConfig is the parsed top-level configuration of the external
// processing filter (envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor)
// in the fields gRFC A93 reads; those it ignores (message_timeout,
// http_service next to a grpc_service, stat_prefix, metadata options,
// route cache and mode override knobs) are left in Raw. Package
// dataplane/extproc runs it.
type ExtProcConfig struct {
	// GrpcService is the processing service, validated under gRFC A102's
	// trust rule.
	GrpcService *GrpcService
	// FailureModeAllow lets an RPC go on, untouched by the filter, when
	// its processing stream fails before any body was sent to it (or at
	// any time in observability mode).
	FailureModeAllow bool
	// Modes are the events sent to the service.
	Modes ExtProcModes
	// RequestAttributes and ResponseAttributes name the attributes sent
	// with the first client-to-server and server-to-client event.
	RequestAttributes, ResponseAttributes []string
	// MutationRules limit the header changes the service may make.
	MutationRules HeaderMutationRules
	// AllowedHeaders, when not nil, are the only headers sent to the
	// service (forward_rules.allowed_headers); DisallowedHeaders are
	// never sent, whatever AllowedHeaders says.
	AllowedHeaders, DisallowedHeaders []StringMatcher
	// DisableImmediateResponse treats an immediate_response from the
	// service as a failure of its stream.
	DisableImmediateResponse bool
	// ObservabilityMode sends events without waiting for answers: the
	// service sees the RPC but cannot change it.
	ObservabilityMode bool
	// DeferredClose is how long an observability-mode stream stays open
	// after its RPC ends (deferred_close_timeout, positive;
	// DefaultExtProcDeferredClose when unset).
	DeferredClose time.Duration
	// Raw is the message as received.
	Raw *extprocv3.ExternalProcessor
}

// DependsOnSource implements SourceDependent: whether the GrpcService is
// believed depends on the server that sent it.
func (c *ExtProcConfig) DependsOnSource() bool { return c != nil }

// ExtProcPerRouteConfig is the parsed override of the external processing
// filter (ExtProcPerRoute's overrides): each field set replaces the
// top-level one, the others are kept. Its own disabled field is not read
// (gRFC A93): a FilterConfig wrapper's disabled switches the filter off.
type ExtProcPerRouteConfig struct {
	// GrpcService, when not nil, replaces the processing service.
	GrpcService *GrpcService
	// Modes, when not nil, replaces the processing modes.
	Modes *ExtProcModes
	// FailureModeAllow, when not nil, replaces failure_mode_allow.
	FailureModeAllow *bool
	// RequestAttributes and ResponseAttributes, when not nil, replace the
	// top-level lists.
	RequestAttributes, ResponseAttributes []string
	// Raw is the message as received.
	Raw *extprocv3.ExtProcPerRoute
}

// DependsOnSource implements SourceDependent: an override naming a
// GrpcService is believed according to the server that sent it.
func (c *ExtProcPerRouteConfig) DependsOnSource() bool {
	return c != nil && c.GrpcService != nil
}

func parseExtProcAny(ctx *DecodeContext, a *anypb.Any) (HTTPFilterConfig, error) {
	if !anyIs(a, extProcName) {
		return nil, fmt.Errorf("holds %s, want %s", anyName(a), extProcName)
	}
	m := new(extprocv3.ExternalProcessor)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("unmarshal ExternalProcessor: %v", err)
	}
	return NewExtProcConfig(ctx, m)
}

// NewExtProcConfig validates an ExternalProcessor message as gRPC does
// (gRFC A93), its grpc_service under gRFC A102's rule for the server in
// ctx (which may be nil: see NewExtAuthzConfig). Errors name the field.
func NewExtProcConfig(ctx *DecodeContext, m *extprocv3.ExternalProcessor) (*ExtProcConfig, error) {
	gs := m.GetGrpcService()
	if gs == nil {
		if m.GetHttpService() != nil {
			return nil, fieldErrorf("http_service", "not supported: gRPC reaches the processing service over gRPC (grpc_service)")
		}
		return nil, fieldErrorf("grpc_service", "must be set")
	}
	c := &ExtProcConfig{
		FailureModeAllow:         m.GetFailureModeAllow(),
		RequestAttributes:        m.GetRequestAttributes(),
		ResponseAttributes:       m.GetResponseAttributes(),
		DisableImmediateResponse: m.GetDisableImmediateResponse(),
		ObservabilityMode:        m.GetObservabilityMode(),
		DeferredClose:            DefaultExtProcDeferredClose,
		Raw:                      m,
	}
	var err error
	if c.GrpcService, err = parseGrpcService(ctx, gs); err != nil {
		return nil, at("grpc_service", err)
	}
	if m.GetProcessingMode() == nil {
		return nil, fieldErrorf("processing_mode", "must be set")
	}
	if c.Modes, err = extProcModes(m.GetProcessingMode()); err != nil {
		return nil, at("processing_mode", err)
	}
	if r := m.GetMutationRules(); r != nil {
		if c.MutationRules, err = headerMutationRules(r); err != nil {
			return nil, at("mutation_rules", err)
		}
	}
	if fr := m.GetForwardRules(); fr != nil {
		if l := fr.GetAllowedHeaders(); l != nil {
			if c.AllowedHeaders, err = listStringMatcher(l); err != nil {
				return nil, at("forward_rules.allowed_headers", err)
			}
			if c.AllowedHeaders == nil {
				c.AllowedHeaders = []StringMatcher{} // set, but matching nothing
			}
		}
		if l := fr.GetDisallowedHeaders(); l != nil {
			if c.DisallowedHeaders, err = listStringMatcher(l); err != nil {
				return nil, at("forward_rules.disallowed_headers", err)
			}
		}
	}
	if d := m.GetDeferredCloseTimeout(); d != nil {
		v, err := duration(d)
		if err != nil {
			return nil, at("deferred_close_timeout", err)
		}
		if v <= 0 {
			return nil, fieldErrorf("deferred_close_timeout", "must be positive, got %v", v)
		}
		c.DeferredClose = v
	}
	return c, nil
}

// extProcModes validates a ProcessingMode: headers and trailers SEND,
// SKIP or DEFAULT (request and response headers default to SEND, trailers
// to SKIP, as in Envoy); bodies NONE or GRPC, the only mode in which
// gRPC can hand over whole messages (gRFC A93); response_body_mode GRPC
// needs response_trailer_mode SEND, since the trailers end the stream of
// response bodies. request_trailer_mode is ignored: gRPC sends no request
// trailers.
func extProcModes(pm *extprocv3.ProcessingMode) (ExtProcModes, error) {
	var out ExtProcModes
	var err error
	if out.RequestHeaders, err = headerSendMode(pm.GetRequestHeaderMode(), true); err != nil {
		return ExtProcModes{}, at("request_header_mode", err)
	}
	if out.ResponseHeaders, err = headerSendMode(pm.GetResponseHeaderMode(), true); err != nil {
		return ExtProcModes{}, at("response_header_mode", err)
	}
	if out.ResponseTrailers, err = headerSendMode(pm.GetResponseTrailerMode(), false); err != nil {
		return ExtProcModes{}, at("response_trailer_mode", err)
	}
	if out.RequestBody, err = bodySendMode(pm.GetRequestBodyMode()); err != nil {
		return ExtProcModes{}, at("request_body_mode", err)
	}
	if out.ResponseBody, err = bodySendMode(pm.GetResponseBodyMode()); err != nil {
		return ExtProcModes{}, at("response_body_mode", err)
	}
	if out.ResponseBody && !out.ResponseTrailers {
		return ExtProcModes{}, fieldErrorf("response_trailer_mode", "must be SEND when response_body_mode is GRPC, got %v", pm.GetResponseTrailerMode())
	}
	return out, nil
}

func headerSendMode(m extprocv3.ProcessingMode_HeaderSendMode, def bool) (bool, error) {
	switch m {
	case extprocv3.ProcessingMode_DEFAULT:
		return def, nil
	case extprocv3.ProcessingMode_SEND:
		return true, nil
	case extprocv3.ProcessingMode_SKIP:
		return false, nil
	}
	return false, fmt.Errorf("unknown header send mode %d", int32(m))
}

func bodySendMode(m extprocv3.ProcessingMode_BodySendMode) (bool, error) {
	switch m {
	case extprocv3.ProcessingMode_NONE:
		return false, nil
	case extprocv3.ProcessingMode_GRPC:
		return true, nil
	}
	return false, fmt.Errorf("%v not supported: gRPC sends bodies in GRPC mode or not at all (NONE)", m)
}

func parseExtProcPerRouteAny(ctx *DecodeContext, a *anypb.Any) (HTTPFilterConfig, error) {
	if !anyIs(a, extProcPerRouteName) {
		return nil, fmt.Errorf("holds %s, want %s", anyName(a), extProcPerRouteName)
	}
	m := new(extprocv3.ExtProcPerRoute)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("unmarshal ExtProcPerRoute: %v", err)
	}
	return NewExtProcPerRouteConfig(ctx, m)
}

// NewExtProcPerRouteConfig validates an ExtProcPerRoute message as gRPC
// does (gRFC A93): of its overrides, processing_mode and grpc_service as
// in the top-level configuration, the attribute lists and
// failure_mode_allow; its disabled field, and the overrides' metadata
// options and grpc_initial_metadata, are ignored. Errors name the field.
func NewExtProcPerRouteConfig(ctx *DecodeContext, m *extprocv3.ExtProcPerRoute) (*ExtProcPerRouteConfig, error) {
	c := &ExtProcPerRouteConfig{Raw: m}
	o := m.GetOverrides()
	if o == nil {
		return c, nil
	}
	if gs := o.GetGrpcService(); gs != nil {
		g, err := parseGrpcService(ctx, gs)
		if err != nil {
			return nil, at("overrides.grpc_service", err)
		}
		c.GrpcService = g
	}
	if pm := o.GetProcessingMode(); pm != nil {
		modes, err := extProcModes(pm)
		if err != nil {
			return nil, at("overrides.processing_mode", err)
		}
		c.Modes = &modes
	}
	if f := o.GetFailureModeAllow(); f != nil {
		v := f.GetValue()
		c.FailureModeAllow = &v
	}
	if l := o.GetRequestAttributes(); len(l) > 0 {
		c.RequestAttributes = l
	}
	if l := o.GetResponseAttributes(); len(l) > 0 {
		c.ResponseAttributes = l
	}
	return c, nil
}

// ExtProcOf returns the configuration an external processing filter runs
// with, given its effective configuration for a request (see
// HTTPFilter.EffectiveConfig) and the filter's own top-level one: an
// ExtProcPerRouteConfig override replaces the fields it sets. The
// result is a copy when an override applies; top is not changed.
func ExtProcOf(effective, top HTTPFilterConfig) (*ExtProcConfig, error) {
	base, ok := top.(*ExtProcConfig)
	if o, isOverride := effective.(*ExtProcPerRouteConfig); isOverride {
		if !ok || base == nil {
			return nil, fmt.Errorf("resources: no external processing configuration to override (have %T)", top)
		}
		c := *base
		if o.GrpcService != nil {
			c.GrpcService = o.GrpcService
		}
		if o.Modes != nil {
			c.Modes = *o.Modes
		}
		if o.FailureModeAllow != nil {
			c.FailureModeAllow = *o.FailureModeAllow
		}
		if o.RequestAttributes != nil {
			c.RequestAttributes = o.RequestAttributes
		}
		if o.ResponseAttributes != nil {
			c.ResponseAttributes = o.ResponseAttributes
		}
		return &c, nil
	}
	c, ok := effective.(*ExtProcConfig)
	if !ok || c == nil {
		return nil, fmt.Errorf("resources: no external processing configuration (have %T)", effective)
	}
	return c, nil
}
