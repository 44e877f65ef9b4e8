// Package extprocgrpc binds the data plane's external processing
// (dataplane/extproc, gRFC A93) to grpc-go, both sides: it opens
// processing streams (envoy.service.ext_proc.v3.ExternalProcessor.Process)
// on the channel to the service the filter's GrpcService names, which the
// owner's extauthzgrpc.Channels keeps (gRFC A102's target and
// credentials), and converts the data plane's plain messages to the protos
// and back; and it runs a grpc-go RPC through the filters' sessions
// (extproc.Session): a channel's unary RPC and ClientStream
// (client_rpc.go, client_stream.go: grpcxds's interceptors call
// NewClientRPC and InvokeUnary once the chain has sent the headers), and
// a server's RPC, its client headers among the chain's filters, then its
// ServerStream and ServerTransportStream around the handler
// (server_rpc.go, server_stream.go: xdsserver calls StartServerRPC,
// ServeUnary and ServeStream). call.go has what both sides do around an
// extproc.Call (a Call's status as gRPC's, a message serialized for the
// processor and back, a unary RPC's one request). The adapters keep
// their configuration, channels and metrics; httpxds runs no external
// processing.
package extprocgrpc

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/goxds/xds/dataplane/extauthz"
	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
)

// AttributesKey is the one key of a ProcessingRequest's attributes: the
// configured attributes go in a Struct under it (gRFC A93).
const AttributesKey = "envoy.filters.http.ext_proc"

// NewClient returns the client of gs's processing service, on a channel
// of channels.
func NewClient(channels *extauthzgrpc.Channels, gs *resources.GrpcService) (extproc.Client, error) {
	conn, md, err := channels.Conn(gs)
	if err != nil {
		return nil, err
	}
	return &client{pc: procv3.NewExternalProcessorClient(conn), md: md, timeout: gs.Timeout}, nil
}

type client struct {
	pc      procv3.ExternalProcessorClient
	md      metadata.MD
	timeout time.Duration
}

// Open implements extproc.Client. The stream carries the service's
// initial metadata and nothing of the data-plane RPC's own outgoing
// metadata, which ctx may hold on a client. The GrpcService's timeout,
// when set, is the stream's deadline (gRFC A102: the deadline of the RPCs
// to the service; grpc-go's filter does the same): a processor that holds
// a stream longer fails it, and its RPC with INTERNAL unless
// failure_mode_allow lets it through.
func (c *client) Open(ctx context.Context) (extproc.Stream, error) {
	ctx = metadata.NewOutgoingContext(ctx, c.md)
	var cancel context.CancelFunc
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	s, err := c.pc.Process(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("extprocgrpc: open: %w", err)
	}
	return &stream{s: s, cancel: cancel}, nil
}

type stream struct {
	s      procv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

func (s *stream) Send(r *extproc.Request) error { return s.s.Send(Request(r)) }

func (s *stream) Recv() (*extproc.Response, error) {
	p, err := s.s.Recv()
	if err != nil {
		return nil, err // io.EOF: the processor's OK end
	}
	return Response(p), nil
}

func (s *stream) CloseSend() error { return s.s.CloseSend() }
func (s *stream) Close()           { s.cancel() }

// Request is r as a ProcessingRequest. Header values travel as
// raw_value, a -bin header's base64-encoded (gRFC A102's rule for a
// HeaderValue gRPC writes).
func Request(r *extproc.Request) *procv3.ProcessingRequest {
	out := &procv3.ProcessingRequest{ObservabilityMode: r.ObservabilityMode}
	switch r.Kind {
	case extproc.RequestHeaders:
		out.Request = &procv3.ProcessingRequest_RequestHeaders{RequestHeaders: httpHeaders(r)}
	case extproc.ResponseHeaders:
		out.Request = &procv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: httpHeaders(r)}
	case extproc.RequestBody:
		out.Request = &procv3.ProcessingRequest_RequestBody{RequestBody: httpBody(r)}
	case extproc.ResponseBody:
		out.Request = &procv3.ProcessingRequest_ResponseBody{ResponseBody: httpBody(r)}
	case extproc.ResponseTrailers:
		out.Request = &procv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: &procv3.HttpTrailers{Trailers: headerMap(r.Headers)}}
	}
	if r.Attributes != nil {
		fields := make(map[string]*structpb.Value, len(r.Attributes))
		for k, v := range r.Attributes {
			fields[k] = attributeValue(v)
		}
		out.Attributes = map[string]*structpb.Struct{AttributesKey: {Fields: fields}}
	}
	if pc := r.ProtocolConfig; pc != nil {
		out.ProtocolConfig = &procv3.ProtocolConfiguration{RequestBodyMode: bodyMode(pc.RequestBodyGRPC), ResponseBodyMode: bodyMode(pc.ResponseBodyGRPC)}
	}
	if f := r.FlowControl; f != nil {
		out.FlowControlInit = &procv3.ProcessingRequest_FlowControlInit{
			InitialWindowDownstreamToSidestream: f.DownstreamToSidestream, InitialWindowSidestreamToUpstream: f.SidestreamToUpstream,
			InitialWindowUpstreamToSidestream: f.UpstreamToSidestream, InitialWindowSidestreamToDownstream: f.SidestreamToDownstream}
	}
	if u := r.WindowUpdate; u != nil {
		out.ClientWindowUpdate = &procv3.ProcessingRequest_ClientWindowUpdate{
			WindowIncrementSidestreamToUpstream: u.SidestreamToUpstream, WindowIncrementSidestreamToDownstream: u.SidestreamToDownstream}
	}
	return out
}

// attributeValue is an attribute's value (extproc.Request.Attributes: a
// string or a map of strings) as a Struct's.
func attributeValue(v any) *structpb.Value {
	switch v := v.(type) {
	case map[string]string:
		fields := make(map[string]*structpb.Value, len(v))
		for k, s := range v {
			fields[k] = structpb.NewStringValue(s)
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: fields})
	case string:
		return structpb.NewStringValue(v)
	}
	return structpb.NewNullValue()
}

func bodyMode(grpcMode bool) extprocfilterv3.ProcessingMode_BodySendMode {
	if grpcMode {
		return extprocfilterv3.ProcessingMode_GRPC
	}
	return extprocfilterv3.ProcessingMode_NONE
}

func httpHeaders(r *extproc.Request) *procv3.HttpHeaders {
	return &procv3.HttpHeaders{Headers: headerMap(r.Headers), EndOfStream: r.EndOfStream}
}

func httpBody(r *extproc.Request) *procv3.HttpBody {
	return &procv3.HttpBody{Body: r.Body, EndOfStream: r.EndOfStream, EndOfStreamWithoutMessage: r.EndOfStreamWithoutMessage}
}

func headerMap(h map[string][]string) *corev3.HeaderMap {
	out := &corev3.HeaderMap{}
	for k, vs := range h {
		for _, v := range vs {
			raw := []byte(v)
			if strings.HasSuffix(k, "-bin") {
				raw = base64.StdEncoding.AppendEncode(nil, raw)
			}
			out.Headers = append(out.Headers, &corev3.HeaderValue{Key: k, RawValue: raw})
		}
	}
	return out
}

// Response is p in the data plane's terms. What gRPC does not read
// (dynamic metadata, mode_override, override_message_timeout, a common
// response's trailers and clear_route_cache, a body mutation other than
// streamed_response) is left out; request_trailers and
// streamed_immediate_response become an answer with no event set, which
// the data plane refuses.
func Response(p *procv3.ProcessingResponse) *extproc.Response {
	out := &extproc.Response{RequestDrain: p.GetRequestDrain()}
	if u := p.GetServerWindowUpdate(); u != nil {
		out.WindowUpdate = &extproc.ServerWindowUpdate{DownstreamToSidestream: u.GetWindowIncrementDownstreamToSidestream(),
			UpstreamToSidestream: u.GetWindowIncrementUpstreamToSidestream()}
	}
	var common *procv3.CommonResponse
	switch r := p.GetResponse().(type) {
	case *procv3.ProcessingResponse_RequestHeaders:
		out.Kind, common = extproc.RequestHeaders, r.RequestHeaders.GetResponse()
	case *procv3.ProcessingResponse_ResponseHeaders:
		out.Kind, common = extproc.ResponseHeaders, r.ResponseHeaders.GetResponse()
	case *procv3.ProcessingResponse_RequestBody:
		out.Kind, common = extproc.RequestBody, r.RequestBody.GetResponse()
	case *procv3.ProcessingResponse_ResponseBody:
		out.Kind, common = extproc.ResponseBody, r.ResponseBody.GetResponse()
	case *procv3.ProcessingResponse_ResponseTrailers:
		out.Kind = extproc.ResponseTrailers
		out.SetHeaders, out.RemoveHeaders = mutation(r.ResponseTrailers.GetHeaderMutation())
	case *procv3.ProcessingResponse_ImmediateResponse:
		im := r.ImmediateResponse
		out.Immediate = &extproc.Immediate{Code: im.GetGrpcStatus().GetStatus(), Details: im.GetDetails()}
		out.Immediate.SetHeaders, out.Immediate.RemoveHeaders = mutation(im.GetHeaders())
	}
	if common != nil {
		out.Replace = common.GetStatus() == procv3.CommonResponse_CONTINUE_AND_REPLACE
		if out.Kind == extproc.RequestHeaders || out.Kind == extproc.ResponseHeaders {
			out.SetHeaders, out.RemoveHeaders = mutation(common.GetHeaderMutation())
		}
		if sr := common.GetBodyMutation().GetStreamedResponse(); sr != nil && (out.Kind == extproc.RequestBody || out.Kind == extproc.ResponseBody) {
			out.Body = &extproc.Body{Data: sr.GetBody(), EndOfStream: sr.GetEndOfStream(),
				EndOfStreamWithoutMessage: sr.GetEndOfStreamWithoutMessage(), Compressed: sr.GetGrpcMessageCompressed()}
		}
	}
	return out
}

// mutation converts a HeaderMutation: a set header's value is its
// raw_value when set, else its value (gRFC A102's header types).
func mutation(m *procv3.HeaderMutation) ([]extauthz.HeaderOption, []string) {
	if m == nil {
		return nil, nil
	}
	var set []extauthz.HeaderOption
	for _, o := range m.GetSetHeaders() {
		h := o.GetHeader()
		v := h.GetValue()
		if len(h.GetRawValue()) > 0 || strings.HasSuffix(h.GetKey(), "-bin") {
			v = string(h.GetRawValue())
		}
		set = append(set, extauthz.HeaderOption{Key: h.GetKey(), Value: v,
			Action: extauthz.AppendAction(o.GetAppendAction()), KeepEmptyValue: o.GetKeepEmptyValue()})
	}
	return set, m.GetRemoveHeaders()
}
