package testutils

import (
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The processors' pieces below are what the external processing tests of
// grpcxds (client side) and xdsserver (server side) both answer with; the
// messages they carry in GRPC body mode are StringValues.

// StartProcCounting starts a ProcServer answering each request as f says
// (ProcessEach), its gRPC server made with opts, stopped when t ends, and
// counts the streams opened.
func StartProcCounting(t testing.TB, f func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error), opts ...grpc.ServerOption) (*ProcServer, *atomic.Int32) {
	t.Helper()
	var streams atomic.Int32
	each := ProcessEach(f)
	p, err := StartProcServer(func(s procv3.ExternalProcessor_ProcessServer) error {
		streams.Add(1)
		return each(s)
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, &streams
}

// ProcSetHeaders is a mutation setting each key to its value (key, value,
// key, value...), as raw_value.
func ProcSetHeaders(kv ...string) *procv3.HeaderMutation {
	m := &procv3.HeaderMutation{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.SetHeaders = append(m.SetHeaders, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])}})
	}
	return m
}

// ProcRequestHeaders answers the client's headers with mutation m.
func ProcRequestHeaders(m *procv3.HeaderMutation) *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestHeaders{RequestHeaders: &procv3.HeadersResponse{
		Response: &procv3.CommonResponse{HeaderMutation: m}}}}
}

// ProcResponseHeaders answers the server's headers with mutation m.
func ProcResponseHeaders(m *procv3.HeaderMutation) *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &procv3.HeadersResponse{
		Response: &procv3.CommonResponse{HeaderMutation: m}}}}
}

// ProcTrailers answers the server's trailers with mutation m.
func ProcTrailers(m *procv3.HeaderMutation) *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &procv3.TrailersResponse{HeaderMutation: m}}}
}

// ProcBody answers a body event (the client's when request) with one
// message, a StringValue of v (none when noMessage), ending that
// direction's messages when eos.
func ProcBody(request bool, v string, eos, noMessage bool) *procv3.ProcessingResponse {
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

// ProcImmediate is an immediate response ending the RPC with code and
// details.
func ProcImmediate(code codes.Code, details string) *procv3.ProcessingResponse {
	return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
		GrpcStatus: &procv3.GrpcStatus{Status: uint32(code)}, Details: details}}}
}

// ProcHeaderValue is the raw_value of h's first header named key ("" for
// none).
func ProcHeaderValue(h *corev3.HeaderMap, key string) string {
	for _, v := range h.GetHeaders() {
		if v.GetKey() == key {
			return string(v.GetRawValue())
		}
	}
	return ""
}

// ProcString is the value of the StringValue b serializes; a b that is
// not one gives what of it parsed ("" for nothing), which a test's
// comparison then fails on.
func ProcString(b []byte) string {
	v := new(wrapperspb.StringValue)
	_ = proto.Unmarshal(b, v)
	return v.GetValue()
}

// ProcMarking returns a processor in GRPC body mode for both directions
// that appends "-proc" to every client message (its end_of_stream kept)
// and wraps every server message in <>; it answers the client's headers,
// the server's and its trailers with the mutations given (nil: none).
func ProcMarking(reqHeaders, respHeaders, trailers *procv3.HeaderMutation) func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
	return func(r *procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error) {
		switch {
		case r.GetRequestHeaders() != nil:
			return []*procv3.ProcessingResponse{ProcRequestHeaders(reqHeaders)}, nil
		case r.GetResponseHeaders() != nil:
			return []*procv3.ProcessingResponse{ProcResponseHeaders(respHeaders)}, nil
		case r.GetResponseTrailers() != nil:
			return []*procv3.ProcessingResponse{ProcTrailers(trailers)}, nil
		case r.GetRequestBody() != nil:
			b := r.GetRequestBody()
			v := ProcString(b.GetBody())
			if !b.GetEndOfStreamWithoutMessage() {
				v += "-proc"
			}
			return []*procv3.ProcessingResponse{ProcBody(true, v, b.GetEndOfStream(), b.GetEndOfStreamWithoutMessage())}, nil
		case r.GetResponseBody() != nil:
			return []*procv3.ProcessingResponse{ProcBody(false, "<"+ProcString(r.GetResponseBody().GetBody())+">", false, false)}, nil
		}
		return nil, nil
	}
}

// ProcGRPCBodies sets m's processing mode to send both directions'
// messages in GRPC body mode, and the trailers.
func ProcGRPCBodies(m *extprocv3.ExternalProcessor) {
	m.ProcessingMode = &extprocv3.ProcessingMode{RequestBodyMode: extprocv3.ProcessingMode_GRPC,
		ResponseBodyMode: extprocv3.ProcessingMode_GRPC, ResponseTrailerMode: extprocv3.ProcessingMode_SEND}
}
