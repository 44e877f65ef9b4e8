package extproc

import (
	"context"
	"fmt"

	"github.com/goxds/xds/dataplane/extauthz"
)

// Kind is the data plane event a processing request carries, or the event
// a processing response answers.
type Kind int

// The events of an RPC gRPC sends to a processor (gRFC A93); request
// trailers are never sent, since gRPC has none.
const (
	RequestHeaders Kind = iota + 1
	RequestBody
	ResponseHeaders
	ResponseBody
	ResponseTrailers
)

// String names the kind, as the processing protocol does.
func (k Kind) String() string {
	switch k {
	case RequestHeaders:
		return "request_headers"
	case RequestBody:
		return "request_body"
	case ResponseHeaders:
		return "response_headers"
	case ResponseBody:
		return "response_body"
	case ResponseTrailers:
		return "response_trailers"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Request is one message to the processor
// (envoy.service.ext_proc.v3.ProcessingRequest) in the fields gRFC A93
// sets. The adapter turns it into the proto.
type Request struct {
	// Kind says which of request_headers, request_body, response_headers,
	// response_body and response_trailers is set; 0 for none, a message
	// that only returns window (WindowUpdate).
	Kind Kind
	// Headers are the headers or trailers sent (the RPC's, less those
	// forward_rules leave out), for the header kinds.
	Headers map[string][]string
	// EndOfStream: on ResponseHeaders, a Trailers-Only response; on
	// RequestBody, the client's half-close.
	EndOfStream bool
	// Body is one whole serialized message (body kinds).
	Body []byte
	// EndOfStreamWithoutMessage: a half-close with no message (Body
	// empty).
	EndOfStreamWithoutMessage bool
	// Attributes are the configured attributes the adapter knows, on the
	// first event of each direction only; nil otherwise. They go in the
	// "envoy.filters.http.ext_proc" entry of attributes. A value is a
	// string, or a map[string]string (request.headers).
	Attributes map[string]any
	// ObservabilityMode is the filter's observability_mode.
	ObservabilityMode bool
	// ProtocolConfig is set on the stream's first message only:
	// protocol_config with the body modes (GRPC when sent, else NONE).
	ProtocolConfig *ProtocolConfig
	// FlowControl is flow_control_init, on the stream's first message
	// when not in observability mode.
	FlowControl *FlowControlInit
	// WindowUpdate is client_window_update: window returned to the
	// processor for the messages it sent that the data plane has taken.
	WindowUpdate *ClientWindowUpdate
}

// FlowControlInit is a ProcessingRequest's flow_control_init: the four
// initial windows, in bytes of message bodies, of the ext_proc protocol's
// flow control (gRFC A93). The data plane sends client messages to the
// processor (downstream to sidestream on a client, where downstream is
// the application) and gets them back (sidestream to upstream), and the
// same for server messages (upstream to sidestream, sidestream to
// downstream).
type FlowControlInit struct {
	DownstreamToSidestream, SidestreamToUpstream int64
	UpstreamToSidestream, SidestreamToDownstream int64
}

// ClientWindowUpdate is client_window_update: bytes added to the windows
// of the processor's client messages (SidestreamToUpstream) and server
// messages (SidestreamToDownstream).
type ClientWindowUpdate struct {
	SidestreamToUpstream, SidestreamToDownstream int64
}

// ServerWindowUpdate is server_window_update: bytes added (or, negative,
// taken) to the windows of the client messages the data plane sends the
// processor (DownstreamToSidestream) and of the server messages
// (UpstreamToSidestream).
type ServerWindowUpdate struct {
	DownstreamToSidestream, UpstreamToSidestream int64
}

// ProtocolConfig is a ProcessingRequest's protocol_config.
type ProtocolConfig struct {
	// RequestBodyGRPC and ResponseBodyGRPC: the body modes are GRPC;
	// otherwise NONE.
	RequestBodyGRPC, ResponseBodyGRPC bool
}

// Response is one message from the processor
// (envoy.service.ext_proc.v3.ProcessingResponse) in the fields gRFC A93
// reads.
type Response struct {
	// Kind says which of the five event answers is set; 0 when none is
	// (an immediate_response, or only request_drain).
	Kind Kind
	// Replace: the CommonResponse's status is CONTINUE_AND_REPLACE, which
	// gRPC does not support (the stream fails).
	Replace bool
	// SetHeaders and RemoveHeaders are the header_mutation of a header or
	// trailer answer.
	SetHeaders    []extauthz.HeaderOption
	RemoveHeaders []string
	// Body is the body_mutation's streamed_response of a body answer; nil
	// when unset (a body answer without it is a protocol error).
	Body *Body
	// Immediate is immediate_response, when set.
	Immediate *Immediate
	// RequestDrain is request_drain.
	RequestDrain bool
	// WindowUpdate is server_window_update, when set; a response may
	// carry only it. The first one tells the data plane the processor
	// does flow control.
	WindowUpdate *ServerWindowUpdate
}

// Body is a StreamedBodyResponse: one message for the data plane, or the
// end of the client's messages.
type Body struct {
	Data                      []byte
	EndOfStream               bool
	EndOfStreamWithoutMessage bool
	// Compressed is grpc_message_compressed, which gRPC refuses.
	Compressed bool
}

// Immediate is an ImmediateResponse in the fields gRFC A93 reads.
type Immediate struct {
	// Code is grpc_status.status.
	Code uint32
	// Details is details, the status message.
	Details string
	// SetHeaders and RemoveHeaders are headers' mutation, applied to the
	// trailers when answering them.
	SetHeaders    []extauthz.HeaderOption
	RemoveHeaders []string
}

// Stream is one ext_proc stream (a bidirectional
// ExternalProcessor.Process call). Send is called by one goroutine at a
// time, Recv by another; Recv returns io.EOF when the processor ended the
// stream with OK status, and any other error for a non-OK end. Close
// cancels the stream; it may be called more than once and concurrently
// with Send and Recv, which then return.
type Stream interface {
	Send(*Request) error
	Recv() (*Response, error)
	CloseSend() error
	Close()
}

// Client opens processing streams. The adapter makes it from the filter's
// GrpcService (gRFC A102).
type Client interface {
	Open(ctx context.Context) (Stream, error)
}

// FailingClient is a Client whose streams all fail to open with err: an
// adapter's client of a service no channel can be made to, so that the
// filter fails as for a stream that does not open, which
// failure_mode_allow may let through.
func FailingClient(err error) Client { return failingClient{err} }

type failingClient struct{ err error }

func (f failingClient) Open(context.Context) (Stream, error) { return nil, f.err }

// Status is the status an RPC fails with: the processor's immediate
// response, or INTERNAL when its stream failed.
type Status struct {
	// Code is the gRPC status code.
	Code uint32
	// Message is the status message.
	Message string
	// Trailers, when not nil, are the trailers to end the RPC with (an
	// immediate response to the server's trailers).
	Trailers map[string][]string
}

// Error gives the status code and message.
func (s *Status) Error() string {
	return fmt.Sprintf("ext_proc: code %d: %s", s.Code, s.Message)
}

// codeInternal is gRPC's INTERNAL: what an RPC fails with when its
// processing stream fails (gRFC A93).
const codeInternal = 13
