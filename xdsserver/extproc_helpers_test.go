package xdsserver_test

import (
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goxds/xds/testutils"
	"github.com/goxds/xds/xdsserver"
)

// The helpers of extproc_e2e_test.go: the environment, a scripted
// processor, and the answers it gives.

// procRoutes serves every method (non-forwarding); SayBye's route has
// sayByeOverride, when set, as its typed_per_filter_config for the filter
// "proc".
func procRoutes(sayByeOverride *anypb.Any) *routev3.RouteConfiguration {
	nf := &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}}
	bye := &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: sayBye}}, Action: nf}
	if sayByeOverride != nil {
		bye.TypedPerFilterConfig = map[string]*anypb.Any{"proc": sayByeOverride}
	}
	return &routev3.RouteConfiguration{Name: "proc-routes", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{bye, {Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: nf}},
	}}}
}

// procEnv is a serving server (Greeter and Echo) whose chain has filter,
// with target in the bootstrap's allowed_grpc_services.
func procEnv(t *testing.T, target string, filter *hcmv3.HttpFilter, rc *routev3.RouteConfiguration) *env {
	t.Helper()
	return procEnvChain(t, target, rc, filter)
}

// procEnvChain is procEnv with a chain of filters.
func procEnvChain(t *testing.T, target string, rc *routev3.RouteConfiguration, filters ...*hcmv3.HttpFilter) *env {
	t.Helper()
	e := newEnvWith(t, testutils.ManagementServerOptions{}, testutils.AllowGRPCService(target))
	e.srv.RegisterService(&echoDesc, struct{}{})
	e.update(testutils.Resources{Listeners: []*listenerv3.Listener{e.serverListener(nil, rc, filters...)}})
	e.waitMode(xdsserver.ServingModeServing)
	return e
}

// startProc starts a processor answering each request as f says, and
// counts the streams opened.
func startProc(t *testing.T, f func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error)) (*testutils.ProcServer, *atomic.Int32) {
	t.Helper()
	var streams atomic.Int32
	each := testutils.ProcessEach(f)
	p, err := testutils.StartProcServer(func(s procv3.ExternalProcessor_ProcessServer) error {
		streams.Add(1)
		return each(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, &streams
}

// setHeaders is a mutation setting each key to its value (key, value,
// key, value...).
func setHeaders(kv ...string) *procv3.HeaderMutation {
	m := &procv3.HeaderMutation{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.SetHeaders = append(m.SetHeaders, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])}})
	}
	return m
}

func answerRequestHeaders(m *procv3.HeaderMutation) *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestHeaders{RequestHeaders: &procv3.HeadersResponse{
		Response: &procv3.CommonResponse{HeaderMutation: m}}}}
}

func answerResponseHeaders(m *procv3.HeaderMutation) *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &procv3.HeadersResponse{
		Response: &procv3.CommonResponse{HeaderMutation: m}}}}
}

func answerTrailers(m *procv3.HeaderMutation) *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &procv3.TrailersResponse{HeaderMutation: m}}}
}

// answerBody gives back one message (a StringValue of v; none when
// noMessage), ending the client's messages when eos.
func answerBody(request bool, v string, eos, noMessage bool) *procv3.ProcessingResponse {
	var body []byte
	if !noMessage {
		body, _ = proto.Marshal(wrapperspb.String(v))
	}
	br := &procv3.BodyResponse{Response: &procv3.CommonResponse{BodyMutation: &procv3.BodyMutation{Mutation: &procv3.BodyMutation_StreamedResponse{
		StreamedResponse: &procv3.StreamedBodyResponse{Body: body, EndOfStream: eos, EndOfStreamWithoutMessage: eos && noMessage}}}}}
	if request {
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestBody{RequestBody: br}}
	}
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
}

// bodyValue is the StringValue a body event carries ("" for none).
func bodyValue(t *testing.T, b *procv3.HttpBody) string {
	v := new(wrapperspb.StringValue)
	if err := proto.Unmarshal(b.GetBody(), v); err != nil {
		t.Errorf("body %q is not a StringValue: %v", b.GetBody(), err)
	}
	return v.GetValue()
}

func headerValue(h *corev3.HeaderMap, key string) string {
	for _, v := range h.GetHeaders() {
		if v.GetKey() == key {
			return string(v.GetRawValue())
		}
	}
	return ""
}

// marking is a processor in GRPC body mode for both directions that
// appends "-proc" to every client message (its end_of_stream kept) and
// wraps every server message in <>, and answers headers and trailers
// unchanged.
func marking(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
	switch {
	case r.GetRequestHeaders() != nil:
		return []*procv3.ProcessingResponse{answerRequestHeaders(nil)}, nil
	case r.GetResponseHeaders() != nil:
		return []*procv3.ProcessingResponse{answerResponseHeaders(nil)}, nil
	case r.GetResponseTrailers() != nil:
		return []*procv3.ProcessingResponse{answerTrailers(nil)}, nil
	case r.GetRequestBody() != nil:
		b := r.GetRequestBody()
		v, _ := unmarshalString(b.GetBody())
		if !b.GetEndOfStreamWithoutMessage() {
			v += "-proc"
		}
		return []*procv3.ProcessingResponse{answerBody(true, v, b.GetEndOfStream(), b.GetEndOfStreamWithoutMessage())}, nil
	case r.GetResponseBody() != nil:
		v, _ := unmarshalString(r.GetResponseBody().GetBody())
		return []*procv3.ProcessingResponse{answerBody(false, "<"+v+">", false, false)}, nil
	}
	return nil, nil
}

func unmarshalString(b []byte) (string, error) {
	v := new(wrapperspb.StringValue)
	err := proto.Unmarshal(b, v)
	return v.GetValue(), err
}

func grpcBodies(m *extprocv3.ExternalProcessor) {
	m.ProcessingMode = &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_GRPC,
		ResponseBodyMode: extprocv3.ProcessingMode_GRPC, ResponseTrailerMode: extprocv3.ProcessingMode_SEND}
}
