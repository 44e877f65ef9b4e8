package extprocgrpc

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goxds/xds/dataplane/extproc"
	"github.com/goxds/xds/internal/extauthzgrpc"
	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second

// start runs a processing server played by handler and returns a
// Processor for cfg calling it through a trusted GrpcService with
// initial metadata.
func start(t *testing.T, cfg *resources.ExtProcConfig, handler func(procv3.ExternalProcessor_ProcessServer) error) (*extproc.Processor, *testutils.ProcServer) {
	t.Helper()
	srv, err := testutils.StartProcServer(handler)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	channels := &extauthzgrpc.Channels{}
	t.Cleanup(channels.Close)
	cl, err := NewClient(channels, &resources.GrpcService{TargetURI: srv.Target(), Trusted: true,
		ChannelCredentials: resources.GrpcChannelInsecure, InitialMetadata: []resources.HeaderValue{{Key: "x-tenant", Value: "blue"}}})
	if err != nil {
		t.Fatal(err)
	}
	return extproc.New(context.Background(), cfg, cl), srv
}

// A processor over a real gRPC stream: it sees the client's headers (with
// the attributes and protocol_config) and changes them, and replaces each
// client message by its upper-cased copy until the half-close.
func TestProcessingOverGRPC(t *testing.T) {
	got := make(chan *procv3.ProcessingRequest, 8)
	handler := func(s procv3.ExternalProcessor_ProcessServer) error {
		for {
			req, err := s.Recv()
			if err != nil {
				return err
			}
			got <- req
			var resp *procv3.ProcessingResponse
			switch {
			case req.GetRequestHeaders() != nil:
				resp = &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestHeaders{RequestHeaders: &procv3.HeadersResponse{
					Response: &procv3.CommonResponse{HeaderMutation: &procv3.HeaderMutation{
						SetHeaders:    []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-proc", RawValue: []byte("yes")}}},
						RemoveHeaders: []string{"x-drop"},
					}},
				}}}
			case req.GetRequestBody() != nil:
				b := req.GetRequestBody()
				resp = &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestBody{RequestBody: &procv3.BodyResponse{
					Response: &procv3.CommonResponse{BodyMutation: &procv3.BodyMutation{Mutation: &procv3.BodyMutation_StreamedResponse{
						StreamedResponse: &procv3.StreamedBodyResponse{Body: []byte(strings.ToUpper(string(b.GetBody()))),
							EndOfStream: b.GetEndOfStream(), EndOfStreamWithoutMessage: b.GetEndOfStreamWithoutMessage()},
					}}},
				}}}
			}
			if err := s.Send(resp); err != nil {
				return err
			}
		}
	}
	cfg := &resources.ExtProcConfig{Modes: resources.ExtProcModes{RequestHeaders: true, RequestBody: true}, RequestAttributes: []string{"request.path"}}
	p, srv := start(t, cfg, handler)
	c := p.NewCall(context.Background(), map[string]any{"request.path": "/S/M"})
	defer c.Done()
	h, err := c.ClientHeaders(map[string][]string{"x-drop": {"1"}, "x-keep": {"2"}})
	if err != nil {
		t.Fatal(err)
	}
	if h["x-proc"][0] != "yes" || h["x-drop"] != nil || h["x-keep"][0] != "2" {
		t.Fatalf("headers %v", h)
	}
	first := <-got
	if first.GetProtocolConfig().GetRequestBodyMode() != extprocfilterv3.ProcessingMode_GRPC ||
		first.GetAttributes()[AttributesKey].GetFields()["request.path"].GetStringValue() != "/S/M" {
		t.Fatalf("first request %v", first)
	}
	if md := srv.Metadata(); len(md) != 1 || md[0].Get("x-tenant")[0] != "blue" {
		t.Fatalf("stream metadata %v", md)
	}
	for _, m := range []string{"one", "two"} {
		if err := c.ClientMessage([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ClientHalfClose(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, want := range []string{"ONE", "TWO"} {
		m, ok, err := c.NextClientMessage(ctx)
		if err != nil || !ok || string(m) != want {
			t.Fatalf("NextClientMessage = %q, %v, %v; want %q", m, ok, err, want)
		}
	}
	if _, ok, err := c.NextClientMessage(ctx); ok || err != nil {
		t.Fatalf("no half-close: %v, %v", ok, err)
	}
}

// An immediate response's grpc_status fails the RPC; a processor that
// fails its stream fails the RPC with INTERNAL.
func TestImmediateAndFailureOverGRPC(t *testing.T) {
	cfg := &resources.ExtProcConfig{Modes: resources.ExtProcModes{RequestHeaders: true}}
	p, _ := start(t, cfg, func(s procv3.ExternalProcessor_ProcessServer) error {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		if req.GetRequestHeaders().GetHeaders().GetHeaders()[0].GetKey() == "fail" {
			return status.Error(codes.Unavailable, "processor down")
		}
		return s.Send(&procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden}, GrpcStatus: &procv3.GrpcStatus{Status: uint32(codes.PermissionDenied)}, Details: "denied",
		}}})
	})
	for key, want := range map[string]uint32{"deny": uint32(codes.PermissionDenied), "fail": uint32(codes.Internal)} {
		c := p.NewCall(context.Background(), nil)
		_, err := c.ClientHeaders(map[string][]string{key: {"1"}})
		c.Done()
		var st *extproc.Status
		if !errors.As(err, &st) || st.Code != want {
			t.Fatalf("%s: %v, want code %d", key, err, want)
		}
	}
}

// Response's conversions of what gRPC does not take: CONTINUE_AND_REPLACE,
// request_trailers, a compressed body.
func TestResponseConversion(t *testing.T) {
	r := Response(&procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestHeaders{RequestHeaders: &procv3.HeadersResponse{
		Response: &procv3.CommonResponse{Status: procv3.CommonResponse_CONTINUE_AND_REPLACE}}}})
	if r.Kind != extproc.RequestHeaders || !r.Replace {
		t.Fatalf("%+v", r)
	}
	if r := Response(&procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestTrailers{}}); r.Kind != 0 || r.RequestDrain {
		t.Fatalf("request_trailers: %+v", r)
	}
	r = Response(&procv3.ProcessingResponse{RequestDrain: true, Response: &procv3.ProcessingResponse_ResponseBody{ResponseBody: &procv3.BodyResponse{
		Response: &procv3.CommonResponse{BodyMutation: &procv3.BodyMutation{Mutation: &procv3.BodyMutation_StreamedResponse{
			StreamedResponse: &procv3.StreamedBodyResponse{Body: []byte("x"), GrpcMessageCompressed: true}}}}}}})
	if r.Kind != extproc.ResponseBody || !r.RequestDrain || r.Body == nil || !r.Body.Compressed {
		t.Fatalf("%+v", r)
	}
	if _, err := (&stream{s: eofStream{}, cancel: func() {}}).Recv(); err != io.EOF {
		t.Fatalf("Recv at the OK end: %v", err)
	}
}

// eofStream is a processing stream already ended with OK.
type eofStream struct {
	procv3.ExternalProcessor_ProcessClient
}

func (eofStream) Recv() (*procv3.ProcessingResponse, error) { return nil, io.EOF }

// The GrpcService's timeout is the processing stream's deadline (gRFC
// A102), which the processor sees.
func TestTimeoutIsStreamDeadline(t *testing.T) {
	deadlines := make(chan time.Duration, 1)
	srv, err := testutils.StartProcServer(func(s procv3.ExternalProcessor_ProcessServer) error {
		d, ok := s.Context().Deadline()
		left := time.Until(d)
		if !ok {
			left = -1
		}
		deadlines <- left
		if _, err := s.Recv(); err != nil {
			return err
		}
		return s.Send(&procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestHeaders{RequestHeaders: &procv3.HeadersResponse{}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	channels := &extauthzgrpc.Channels{}
	t.Cleanup(channels.Close)
	cl, err := NewClient(channels, &resources.GrpcService{TargetURI: srv.Target(), Trusted: true,
		ChannelCredentials: resources.GrpcChannelInsecure, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := extproc.New(context.Background(), &resources.ExtProcConfig{Modes: resources.ExtProcModes{RequestHeaders: true}}, cl).NewCall(context.Background(), nil)
	defer c.Done()
	if _, err := c.ClientHeaders(map[string][]string{"x": {"1"}}); err != nil {
		t.Fatal(err)
	}
	if left := <-deadlines; left <= 0 || left > time.Hour {
		t.Fatalf("the processor saw %v left before its deadline, want a deadline within the hour", left)
	}
}

// A binary header's value goes to the processor base64-encoded (gRFC
// A102), any other as it is.
func TestBinaryHeaderBase64(t *testing.T) {
	p := Request(&extproc.Request{Kind: extproc.RequestHeaders, Headers: map[string][]string{"x-b-bin": {"\x00\xff"}, "x-t": {"v"}}})
	got := map[string]string{}
	for _, h := range p.GetRequestHeaders().GetHeaders().GetHeaders() {
		got[h.GetKey()] = string(h.GetRawValue())
	}
	if got["x-b-bin"] != "AP8=" || got["x-t"] != "v" {
		t.Fatalf("headers sent %v, want x-b-bin AP8= and x-t v", got)
	}
}

// The flow control fields (gRFC A93) both ways: flow_control_init and
// client_window_update, on a message with an event and on one with none;
// a server_window_update alone is a Response with no event.
func TestFlowControlConversion(t *testing.T) {
	init := &extproc.FlowControlInit{DownstreamToSidestream: 1, SidestreamToUpstream: 2, UpstreamToSidestream: 3, SidestreamToDownstream: 4}
	p := Request(&extproc.Request{Kind: extproc.RequestHeaders, FlowControl: init})
	f := p.GetFlowControlInit()
	if f.GetInitialWindowDownstreamToSidestream() != 1 || f.GetInitialWindowSidestreamToUpstream() != 2 ||
		f.GetInitialWindowUpstreamToSidestream() != 3 || f.GetInitialWindowSidestreamToDownstream() != 4 || p.GetClientWindowUpdate() != nil {
		t.Fatalf("flow_control_init: %v", p)
	}
	p = Request(&extproc.Request{WindowUpdate: &extproc.ClientWindowUpdate{SidestreamToUpstream: 5, SidestreamToDownstream: -6}})
	u := p.GetClientWindowUpdate()
	if p.GetRequest() != nil || u.GetWindowIncrementSidestreamToUpstream() != 5 || u.GetWindowIncrementSidestreamToDownstream() != -6 || p.GetFlowControlInit() != nil {
		t.Fatalf("client_window_update alone: %v", p)
	}
	r := Response(&procv3.ProcessingResponse{ServerWindowUpdate: &procv3.ProcessingResponse_ServerWindowUpdate{
		WindowIncrementDownstreamToSidestream: -7, WindowIncrementUpstreamToSidestream: 8}})
	if r.Kind != 0 || r.WindowUpdate == nil || r.WindowUpdate.DownstreamToSidestream != -7 || r.WindowUpdate.UpstreamToSidestream != 8 {
		t.Fatalf("server_window_update alone: %+v", r)
	}
	if r := Response(&procv3.ProcessingResponse{}); r.WindowUpdate != nil {
		t.Fatalf("no server_window_update: %+v", r.WindowUpdate)
	}
}
